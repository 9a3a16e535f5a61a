"""training/ is a top-level folder of the repository, not an installed package."""

import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    """A tiny tokenizer trained by the same function as the real one, on a small corpus."""
    from training.tokenizer import corpus, train_tokenizer

    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_tokenizer(corpus(per_kind=30), vocab_size=600).save(str(path))
    return path
