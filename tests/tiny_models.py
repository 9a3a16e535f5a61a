"""Models for tests: tiny random Clover models, the same without prefill_step, and a scripted
model (MockModel) that gives the decoder exactly the logits a test wants."""

import math

import torch


def tiny_model(tok, *, block_size=64, std=0.02, seed=0, **overrides):
    """A tiny random Clover model over `tok` (std 0.02: near-uniform; 1.0: confidently wrong)."""
    from clover_struct.engine.config import preset
    from clover_struct.engine.model import CloverModel

    torch.manual_seed(seed)
    config = preset("tiny", vocab_size=tok.vocab_size, mask_token_id=tok.mask_id, pad_token_id=tok.pad_id,
                    eos_token_id=tok.eos_id, block_size=block_size, **overrides)
    return CloverModel(config, tok).init_weights(std=std).eval()


def without_prefill_step(model):
    """`model` with prefill, step and commit only (the decoder's contract): the prompt gets a pass of its own."""
    class Plain:
        config, tokenizer, device = model.config, model.tokenizer, model.device
        prefill, step, commit = model.prefill, model.step, model.commit
    return Plain()


class MockCache:
    """Columns encoded so far (prompt width included), per row; `select` keeps rows."""

    def __init__(self, length: int, rows: int):
        self.length, self.rows = length, rows

    def select(self, rows):
        return MockCache(self.length, len(rows))


class MockModel:
    """The engine interface with scripted logits, for decoder tests.

    At canvas column c every row puts probability `confidence.get(c, p)` on `script[c]`
    (a token id) and spreads the rest evenly over the vocabulary. The canvas starts after
    `prompt_width` columns (the decoder's left-padded prompts). `calls` records each call by
    name, so a test can count forward passes exactly.
    """

    def __init__(self, tokenizer, script: dict[int, int], prompt_width: int, *, p: float = 0.99,
                 confidence: dict[int, float] | None = None, block_size: int = 64, context: int = 4096):
        from types import SimpleNamespace

        self.tokenizer, self.device, self.calls = tokenizer, torch.device("cpu"), []
        self.script, self.width, self.p, self.confidence = script, prompt_width, p, confidence or {}
        self.config = SimpleNamespace(vocab_size=tokenizer.vocab_size, mask_token_id=tokenizer.mask_id,
                                      pad_token_id=tokenizer.pad_id, eos_token_id=tokenizer.eos_id,
                                      block_size=block_size, max_position_embeddings=context)

    def _logits(self, offset: int, rows: int, block: int, at):
        rows_, cols = at if at is not None else (torch.arange(rows).repeat_interleave(block),
                                                 torch.arange(block).repeat(rows))
        V = self.config.vocab_size
        out = torch.empty(len(cols), V)
        for k, c in enumerate((cols + offset).tolist()):
            p = self.confidence.get(c, self.p)
            out[k] = math.log((1 - p) / (V - 1))
            if c in self.script:
                out[k, self.script[c]] = math.log(p)
        return out

    def prefill(self, input_ids, lengths=None):
        self.calls.append("prefill")
        return MockCache(input_ids.shape[1], input_ids.shape[0]), torch.zeros(input_ids.shape[0], self.config.vocab_size)

    def step(self, block_ids, cache, *, at=None):
        self.calls.append("step")
        return self._logits(cache.length - self.width, block_ids.shape[0], block_ids.shape[1], at)

    def commit(self, block_ids, cache):
        self.calls.append("commit")
        cache.length += block_ids.shape[1]
        return torch.zeros(block_ids.shape[0], self.config.vocab_size)

    def prefill_step(self, input_ids, block_ids, lengths=None, *, at=None, cache=None):
        self.calls.append("prefill_step")
        if cache is None:
            cache = MockCache(0, input_ids.shape[0])
        cache.length += input_ids.shape[1]
        return cache, self._logits(cache.length - self.width, block_ids.shape[0], block_ids.shape[1], at)
