"""ModelConfig: the architecture, read from and written to config.json.

Reads our own `model_type: "clover"` and transformers' Qwen3.5-MoE text configs
(`qwen3_5_moe_text`, or `qwen3_5_moe` with a nested `text_config`). The
diffusion fields (mask and pad ids, block size) live beside the architecture;
a checkpoint without a mask id still runs causally.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

from .errors import CheckpointError, UsageError

MODEL_TYPES = ("clover", "qwen3_5_moe_text", "qwen3_5_moe")
LAYER_TYPES = ("linear_attention", "full_attention")


def check_fields(cls, values: dict, source: str) -> None:
    """CheckpointError naming the first of the `values` for config dataclass `cls` that is of the
    wrong kind: sizes are positive integers, token ids integers from 0, real numbers finite and
    positive, flags booleans, layer types a list of names (a string would be read letter by letter)."""
    for f in fields(cls):
        if f.name not in values:
            continue
        v, kind = values[f.name], str(f.type)
        if v is None and "None" in kind:
            continue
        if kind.startswith("int"):
            least = 0 if f.name.endswith("token_id") else 1
            ok, want = type(v) is int and v >= least, f"an integer from {least}"
        elif kind.startswith("float"):
            ok, want = type(v) in (int, float) and math.isfinite(v) and v > 0, "a positive number"
        elif kind == "bool":
            ok, want = type(v) is bool, "true or false"
        elif kind == "list[str]":
            ok, want = isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of layer type names"
        elif kind.startswith("tuple[int"):
            ok, want = all(type(x) is int and x >= 0 for x in v), "token ids"
        else:
            ok, want = isinstance(v, dict), "an object"
        if not ok:
            raise CheckpointError(f"{source}: {f.name} is {v!r}; expected {want}")


@dataclass
class ModelConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    # gated full attention
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    # Gated DeltaNet
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int = 4
    # mixture of experts
    num_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 64
    shared_expert_intermediate_size: int = 64
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10_000.0
    partial_rotary_factor: float = 0.25
    max_position_embeddings: int = 32_768
    tie_word_embeddings: bool = False
    layer_types: list[str] = field(default_factory=list)  # default: attention every 4th layer
    # block diffusion; ids come from the checkpoint, never from literals
    mask_token_id: int | None = None
    pad_token_id: int | None = None
    eos_token_id: int | None = None
    block_size: int = 32

    def __post_init__(self):
        if not 0 < self.partial_rotary_factor <= 1:
            raise CheckpointError(f"config.json: partial_rotary_factor is {self.partial_rotary_factor}; expected a "
                                  "share of the head dimension, above 0 and at most 1")
        if not self.layer_types:
            self.layer_types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                                for i in range(self.num_hidden_layers)]
        if len(self.layer_types) != self.num_hidden_layers:
            raise CheckpointError(f"config.json: layer_types has {len(self.layer_types)} entries "
                                  f"but num_hidden_layers is {self.num_hidden_layers}")
        for t in self.layer_types:
            if t not in LAYER_TYPES:
                raise CheckpointError(f"config.json: unknown layer type {t!r}; expected one of {LAYER_TYPES}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise CheckpointError("config.json: num_attention_heads must be a multiple of num_key_value_heads")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise CheckpointError("config.json: linear_num_value_heads must be a multiple of linear_num_key_heads")
        if self.num_experts_per_tok > self.num_experts:
            raise CheckpointError("config.json: num_experts_per_tok exceeds num_experts")

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "config.json") -> "ModelConfig":
        model_type = d.get("model_type")
        if model_type not in MODEL_TYPES:
            raise CheckpointError(f"{source}: model_type {model_type!r} is not supported; "
                                  f"expected one of {', '.join(MODEL_TYPES)}")
        if model_type == "qwen3_5_moe":
            outer = d
            d = dict(d.get("text_config") or {})
            if not d:
                raise CheckpointError(f"{source}: model_type qwen3_5_moe needs a text_config")
            for key in ("mask_token_id", "pad_token_id", "eos_token_id", "block_size", "tie_word_embeddings"):
                d.setdefault(key, outer.get(key))
        d = {k: v for k, v in d.items() if v is not None}
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
        if (kind := rope.get("rope_type", rope.get("type", "default"))) != "default":
            raise CheckpointError(f"{source}: rope type {kind!r} is not supported; "
                                  "only default (un-scaled) RoPE is")
        d.setdefault("rope_theta", rope.get("rope_theta", 10_000.0))
        d.setdefault("partial_rotary_factor", rope.get("partial_rotary_factor", 0.25))
        if d.get("hidden_act", "silu") != "silu":
            raise CheckpointError(f"{source}: hidden_act {d['hidden_act']!r} is not supported; expected silu")
        if d.get("attention_bias"):
            raise CheckpointError(f"{source}: attention_bias=true is not supported")
        if isinstance(d.get("eos_token_id"), list):
            d["eos_token_id"] = d["eos_token_id"][0]
        names = {f.name for f in fields(cls)}
        missing = [f.name for f in fields(cls) if f.name not in d
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise CheckpointError(f"{source}: missing required keys {missing}")
        values = {k: v for k, v in d.items() if k in names}
        check_fields(cls, values, source)
        try:
            return cls(**values)
        except TypeError as e:
            raise CheckpointError(f"{source}: {e}") from e

    @classmethod
    def from_file(cls, path: str | Path) -> "ModelConfig":
        path = Path(path)
        if not path.is_file():
            raise CheckpointError(f"{path}: no config.json; a model directory needs one "
                                  "(save models with clover_struct.engine.checkpoint.save_model)")
        try:
            d = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: not valid JSON ({e})") from e
        if not isinstance(d, dict):
            raise CheckpointError(f"{path}: expected a JSON object")
        return cls.from_dict(d, source=str(path))

    def to_dict(self, model_type: str = "clover") -> dict:
        """config.json. model_type "qwen3_5_moe_text" writes what transformers' Qwen3.5-MoE reads
        (the causal network is the same), keeping the diffusion fields beside it."""
        d = asdict(self)
        if model_type == "clover":
            return {"model_type": "clover", **d}
        if model_type != "qwen3_5_moe_text":
            raise UsageError(f"model_type must be 'clover' or 'qwen3_5_moe_text', got {model_type!r}")
        rope = {"rope_type": "default", "rope_theta": d.pop("rope_theta"),
                "partial_rotary_factor": d.pop("partial_rotary_factor")}
        return {"model_type": model_type, "architectures": ["Qwen3_5MoeForCausalLM"], "hidden_act": "silu",
                "rope_parameters": rope, **d}


L, A = LAYER_TYPES
# Named shapes. `mini` is clover-mini, the model that ships in the package (its vocabulary
# is the 3,072-token tokenizer beside it); training builds it from here. `tiny` is what tests
# build: 3 Gated DeltaNet layers and 1 attention layer, 4 experts.
PRESETS = {
    # Four layers, attention in every second: extraction is copying, and a slot position finds
    # its source in the prompt by content and offset, which attention does; a 1-in-4 pattern at
    # this depth would leave that to one layer. Width 128: on 2 CPU cores a training step over
    # ~5k tokens ran at 2.8k tokens/s against 2.3k for width 192 and 1.8k for 256 (measured back
    # to back). One block and a context of 4096: the DispatchMessage canvas is 2,836 tokens and
    # judgment prompts reach ~1,200.
    "mini": dict(vocab_size=3072, hidden_size=128, num_hidden_layers=4, layer_types=[L, A, L, A],
                 num_attention_heads=4, num_key_value_heads=2, head_dim=32, linear_num_key_heads=2,
                 linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32, num_experts=8,
                 num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128,
                 partial_rotary_factor=0.5, max_position_embeddings=4096, block_size=4096),
    "tiny": dict(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=8, linear_value_head_dim=8, num_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=16, shared_expert_intermediate_size=16, partial_rotary_factor=0.5,
                 block_size=8),
}


def preset(name: str, **overrides) -> ModelConfig:
    """The named shape with `overrides` (token ids, vocabulary size, block size, ...)."""
    if name not in PRESETS:
        raise UsageError(f"no preset {name!r}; have {sorted(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **overrides})
