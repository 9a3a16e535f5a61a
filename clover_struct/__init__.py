"""clover-struct: structured extraction and linked decisions with a block-diffusion LM.

    from clover_struct import extract, extract_many, decide, load_model
    from clover_struct import Extractor     # for Ray Data, Spark and Dask (clover_struct.distributed)

Names load their module on first use (PEP 562): importing the package, or any part
of it such as `clover_struct.engine`, loads nothing else.
"""

from importlib import import_module

_NAMES = {"extract": "api", "extract_many": "api", "load_model": "api",
          "decide": "linked", "implies": "linked", "excludes": "linked", "exactly_one": "linked",
          "predicate": "linked", "Extractor": "distributed",
          "CloverError": "errors", "CheckpointError": "errors", "UsageError": "errors",
          "SchemaError": "errors", "ExtractionError": "errors", "InternalError": "errors"}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_NAMES[name]}", __name__), name)


def __dir__():
    return __all__
