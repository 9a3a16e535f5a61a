"""The prefix cache: what a block step needs of the history, kept per layer.

Attention layers keep keys and values [B, kv_heads, length, head_dim]; Gated
DeltaNet layers keep the last kernel-1 conv inputs [B, channels, kernel-1] and
the recurrent state [B, heads, d_k, d_v]. Rows are left-padded to one length;
`pad` says by how much, so positions and attention masks stay per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .errors import UsageError


@dataclass
class PrefixCache:
    pad: torch.Tensor                                   # [B] left padding per row
    length: int = 0                                     # columns held (prompt + committed blocks)
    keys: dict[int, torch.Tensor] = field(default_factory=dict)
    values: dict[int, torch.Tensor] = field(default_factory=dict)
    conv: dict[int, torch.Tensor] = field(default_factory=dict)
    state: dict[int, torch.Tensor] = field(default_factory=dict)

    def select(self, rows) -> "PrefixCache":
        """The cache of a subset of rows (e.g. the canvases still decoding)."""
        pick = lambda d: {i: t[rows] for i, t in d.items()}  # noqa: E731
        return PrefixCache(self.pad[rows], self.length, pick(self.keys), pick(self.values),
                           pick(self.conv), pick(self.state))

    def clone(self) -> "PrefixCache":
        return self.select(slice(None))


def empty_cache(input_ids, lengths) -> PrefixCache:
    """A cache for left-padded prompts [B, P] of `lengths` (None: all P long); UsageError for a
    length outside 1..P (it had made a pad of -1, or a row of no prompt)."""
    B, P = input_ids.shape
    lengths = torch.full((B,), P) if lengths is None else torch.as_tensor(lengths).cpu()
    if lengths.shape != (B,) or not ((lengths >= 1) & (lengths <= P)).all():
        raise UsageError(f"lengths must give each of the {B} prompts a real length in 1..{P}, got {lengths.tolist()}")
    return PrefixCache(pad=(P - lengths).to(input_ids.device))
