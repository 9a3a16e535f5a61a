"""The layers of DiffusionGemma, and `Pass`, what one run of the stack over new tokens knows.

A pass encodes history (causal; its keys and values join the cache) and/or denoises a canvas
(both ways; the cache is only read). `Pass` holds the RoPE positions (column minus the row's
left padding), the attention masks and which cache columns a layer keeps. Sliding layers keep
only the last sliding_window - 1 history columns, as transformers' DynamicCache does: a history
token sees itself and the window - 1 before it; a canvas token sees those last window - 1
history columns and the whole canvas. Full-attention layers keep every column.

Knows nothing of checkpoints, tokenizers or the engine interface (diffusion_gemma.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .cache import PrefixCache
from .diffusion_gemma_config import SLIDING, DiffusionGemmaConfig


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
        self.padded = bool(cache.pad.any())                     # one host sync per pass
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
        """A layer's output times its role's scalar: history rows the encoder's, canvas rows the decoder's."""
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
