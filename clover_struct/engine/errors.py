"""The errors the engine raises, and the base class of every error clover-struct raises.

They live here, at the bottom, so the engine imports nothing of the extraction stack;
`clover_struct.errors` re-exports them beside the errors of schemas and decoding.
"""


class CloverError(Exception):
    """Base class of every error clover-struct raises on purpose."""


class CheckpointError(CloverError):
    """A model directory, config, tensor or tokenizer is missing, corrupt or mismatched."""


class UsageError(CloverError, ValueError):
    """A call asked for something that cannot be done as asked (a device torch does not have,
    a field path the schema lacks, an argument out of range); the message says what to pass."""
