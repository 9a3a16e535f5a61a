"""The models: token ids in, logits out. Knows nothing of schemas, JSON or pydantic,
and imports nothing of the rest of clover-struct.

interface   the model interface the decoder uses (prefill, step, commit, prefill_step)
checkpoint  load_model(dir): reads config.json, picks the family (FAMILIES), loads
            memory-mapped safetensors; save_model
config      ModelConfig of the Clover family, named shapes (PRESETS: mini, tiny)
diffusion_gemma  DiffusionGemma (block diffusion over a causal encoder, uniform noise); its
            config and layers in diffusion_gemma_config, diffusion_gemma_layers
model       Clover: hybrid Gated DeltaNet / gated attention / MoE, three masking modes
gated_delta the Gated DeltaNet scans (recurrent reference, chunked, FLA on CUDA)
cache       prefix cache: attention KV and Gated DeltaNet conv + recurrent state
tokenizer   a `tokenizers` wrapper that can hand its vocabulary to outlines-core
errors      CloverError, CheckpointError, UsageError

The names below load their module on first use (PEP 562), so `import clover_struct.engine`
costs nothing until a model is built.
"""

from importlib import import_module

_NAMES = {"load_model": "checkpoint", "save_model": "checkpoint", "ModelConfig": "config", "preset": "config",
          "DiffusionGemma": "diffusion_gemma", "DiffusionGemmaConfig": "diffusion_gemma_config",
          "PRESETS": "config", "CloverModel": "model", "Tokenizer": "tokenizer", "PrefixCache": "cache",
          "DenoisingModel": "interface", "CloverError": "errors", "CheckpointError": "errors",
          "UsageError": "errors"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_NAMES[name]}", __name__), name)


def __dir__():
    return __all__
