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

Sliding layers cache only the last sliding_window - 1 history columns, as transformers'
DynamicCache does: a history token sees itself and the window - 1 before it; a canvas token
sees those last window - 1 history columns and the whole canvas.

Knows nothing of schemas or text: token ids in, logits out. Loading is `load` below.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .cache import PrefixCache
from .checkpoint import _files, _read, _tensor
from .diffusion_gemma_config import SLIDING, DiffusionGemmaConfig
from .errors import CheckpointError, UsageError
from .tokenizer import Tokenizer


def rms_norm(x, eps: float, weight=None):
    """x / rms(x) (* weight), in float32; Gemma's weight is a plain scale, not 1 + w."""
    y = x.float() * torch.pow(x.float().pow(2).mean(-1, keepdim=True) + eps, -0.5)
    return (y if weight is None else y * weight.float()).type_as(x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.eps, self.weight)


class MLP(nn.Module):
    """Gated GELU (tanh approximation): the dense FFN of a layer, and the self-conditioning block."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class Pass:
    """One run of the stack over new tokens [B, T]: the first `encode` are history (causal;
    their keys and values join the cache), the rest are a canvas (both ways; read-only)."""

    def __init__(self, T: int, encode: int, cache: PrefixCache, window: int):
        self.cache, self.encode, self.window, self.start = cache, encode, window, cache.length
        cols = torch.arange(self.start, self.start + T, device=cache.pad.device)
        self.positions = cols[None, :] - cache.pad[:, None]    # [B, T] RoPE positions
        self.padded = bool(cache.pad.any())
        self.rope, self.masks = {}, {}

    def kept(self, kind: str, length: int) -> int:
        """How many of `length` history columns a layer of this kind keeps in the cache (the last ones)."""
        return min(length, self.window - 1) if kind == SLIDING else length

    def cos_sin(self, kind: str, inv_freq, dtype):  # [B, T, 1, head_dim] each, in the activations' dtype
        if kind not in self.rope:
            freqs = self.positions[..., None].float() * inv_freq
            angles = torch.cat([freqs, freqs], -1)[:, :, None]
            self.rope[kind] = angles.cos().to(dtype), angles.sin().to(dtype)
        return self.rope[kind]

    def mask(self, kind: str):
        """[B, 1, T, keys] bool over a `kind` layer's cached keys then the new ones; None: all visible."""
        if kind not in self.masks:
            self.masks[kind] = self._mask(kind)
        return self.masks[kind]

    def _mask(self, kind: str):
        if not self.encode and not self.padded:
            return None
        pad, start, W, T = self.cache.pad, self.start, self.window, self.positions.shape[1]
        kcol = torch.arange(start - self.kept(kind, start), start + T, device=pad.device)   # [S]
        qcol = torch.arange(start, start + T, device=pad.device)[:, None]                   # [T, 1]
        canvas_from = start + self.encode
        history = kcol <= qcol
        canvas = torch.ones_like(history)
        if kind == SLIDING:
            history = history & (kcol > qcol - W)
            canvas = canvas & (kcol >= canvas_from - (W - 1))
        see = torch.where(qcol >= canvas_from, canvas, history)                            # [T, S]
        # padding is never seen; a padding query sees itself (a row with no key would be NaN)
        return ((see & (kcol >= pad[:, None, None])) | (kcol == qcol))[:, None]

    def scaled(self, x, encoder_scalar, decoder_scalar):
        E = self.encode
        if E == x.shape[1]:
            return x * encoder_scalar
        if E == 0:
            return x * decoder_scalar
        return torch.cat([x[:, :E] * encoder_scalar, x[:, E:] * decoder_scalar], 1)


def rotate(x, cos, sin):  # x [B, T, h, d]: pair (j, j + d/2) turns by the angle of frequency j
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


class Attention(nn.Module):
    def __init__(self, c: DiffusionGemmaConfig, layer: int):
        super().__init__()
        self.layer, self.kind, self.eps = layer, c.layer_types[layer], c.rms_norm_eps
        H, d, kv, D = c.num_attention_heads, c.head_dim_of(self.kind), c.kv_heads_of(self.kind), c.hidden_size
        self.head_dim = d
        self.q_proj = nn.Linear(D, H * d, bias=False)
        self.k_proj = nn.Linear(D, kv * d, bias=False)
        if self.kind == SLIDING:  # full-attention layers take their values from k_proj (before k_norm)
            self.v_proj = nn.Linear(D, kv * d, bias=False)
        self.o_proj = nn.Linear(H * d, D, bias=False)
        self.q_norm = RMSNorm(d, c.rms_norm_eps)
        self.k_norm = RMSNorm(d, c.rms_norm_eps)
        self.register_buffer("inv_freq", torch.empty(d // 2), persistent=False)

    def forward(self, x, p: Pass):
        B, T, _ = x.shape
        cos, sin = p.cos_sin(self.kind, self.inv_freq, x.dtype)
        q = rotate(self.q_norm(self.q_proj(x).view(B, T, -1, self.head_dim)), cos, sin).transpose(1, 2)
        k = self.k_proj(x).view(B, T, -1, self.head_dim)
        v = self.v_proj(x).view(B, T, -1, self.head_dim) if self.kind == SLIDING else k
        k = rotate(self.k_norm(k), cos, sin).transpose(1, 2)                 # [B, kv, T, d]
        v = rms_norm(v, self.eps).transpose(1, 2)
        cache = p.cache
        if self.layer in cache.keys:
            k, v = torch.cat([cache.keys[self.layer], k], 2), torch.cat([cache.values[self.layer], v], 2)
        if p.encode:
            end = k.shape[2] - T + p.encode
            begin = end - p.kept(self.kind, p.start + p.encode)
            cache.keys[self.layer] = k[:, :, begin:end].contiguous()
            cache.values[self.layer] = v[:, :, begin:end].contiguous()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=p.mask(self.kind), scale=1.0, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))


def grouped_linear(x, w, ends):
    """x [N, in] in runs by group, w [G, out, in], ends [G] int32 (cumulative run ends) -> [N, out]."""
    if hasattr(F, "grouped_mm") and (x.device.type != "cuda" or x.dtype == torch.bfloat16):
        return F.grouped_mm(x, w.transpose(1, 2), offs=ends)
    out, start = x.new_empty(x.shape[0], w.shape[1]), 0   # CUDA kernels are bf16 only; torch < 2.10 has none
    for g, end in enumerate(ends.tolist()):
        if end > start:
            out[start:end] = F.linear(x[start:end], w[g])
        start = end
    return out


class Experts(nn.Module):
    """Routed experts as stacked tensors."""

    def __init__(self, c: DiffusionGemmaConfig):
        super().__init__()
        E, I, D = c.num_experts, c.moe_intermediate_size, c.hidden_size
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * I, D))   # gate rows first
        self.down_proj = nn.Parameter(torch.empty(E, D, I))

    def forward(self, x, expert, weight):
        # N tokens, A active experts per token, E experts, D model dim, I expert width
        N, A = expert.shape                                          # expert, weight: [N, A]
        order = expert.reshape(-1).argsort()                         # the N*A (token, expert) pairs by expert
        ends = torch.bincount(expert.reshape(-1), minlength=self.down_proj.shape[0]).cumsum(0).to(torch.int32)
        gate, up = grouped_linear(x[order // A], self.gate_up_proj, ends).chunk(2, -1)   # [N*A, I] each
        y = grouped_linear(F.gelu(gate, approximate="tanh") * up, self.down_proj, ends)  # [N*A, D]
        y = y * weight.reshape(-1)[order, None]                      # float32, as the routing weights
        pairs = torch.empty_like(y)
        pairs[order] = y                                             # back to (token, slot) order
        return pairs.view(N, A, -1).sum(1).to(x.dtype)


class Router(nn.Module):
    def __init__(self, c: DiffusionGemmaConfig):
        super().__init__()
        self.top_k, self.eps, self.root = c.top_k_experts, c.rms_norm_eps, c.hidden_size ** -0.5
        self.proj = nn.Linear(c.hidden_size, c.num_experts, bias=False)
        self.scale = nn.Parameter(torch.ones(c.hidden_size))
        self.per_expert_scale = nn.Parameter(torch.ones(c.num_experts))

    def forward(self, x):  # x: the residual stream [N, D]; softmax over all experts, top k, renormalised
        probs = self.proj(rms_norm(x, self.eps) * self.scale * self.root).softmax(-1, dtype=torch.float32)
        weight, expert = probs.topk(self.top_k, -1)
        return expert, weight / weight.sum(-1, keepdim=True) * self.per_expert_scale[expert]


class Layer(nn.Module):
    def __init__(self, c: DiffusionGemmaConfig, i: int):
        super().__init__()
        D, eps = c.hidden_size, c.rms_norm_eps
        self.self_attn = Attention(c, i)
        self.mlp = MLP(D, c.intermediate_size)
        self.router = Router(c)
        self.experts = Experts(c)
        for name in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm", "post_feedforward_layernorm_1", "pre_feedforward_layernorm_2",
                     "post_feedforward_layernorm_2"):
            setattr(self, name, RMSNorm(D, eps))
        self.register_buffer("encoder_scalar", torch.ones(1))
        self.register_buffer("decoder_scalar", torch.ones(1))

    def forward(self, x, p: Pass):
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), p))
        dense = self.post_feedforward_layernorm_1(self.mlp(self.pre_feedforward_layernorm(x)))
        flat = x.reshape(-1, x.shape[-1])
        expert, weight = self.router(flat)               # routed on the residual, experts fed its own norm
        routed = self.experts(self.pre_feedforward_layernorm_2(flat), expert, weight)
        x = x + self.post_feedforward_layernorm(dense + self.post_feedforward_layernorm_2(routed).view_as(x))
        return p.scaled(x, self.encoder_scalar, self.decoder_scalar)


class SelfConditioning(MLP):
    """The previous step's soft embeddings [B, C, D] -> what is added to the canvas embeddings."""

    def __init__(self, c: DiffusionGemmaConfig):
        super().__init__(c.hidden_size, c.intermediate_size)
        self.pre_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, soft):
        return super().forward(self.pre_norm(soft))


def _empty_cache(input_ids, lengths) -> PrefixCache:
    B, P = input_ids.shape
    lengths = torch.full((B,), P) if lengths is None else torch.as_tensor(lengths).cpu()
    if lengths.shape != (B,) or not ((lengths >= 1) & (lengths <= P)).all():
        raise UsageError(f"lengths must give each of the {B} prompts a real length in 1..{P}, got {lengths.tolist()}")
    return PrefixCache(pad=(P - lengths).to(input_ids.device))


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

    def embed(self, ids):
        w = self.embed_tokens.weight   # scaled by sqrt(hidden), rounded to the weights' dtype as transformers does
        return F.embedding(ids, w) * torch.tensor(self.config.hidden_size ** 0.5, dtype=w.dtype, device=w.device)

    def embed_canvas(self, ids, self_conditioning=None):
        """Canvas embeddings plus self-conditioning (none on a canvas's first step), normed."""
        x = self.embed(ids)
        if self_conditioning is not None:
            if self_conditioning.shape != (*ids.shape, self.config.vocab_size):
                raise UsageError(f"self_conditioning must be the previous step's logits {[*ids.shape]} + "
                                 f"[{self.config.vocab_size}], got {list(self_conditioning.shape)}")
            w = self.embed_tokens.weight
            soft = self_conditioning.softmax(-1, dtype=torch.float32).to(w.dtype) @ w   # [B, C, D]
            x = x + self.self_conditioning(soft * torch.tensor(self.config.hidden_size ** 0.5, dtype=x.dtype,
                                                                     device=x.device))
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
        cache = _empty_cache(input_ids, lengths)
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
        cache = _empty_cache(input_ids, lengths) if cache is None else cache
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


def read_weights(files: list[Path], model: DiffusionGemma) -> dict[str, torch.Tensor]:
    """Every tensor the model needs, memory-mapped, its name and shape checked."""
    found = _read(files)
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
        t = _tensor(key, found[key])
        if tuple(t.shape) != expected[name]:
            raise CheckpointError(f"{found[key][0]}: tensor {key} has shape {tuple(t.shape)}, but config.json "
                                  f"implies {expected[name]}")
        tensors[name] = t
    return tensors


def load(root: Path, config: dict, device: torch.device, dtype: torch.dtype) -> DiffusionGemma:
    """A DiffusionGemma directory: config (text_config), tokenizer and weights, every tensor checked."""
    config = DiffusionGemmaConfig.from_dict(config, source=str(root / "config.json"))
    tokenizer = Tokenizer.from_file(root / "tokenizer.json") if (root / "tokenizer.json").is_file() else None
    if tokenizer is not None:
        if tokenizer.vocab_size > config.vocab_size:
            raise CheckpointError(f"{root}: tokenizer.json has {tokenizer.vocab_size} tokens but config.json "
                                  f"vocab_size is {config.vocab_size}: the tokenizer belongs to another model")
        config.pad_token_id = tokenizer.pad_id if config.pad_token_id is None else config.pad_token_id
        if config.eos_token_id is None and tokenizer.eos_id is not None:
            config.eos_token_id, config.eos_token_ids = tokenizer.eos_id, (tokenizer.eos_id,)
    for key in ("pad_token_id", "bos_token_id", *(["eos_token_ids"] * bool(config.eos_token_ids))):
        for value in (v if isinstance(v := getattr(config, key), tuple) else (v,)):
            if value is not None and not 0 <= value < config.vocab_size:
                raise CheckpointError(f"{root / 'config.json'}: {key.replace('_ids', '_id')}={value} is outside "
                                      f"the vocabulary of {config.vocab_size}")
    with torch.device("meta"):
        model = DiffusionGemma(config, tokenizer)
    tensors = {k: v.to(device=device, dtype=dtype) for k, v in read_weights(_files(root), model).items()}
    model.load_state_dict(tensors, assign=True)
    model.reset_buffers(device)
    return model
