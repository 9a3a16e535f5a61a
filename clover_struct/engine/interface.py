"""The model interface: what the decoder needs of a model, and nothing more.

Every family under engine/ implements it; the decoder, the API and the tests' mock
models use it and nothing else. Rows are left-padded to one length: `lengths` gives each
prompt's real length, and the cache remembers the padding, so a row in a batch computes
what it computes alone. A cache is opaque to callers except for `select(rows)`.

    cache, logits = model.prefill(prompt_ids, lengths)      # encode the prompts once
    logits = model.step(block_ids, cache, at=(rows, cols))  # one denoising step of a block
    cache, logits = model.prefill_step(history, block_ids, lengths, at=..., cache=None)
                                                            # the two in one pass
    model.commit(block_ids, cache)                          # a finished block joins the history

`at` asks for the logits at some (row, column) pairs of the block only ([N, vocab]): the
output head is a large share of a step over a long block. Knows nothing of schemas.

Two optional parts, for uniform-noise families (DiffusionGemma):

    model.noise = "uniform"         # unwritten canvas positions are shown as random tokens
                                    # (absent or "mask": they hold the mask token)
    model.step(..., self_conditioning=logits)   # and prefill_step: the previous step's
                                    # logits over the whole block [B, C, vocab], None at first

The decoder reads `noise` with getattr and passes `self_conditioning` only to a `step`
whose signature names it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


class Cache(Protocol):
    def select(self, rows) -> "Cache":
        """The cache of a subset of rows (the canvases still decoding)."""


class Spec(Protocol):
    """The parts of a model's config the decoder reads. Token ids come from the checkpoint."""
    vocab_size: int
    max_position_embeddings: int    # the context: prompt and canvas together
    block_size: int                 # the longest block a step denoises
    mask_token_id: int | None       # None: the family cannot denoise a masked canvas
    pad_token_id: int | None
    eos_token_id: int | None


@runtime_checkable
class DenoisingModel(Protocol):
    """The required part; `noise` and `self_conditioning` are optional (see the module's text)."""
    config: Spec
    tokenizer: Any                  # engine.tokenizer.Tokenizer, or None
    device: torch.device

    def prefill(self, input_ids: torch.Tensor, lengths=None) -> tuple[Cache, torch.Tensor]: ...

    def step(self, block_ids: torch.Tensor, cache: Cache, *, at=None) -> torch.Tensor: ...

    def prefill_step(self, input_ids: torch.Tensor, block_ids: torch.Tensor, lengths=None, *, at=None,
                     cache: Cache | None = None) -> tuple[Cache, torch.Tensor]: ...

    def commit(self, block_ids: torch.Tensor, cache: Cache) -> torch.Tensor: ...
