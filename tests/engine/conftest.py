import pytest
import torch

from clover_struct.engine.config import preset
from clover_struct.engine.model import CloverModel


def assert_close(actual, expected, name: str, atol: float):
    diff = (actual.double() - expected.double()).abs()
    size = f"{name}: max diff {diff.max():.3g}, mean diff {diff.mean():.3g} (atol {atol:.3g})"
    print(size)
    assert diff.max() <= atol, size


@pytest.fixture
def close():
    return assert_close


@pytest.fixture
def tiny():
    """A tiny random Clover model (3 Gated DeltaNet layers, 1 attention layer, 4 experts)."""
    torch.manual_seed(0)
    return CloverModel(preset("tiny", mask_token_id=3, pad_token_id=1, eos_token_id=2)).init_weights(std=0.1).eval()
