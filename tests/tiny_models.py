"""Models for tests: tiny random Clover models, the same without prefill_step, tiny random
DiffusionGemma checkpoints (built with transformers' classes, loaded with ours), and scripted
models (MockModel, and UniformMockModel for uniform noise) that give the decoder exactly the
logits a test wants."""

import json
import math
import warnings
from typing import NamedTuple

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
        return out if at is not None else out.view(rows, block, V)

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


class Pass(NamedTuple):
    """One denoising pass as UniformMockModel saw it."""
    name: str                       # step or prefill_step
    start: int                      # the canvas column the block starts at
    shown: torch.Tensor             # the block's ids [rows, width]
    conditioning: torch.Tensor | None
    logits: torch.Tensor            # what the pass returned
    history: torch.Tensor | None    # what prefill_step encoded first


class UniformMockModel(MockModel):
    """MockModel with DiffusionGemma's contract: no mask token, `noise = "uniform"`, and a `step`
    (and `prefill_step`) that takes the previous step's logits as `self_conditioning`.

    `seen` records every denoising pass as a Pass. Each pass's logits differ a little from the
    pass before (token 0 gains 0.01 per call), so a test can tell which step fed which back."""

    noise = "uniform"

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.config.mask_token_id, self.seen = None, []

    def _logits(self, offset, rows, block, at):
        out = super()._logits(offset, rows, block, at)
        out[..., 0] += 0.01 * len(self.calls)
        return out

    def _check(self, block_ids, self_conditioning):
        if self_conditioning is not None:
            assert self_conditioning.shape == (*block_ids.shape, self.config.vocab_size), self_conditioning.shape

    def step(self, block_ids, cache, *, at=None, self_conditioning=None):
        self._check(block_ids, self_conditioning)
        logits = super().step(block_ids, cache, at=at)
        self.seen.append(Pass("step", cache.length - self.width, block_ids.clone(), self_conditioning, logits, None))
        return logits

    def prefill_step(self, input_ids, block_ids, lengths=None, *, at=None, cache=None, self_conditioning=None):
        self._check(block_ids, self_conditioning)
        cache, logits = super().prefill_step(input_ids, block_ids, lengths, at=at, cache=cache)
        self.seen.append(Pass("prefill_step", cache.length - self.width, block_ids.clone(), self_conditioning, logits,
                              input_ids.clone()))
        return cache, logits


VISION = dict(model_type="gemma4_vision", hidden_size=8, intermediate_size=8, num_hidden_layers=1,
              num_attention_heads=1, num_key_value_heads=1, head_dim=8)


def tiny_diffusion_gemma(tok, path, *, canvas: int = 16, std: float = 0.0, seed: int = 0, extra_vocab: int = 3,
                         chat_template: str | None = None):
    """A tiny random DiffusionGemma checkpoint over `tok` in directory `path`, built with transformers'
    DiffusionGemmaForBlockDiffusion, saved as safetensors (with tok as tokenizer.json), loaded by our
    load_model. Its vocabulary is tok's plus `extra_vocab` ids no text uses (noise draws them).
    std 0: transformers' init (near-uniform logits); larger: every weight moved by N(0, std), so the
    model is confidently wrong. Sliding and full layers, routed experts, distinct layer scalars."""
    import transformers

    from clover_struct import load_model

    text = dict(vocab_size=tok.vocab_size + extra_vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=16, global_head_dim=16,
                num_global_key_value_heads=1, sliding_window=16, num_experts=4, top_k_experts=2,
                moe_intermediate_size=16, max_position_embeddings=32_768,
                layer_types=["sliding_attention", "full_attention"],
                pad_token_id=tok.pad_id, eos_token_id=tok.eos_id, bos_token_id=tok.eos_id)
    torch.manual_seed(seed)
    config = transformers.DiffusionGemmaConfig(text_config=text, vision_config=VISION, canvas_length=canvas)
    model = transformers.DiffusionGemmaForBlockDiffusion(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * std)
        for layers in (model.model.encoder.language_model.layers, model.model.decoder.layers):
            for layer in layers:
                layer.layer_scalar.uniform_(0.5, 1.5)
    model.save_pretrained(path)
    tok.save(path / "tokenizer.json")
    if chat_template is not None:
        (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": chat_template}))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*the vision tower is ignored")
        return load_model(path)
