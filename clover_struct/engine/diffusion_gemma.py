"""DiffusionGemma (transformers' DiffusionGemmaForBlockDiffusion): block diffusion with uniform noise.

One Gemma-4 layer stack plays two roles on the same weights:
- encoder: reads the prompt, and later each finished canvas, causally and writes the KV
  cache (`prefill`, `commit`);
- decoder: denoises a canvas of `block_size` tokens (256 in the release); canvas tokens see
  each other both ways and read the cache without writing it (`step`).
The roles differ in one stored scalar per layer (`layer_scalar`, kept once per role) and in
the canvas embedding: the decoder adds self-conditioning, the previous step's logits made
soft embeddings (softmax @ embedding matrix * sqrt(hidden)) through a gated MLP, then a
scale-free RMSNorm. There is no mask token: a canvas starts as uniform random tokens and
the caller re-noises what it does not accept (`noise = "uniform"`).

A layer: sliding-window or full attention per `layer_types` (q/k RMSNorm, a scale-free v
norm, attention scale 1; full layers have their own head dim and KV heads and take their
values from the key projection; RoPE per layer type, proportional and partial on full
layers), then a dense GELU MLP and a routed MoE side by side on the same residual, each
normed, summed, normed, added; the layer's output is scaled by its role's scalar. Logits
are soft-capped (c * tanh(x / c)); the output head is the embedding matrix.

The layers and the masks are in diffusion_gemma_layers.py, the config in diffusion_gemma_config.py.

Knows nothing of schemas or text: token ids in, logits out. Loading is `load` below.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .cache import PrefixCache, empty_cache
from .checkpoint import cast, check_layers, check_special, open_tensors, read_tensor, read_tokenizer, weight_files
from .diffusion_gemma_config import DiffusionGemmaConfig
from .diffusion_gemma_layers import Attention, Layer, Pass, RMSNorm, SelfConditioning, rms_norm
from .errors import CheckpointError, UsageError


class DiffusionGemma(nn.Module):
    """The network and the engine interface (engine/interface.py), with self-conditioning:

        cache, logits = model.prefill(prompt_ids, lengths)       # the encoder over the prompts
        logits = model.step(canvas_ids, cache, self_conditioning=previous_logits)
        model.commit(canvas_ids, cache)                          # a finished canvas joins the history

    `prefill_step` runs the encoder over new history and the decoder over a canvas in one
    pass: a layer's canvas queries read the history keys that the same layer has just made, so
    the two roles fit one pass with a mask (history causal, canvas both ways), like a block step."""

    family = "diffusion_gemma"
    noise = "uniform"   # canvases start as uniform random tokens; there is no mask token

    def __init__(self, config: DiffusionGemmaConfig, tokenizer=None):
        super().__init__()
        self.config, self.tokenizer, self.source = config, tokenizer, None
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Layer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_conditioning = SelfConditioning(config)
        self.reset_buffers(self.embed_tokens.weight.device)

    def reset_buffers(self, device):
        """Recompute the non-persistent RoPE tables (after building on the meta device), in float32
        by transformers' formula so both round alike."""
        for m in self.modules():
            if isinstance(m, Attention):
                theta, turning, factor = self.config.rope(m.kind)
                j = torch.arange(0, 2 * turning, 2, device=device).float() / m.head_dim
                rates = 1.0 / theta ** j / factor
                m.inv_freq = torch.cat([rates, rates.new_zeros(m.head_dim // 2 - turning)])

    @property
    def device(self):
        return self.embed_tokens.weight.device

    def _root(self, like):  # sqrt(hidden), rounded to `like`'s dtype as transformers rounds it
        return torch.tensor(self.config.hidden_size ** 0.5, dtype=like.dtype, device=like.device)

    def embed(self, ids):
        return F.embedding(ids, self.embed_tokens.weight) * self._root(self.embed_tokens.weight)

    def embed_canvas(self, ids, self_conditioning=None):
        """Canvas embeddings plus self-conditioning (none on a canvas's first step), normed."""
        x = self.embed(ids)
        if self_conditioning is not None:
            if self_conditioning.shape != (*ids.shape, self.config.vocab_size):
                raise UsageError(f"self_conditioning must be the previous step's logits {[*ids.shape]} + "
                                 f"[{self.config.vocab_size}], got {list(self_conditioning.shape)}")
            w = self.embed_tokens.weight
            soft = self_conditioning.softmax(-1, dtype=torch.float32).to(w.dtype) @ w   # [B, C, D]
            x = x + self.self_conditioning(soft * self._root(x))
        return rms_norm(x, self.config.rms_norm_eps)

    def head(self, h):
        logits = F.linear(h, self.embed_tokens.weight).float()
        cap = self.config.final_logit_softcapping
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def _run(self, history_ids, canvas_ids, cache: PrefixCache, self_conditioning=None):
        """Final hidden states [B, T, D] of history tokens then canvas tokens (either may be None);
        the history joins the cache."""
        parts = ([] if history_ids is None else [self.embed(history_ids)]) + \
                ([] if canvas_ids is None else [self.embed_canvas(canvas_ids, self_conditioning)])
        x = torch.cat(parts, 1)
        encode = 0 if history_ids is None else history_ids.shape[1]
        p = Pass(x.shape[1], encode, cache, self.config.sliding_window)
        for layer in self.layers:
            x = layer(x, p)
        cache.length += encode
        return self.norm(x)

    @torch.no_grad()
    def prefill(self, input_ids, lengths=None) -> tuple[PrefixCache, torch.Tensor]:
        """Encode left-padded prompts [B, P] (lengths: [B] real lengths). Returns the cache and the
        encoder's logits at the last column [B, vocab] (its autoregressive guess at the next token;
        decoding reads the canvas logits of `step`)."""
        cache = empty_cache(input_ids, lengths)
        return cache, self.head(self._run(input_ids, None, cache)[:, -1])

    @torch.no_grad()
    def step(self, canvas_ids, cache: PrefixCache, *, at=None, self_conditioning=None):
        """One decoder pass over canvases [B, C] against the cache, which is left unchanged.

        self_conditioning: the previous step's logits [B, C, vocab], None on a canvas's first step
        (transformers' generate feeds back its temperature-scaled logits in the embeddings' dtype).
        at: optional (rows, columns) index tensors; then only the logits there, [N, vocab]."""
        h = self._run(None, canvas_ids, cache, self_conditioning)
        return self.head(h if at is None else h[at])

    @torch.no_grad()
    def prefill_step(self, input_ids, canvas_ids, lengths=None, *, at=None, cache: PrefixCache | None = None,
                     self_conditioning=None) -> tuple[PrefixCache, torch.Tensor]:
        """`prefill` (or, with `cache`, `commit`) of input_ids and a `step` of canvas_ids in one pass.
        Returns the cache (of the history only) and the canvas logits as `step` gives them."""
        cache = empty_cache(input_ids, lengths) if cache is None else cache
        h = self._run(input_ids, canvas_ids, cache, self_conditioning)[:, input_ids.shape[1]:]
        return cache, self.head(h if at is None else h[at])

    @torch.no_grad()
    def commit(self, canvas_ids, cache: PrefixCache):
        """Encode a finished canvas [B, C] into the cache (causally, as the prompt was); returns the
        encoder's logits at its last column [B, vocab]."""
        return self.head(self._run(canvas_ids, None, cache)[:, -1])


# Our tensor names -> checkpoint names, the first present is read ({0}, {1}: the groups matched).
# The layer stack, final norm and embeddings are stored once, under the decoder (an encoder
# spelling is read too); the layer scalar once per role.
CHECKPOINT_NAMES = (
    (r"layers\.(\d+)\.encoder_scalar", ("model.encoder.language_model.layers.{0}.layer_scalar",)),
    (r"layers\.(\d+)\.decoder_scalar", ("model.decoder.layers.{0}.layer_scalar",)),
    (r"layers\.(\d+)\.(.+)", ("model.decoder.layers.{0}.{1}", "model.encoder.language_model.layers.{0}.{1}")),
    (r"self_conditioning\.(.+)", ("model.decoder.self_conditioning.{0}",)),
    (r"(embed_tokens|norm)\.weight", ("model.decoder.{0}.weight", "model.encoder.language_model.{0}.weight")),
)
# The vision tower (text only here), and the output head, which is the embedding matrix.
IGNORED = re.compile(r"^(model\.encoder\.(vision_tower|embed_vision)\.|lm_head\.weight$)")


def checkpoint_names(name: str) -> tuple[str, ...]:
    for pattern, spellings in CHECKPOINT_NAMES:
        if m := re.fullmatch(pattern, name):
            return tuple(s.format(*m.groups()) for s in spellings)
    raise AssertionError(f"no checkpoint name for {name}")


def read_weights(files: list[Path], found: dict, model: DiffusionGemma) -> dict[str, torch.Tensor]:
    """Every tensor the model needs (`found`: open_tensors of `files`), memory-mapped, its name and
    shape checked."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    names = {k: checkpoint_names(k) for k in expected}
    missing = [spellings[0] for spellings in names.values() if not any(s in found for s in spellings)]
    if missing:
        raise CheckpointError(f"{files[0].parent}: missing tensors {missing[:5]}{' …' if len(missing) > 5 else ''}")
    known = {s for spellings in names.values() for s in spellings}
    unexpected = [k for k in found if k not in known and not IGNORED.match(k)]
    if unexpected:
        raise CheckpointError(f"{files[0].parent}: unexpected tensors {unexpected[:5]}"
                              f"{' …' if len(unexpected) > 5 else ''}; they do not belong to a "
                              f"{model.config.num_hidden_layers}-layer DiffusionGemma text model")
    tensors = {}
    for name, spellings in names.items():
        key = next(s for s in spellings if s in found)
        t = read_tensor(key, found[key])
        if tuple(t.shape) != expected[name]:
            raise CheckpointError(f"{found[key][0]}: tensor {key} has shape {tuple(t.shape)}, but config.json "
                                  f"implies {expected[name]}")
        tensors[name] = t
    return tensors


def load(root: Path, config: dict, device: torch.device, dtype: torch.dtype) -> DiffusionGemma:
    """A DiffusionGemma directory: config (text_config), tokenizer and weights, every tensor checked."""
    text = config.get("text_config")
    stated = {*config, *(text if isinstance(text, dict) else ())}   # (the others are Gemma's defaults)
    files = weight_files(root)
    found = open_tensors(files)
    check_layers(found, config, str(root / "config.json"))
    config = DiffusionGemmaConfig.from_dict(config, source=str(root / "config.json"))
    tokenizer = read_tokenizer(root, config.vocab_size)
    if tokenizer is not None:
        config.pad_token_id = tokenizer.pad_id if config.pad_token_id is None else config.pad_token_id
        if config.eos_token_id is None and tokenizer.eos_id is not None:
            config.eos_token_id, config.eos_token_ids = tokenizer.eos_id, (tokenizer.eos_id,)
    ids = [("pad_token_id", config.pad_token_id), ("bos_token_id", config.bos_token_id),
           *(("eos_token_id", eos) for eos in config.eos_token_ids)]
    for key, value in ids:
        if value is not None and not 0 <= value < config.vocab_size:
            raise CheckpointError(f"{root / 'config.json'}: {key}={value} is outside the vocabulary of "
                                  f"{config.vocab_size}")
    check_special(root, tokenizer, [(key, value) for key, value in [*ids, ("mask_token_id", config.mask_token_id)]
                                    if key in stated])
    with torch.device("meta"):
        model = DiffusionGemma(config, tokenizer)
    tensors = {k: cast(checkpoint_names(k)[0], v, device, dtype, root)
               for k, v in read_weights(files, found, model).items()}
    model.load_state_dict(tensors, assign=True)
    model.reset_buffers(device)
    return model
