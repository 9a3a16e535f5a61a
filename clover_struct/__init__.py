"""clover-struct: structured extraction and linked decisions with a block-diffusion LM."""

from .api import extract, extract_many
from .errors import CheckpointError, CloverError, ExtractionError, SchemaError
from .judgments import decide, exactly_one, excludes, implies, predicate

__all__ = ["extract", "extract_many", "decide", "implies", "excludes", "exactly_one", "predicate", "load_model", "CloverError", "CheckpointError", "SchemaError",
           "ExtractionError"]


def load_model(path=None, *, device=None, dtype=None):
    """Load a model directory (config.json, safetensors weights, tokenizer.json).

    With no path, the embedded clover-mini that ships in the package.
    """
    from pathlib import Path

    from .engine.checkpoint import load_model as _load

    if path is None:
        path = Path(__file__).parent / "models" / "clover-mini"
        if not (path / "config.json").is_file():
            raise CheckpointError(f"the embedded model is not in this installation ({path}); "
                                  "pass a model directory to load_model(path)")
    return _load(path, device=device, dtype=dtype)
