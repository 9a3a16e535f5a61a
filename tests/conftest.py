"""Shared fixtures: toy tokenizers small enough that every automaton builds in milliseconds, tiny
random models and a scripted model for the decoder (tiny_models.py), and the --slow switch."""

import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from clover_struct.engine.tokenizer import Tokenizer
from tiny_models import tiny_model

# Multi-character tokens a JSON canvas is made of, as BPE merges (each merge adds one token).
MERGES = [("{", '"'), ('"', ":"), ('":', " "), ('": ', '"'), (",", " "), (", ", '"'), ('"', "}")]
SPECIALS = ["<|endoftext|>", "<|mask|>", "<|pad|>"]


def char_tokenizer(specials: list[str] = SPECIALS) -> Tokenizer:
    """Char-level BPE over printable ASCII plus `{"`, `":`, `": `, `": "`, `, `, `, "`, `"}`.

    Digits are single tokens. Ids: 0..94 printable ASCII, then the merges, then the
    special tokens <|endoftext|>, <|mask|>, <|pad|>. Characters outside printable
    ASCII cannot be written.
    """
    vocab = {chr(c): c - 0x20 for c in range(0x20, 0x7F)}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    tok = HFTokenizer(models.BPE(vocab=vocab, merges=MERGES))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(specials)
    return Tokenizer(tok)


def byte_tokenizer() -> Tokenizer:
    """A byte-level BPE (every byte is a token, so any UTF-8 text can be written)."""
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(['{"name": "Zoë", "city": "北京"}', "禁止无人机飞行 半径 500 米"] * 20, trainer)
    return Tokenizer(tok)


@pytest.fixture(scope="session")
def toy_tokenizer() -> Tokenizer:
    return char_tokenizer()


@pytest.fixture(scope="session")
def make_toy_tokenizer():
    """`char_tokenizer` itself, for tests that need other special tokens."""
    return char_tokenizer


@pytest.fixture(scope="session")
def toy_byte_tokenizer() -> Tokenizer:
    return byte_tokenizer()


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny models run fastest on one thread: a second one only adds synchronisation,
    and on a busy 2-core machine it made a 0.2 s decode take over 30 s."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def no_tf32():
    """CUDA float32 as float32: TF32's 10-bit products would not match the CPU computation."""
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


# ---- the slow tests: deselected by default, run by `make test` (CI) with --slow --------------------
def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (make test and CI do)")


def pytest_collection_modifyitems(config, items):
    """Deselect the slow tests unless --slow."""
    off = set() if config.getoption("--slow") else {"slow"}
    dropped = [item for item in items if any(item.get_closest_marker(m) for m in off)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


@pytest.fixture
def make_tiny_model():
    """tiny_models.tiny_model: a tiny random Clover model over a tokenizer."""
    return tiny_model
