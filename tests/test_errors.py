"""Errors keep what they say across a pickle round trip (multiprocessing pools, saved results)."""

import pickle

import pytest

from clover_struct.errors import CheckpointError, ExtractionError, SchemaError


@pytest.mark.parametrize("error", [
    ExtractionError("area.radius", "no value fits the pattern"),
    SchemaError("tasks", "unsupported type"),
    CheckpointError("model.safetensors is missing; pass the model directory"),
])
def test_an_error_survives_pickling_with_its_fields(error):
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    assert getattr(back, "path", None) == getattr(error, "path", None)
