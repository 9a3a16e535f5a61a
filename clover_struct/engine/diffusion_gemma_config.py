"""DiffusionGemmaConfig: the text model of a DiffusionGemma checkpoint, read from config.json.

Reads transformers' `diffusion_gemma` configs (DiffusionGemmaForBlockDiffusion, e.g.
google/diffusiongemma-26B-A4B-it): the architecture sits in `text_config`, the canvas
length beside it. Full-attention layers may have their own head dim and KV heads, spelled
either as a `per_layer_config` (what transformers writes) or as `global_head_dim` /
`num_global_key_value_heads` (Gemma-4 checkpoints); absent both, transformers' defaults
hold (head dim 512). The vision tower is ignored, with one warning. Knows nothing of
weights, tensors or schemas.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass, field

from .config import check_fields
from .errors import CheckpointError

SLIDING, FULL = "sliding_attention", "full_attention"
# transformers' defaults when config.json gives no rope_parameters
DEFAULT_ROPE = {SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
                FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0}}


def _caller_level() -> int:
    """The `stacklevel` of the first caller outside this package, for a warning raised by the
    function that calls this one: the warning names the user's line, not ours."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("clover_struct."):
        frame, level = frame.f_back, level + 1
    return level


@dataclass
class DiffusionGemmaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int             # the dense MLP beside the experts, and the self-conditioning MLP
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int           # sliding layers
    head_dim: int                      # sliding layers
    global_head_dim: int               # full-attention layers
    num_global_key_value_heads: int    # full-attention layers
    num_experts: int
    top_k_experts: int
    moe_intermediate_size: int
    layer_types: list[str]
    sliding_window: int = 512          # a history token sees itself and the 511 before it
    rms_norm_eps: float = 1e-6
    rope_parameters: dict = field(default_factory=lambda: dict(DEFAULT_ROPE))
    final_logit_softcapping: float | None = 30.0
    max_position_embeddings: int = 131_072
    block_size: int = 256              # canvas_length: the decoder denoises this many tokens at once
    # Token ids come from the checkpoint. No mask token: canvases start as uniform random tokens.
    mask_token_id: int | None = None
    pad_token_id: int | None = 0
    eos_token_id: int | None = 1
    eos_token_ids: tuple[int, ...] = (1,)
    bos_token_id: int | None = 2

    def __post_init__(self):
        if len(self.layer_types) != self.num_hidden_layers:
            raise CheckpointError(f"config.json: layer_types has {len(self.layer_types)} entries "
                                  f"but num_hidden_layers is {self.num_hidden_layers}")
        unknown = set(self.layer_types) - {SLIDING, FULL}
        if unknown:
            raise CheckpointError(f"config.json: unknown layer types {sorted(unknown)}; expected {SLIDING}, {FULL}")
        for kv in (self.num_key_value_heads, self.num_global_key_value_heads):
            if self.num_attention_heads % kv:
                raise CheckpointError(f"config.json: num_attention_heads {self.num_attention_heads} is not a "
                                      f"multiple of {kv} key/value heads")
        if not 0 < self.top_k_experts <= self.num_experts:
            raise CheckpointError(f"config.json: top_k_experts {self.top_k_experts} must be in 1..num_experts "
                                  f"({self.num_experts})")
        for kind in set(self.layer_types):
            self.rope(kind)  # refuses rope types it cannot compute, at load time

    def head_dim_of(self, kind: str) -> int:
        return self.global_head_dim if kind == FULL else self.head_dim

    def kv_heads_of(self, kind: str) -> int:
        return self.num_global_key_value_heads if kind == FULL else self.num_key_value_heads

    def rope(self, kind: str) -> tuple[float, int, float]:
        """RoPE of a layer type as (theta, turning pairs, factor): pair (j, j + head_dim/2) turns at
        rate theta^(-2j/head_dim) / factor for j < turning pairs and stays still after. Default RoPE
        turns every pair; proportional RoPE (full attention) turns the first partial_rotary_factor."""
        p, d = self.rope_parameters.get(kind), self.head_dim_of(kind)
        if not isinstance(p, dict):   # (a flat {rope_type, rope_theta} had been read as no RoPE given)
            raise CheckpointError(f"config.json: rope_parameters has no entry for the {kind} layers; give one "
                                  f"per layer type, as {{\"{kind}\": {{\"rope_type\": ..., \"rope_theta\": ...}}}}")
        rope_type, theta = p.get("rope_type", "default"), p.get("rope_theta", 10_000.0)
        partial, factor = p.get("partial_rotary_factor", 1.0), p.get("factor", 1.0)
        for key, value in (("rope_theta", theta), ("partial_rotary_factor", partial), ("factor", factor)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise CheckpointError(f"config.json: {key} of the {kind} layers' RoPE is {value!r}; expected a "
                                      "positive number")
        if partial > 1:
            raise CheckpointError(f"config.json: partial_rotary_factor of the {kind} layers' RoPE is {partial}; "
                                  "expected at most 1")
        if rope_type == "default":
            if partial != 1.0:  # transformers could not broadcast such tables either
                raise CheckpointError(f"config.json: default RoPE with partial_rotary_factor {partial} on "
                                      f"{kind} is not supported")
            return theta, d // 2, 1.0
        if rope_type == "proportional":
            return theta, int(partial * d // 2), factor
        raise CheckpointError(f"config.json: rope_type {rope_type!r} on {kind} is not supported; "
                              "expected default or proportional")

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "config.json") -> "DiffusionGemmaConfig":
        text = d.get("text_config")
        if not isinstance(text, dict):
            raise CheckpointError(f"{source}: a diffusion_gemma config needs a text_config object")
        if d.get("vision_config"):
            warnings.warn(f"{source}: the vision tower is ignored; DiffusionGemma runs on text only",
                          stacklevel=_caller_level())
        if d.get("tie_word_embeddings", True) is False or text.get("tie_word_embeddings", True) is False:
            raise CheckpointError(f"{source}: tie_word_embeddings=false (separate encoder, decoder and output "
                                  "weights) is not supported")
        if text.get("use_bidirectional_attention") == "all":
            raise CheckpointError(f"{source}: use_bidirectional_attention='all' (a bidirectional encoder) is "
                                  "not supported; the encoder must be causal")
        if text.get("attention_bias"):
            raise CheckpointError(f"{source}: attention_bias=true is not supported")
        act = text.get("hidden_activation", "gelu_pytorch_tanh")
        if act != "gelu_pytorch_tanh":
            raise CheckpointError(f"{source}: hidden_activation {act!r} is not supported; expected gelu_pytorch_tanh")
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "head_dim", "num_experts", "top_k_experts", "moe_intermediate_size")
        missing = [k for k in required if text.get(k) is None]
        if missing:
            raise CheckpointError(f"{source}: text_config lacks {missing}")
        keys = ("sliding_window", "rms_norm_eps", "max_position_embeddings", "pad_token_id", "bos_token_id")
        values = {**{k: text[k] for k in required}, **{k: text[k] for k in keys if k in text}}
        check_fields(cls, {**values, "layer_types": text.get("layer_types") or []}, source)
        n = text["num_hidden_layers"]
        layer_types = list(text.get("layer_types") or [SLIDING if (i + 1) % 6 else FULL for i in range(n)])
        if layer_types:
            layer_types[-1] = FULL  # transformers forces the last layer to full attention
        eos = text.get("eos_token_id", 1)
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
        canvas = d.get("canvas_length", 256)
        if isinstance(canvas, bool) or not isinstance(canvas, int) or canvas < 1:
            raise CheckpointError(f"{source}: canvas_length is {canvas!r}; expected a whole number from 1")
        values.update(layer_types=layer_types, rope_parameters=text.get("rope_parameters") or dict(DEFAULT_ROPE),
                      final_logit_softcapping=text.get("final_logit_softcapping", 30.0),
                      block_size=canvas, eos_token_id=eos_ids[0] if eos_ids else None,
                      eos_token_ids=eos_ids)
        check_fields(cls, values, source)
        try:
            return cls(**{**values, **_attention_shapes(text, layer_types, source)})
        except TypeError as e:
            raise CheckpointError(f"{source}: {e}") from e


def _attention_shapes(text: dict, layer_types: list[str], source: str) -> dict:
    """Head dim and KV heads of each layer type, after the per-layer overrides transformers applies."""
    base = {"head_dim": text["head_dim"], "num_key_value_heads": text["num_key_value_heads"]}
    overrides = text.get("per_layer_config")
    if overrides is None:  # what transformers derives for the full-attention layers
        full = {"head_dim": text.get("global_head_dim", 512)}
        if text.get("attention_k_eq_v", True) and text.get("num_global_key_value_heads") is not None:
            full["num_key_value_heads"] = text["num_global_key_value_heads"]
        overrides = {i: full for i, kind in enumerate(layer_types) if kind == FULL}
    found = {}
    for i, kind in enumerate(layer_types):
        o = overrides.get(i, overrides.get(str(i))) or {}
        if set(o) - set(base):
            raise CheckpointError(f"{source}: per_layer_config of layer {i} overrides {sorted(set(o) - set(base))}; "
                                  "only head_dim and num_key_value_heads may differ per layer")
        shape = (o.get("head_dim", base["head_dim"]), o.get("num_key_value_heads", base["num_key_value_heads"]))
        if found.setdefault(kind, shape) != shape:
            raise CheckpointError(f"{source}: {kind} layers differ in head dim or KV heads ({found[kind]} vs "
                                  f"{shape} at layer {i}); one shape per layer type is supported")
    sliding = found.get(SLIDING, tuple(base.values()))
    return {"head_dim": sliding[0], "num_key_value_heads": sliding[1],
            "global_head_dim": found[FULL][0], "num_global_key_value_heads": found[FULL][1]}
