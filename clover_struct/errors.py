"""The error hierarchy. Every error names what is wrong and says what to do.

    CloverError             base of all of them
      CheckpointError       a model directory, config, tensor or tokenizer is wrong
      UsageError            a call's arguments cannot be carried out (also a ValueError)
      SchemaError           a schema uses a construct that cannot be laid out
      ExtractionError       no valid value could be decoded for a field
        InternalError       an unexpected exception while decoding one record (a bug; the
                            cause chained): that record's error, its neighbours unaffected

The first three are the engine's own (engine/errors.py), re-exported here.
"""

from .engine.errors import CheckpointError, CloverError, UsageError


class SchemaError(CloverError):
    """A schema uses a construct that cannot be laid out as a canvas."""

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"field `{path or '<root>'}`: {message}")

    def __reduce__(self):  # rebuilt from both arguments, so it crosses process boundaries
        return type(self), (self.path, self.message)


class ExtractionError(CloverError):
    """No valid value could be decoded for a field (or the input cannot be decoded at all)."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"field `{path or '<root>'}`: {reason}")

    def __reduce__(self):
        return type(self), (self.path, self.reason)


class InternalError(ExtractionError):
    """An unexpected exception while decoding one record: a bug in clover-struct, reported as
    that record's error (its cause chained) so that the other records are kept."""


__all__ = ["CloverError", "CheckpointError", "UsageError", "SchemaError", "ExtractionError", "InternalError"]
