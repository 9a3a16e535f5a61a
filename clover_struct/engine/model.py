"""The Clover network: a Qwen3.5-MoE style hybrid, run causally or as a block-diffusion model.

Layers follow `config.layer_types`: Gated DeltaNet (`linear_attention`) or gated
full attention (`full_attention`); every layer's FFN is a mixture of experts with
a gated shared expert. Module and parameter names are those of transformers'
Qwen3.5-MoE text model with fused experts, so its checkpoints map one to one
and causal logits can be checked against it.

Masking modes, on the same weights:
- `causal`: every token sees the tokens before it (autoregressive).
- `block`: the history (prompt and finished blocks) is causal; the tokens of
  the current block, the last `block_len` tokens, see each other both ways.
- `bidirectional`: the whole sequence is one block.

In a Gated DeltaNet layer, "both ways" means: token t of the block reads the
forward state (history state, then the block's tokens up to and including t;
exactly the causal computation) PLUS a backward state built from the block's
tokens after t, scanned from the block's end with a zero state
(`gated_delta.backward_exclusive`). The two outputs are summed before the
gated norm; the causal depthwise conv is shared and stays causal. Each block
token is counted once, and the history state committed after a block is the
forward (causal) state, so block mode with a cache is exact.

Knows nothing of schemas or text: token ids in, logits out.

Over 400 lines: one family's layers, and its uncached reference and cached path through one
`_run`, kept together so the two cannot drift apart.
"""

from __future__ import annotations

import math
from functools import cached_property

import torch
import torch.nn.functional as F
from torch import nn

from . import gated_delta
from .cache import PrefixCache, empty_cache
from .config import ModelConfig
from .errors import UsageError

MODES = ("causal", "block", "bidirectional")


class RMSNorm(nn.Module):
    """Zero-centred RMSNorm: x / rms(x) * (1 + w), computed in float32."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


class GatedRMSNorm(nn.Module):
    """Per-head RMSNorm of the DeltaNet output, gated by SiLU(z); a plain weight (initialised to 1)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x, z):
        y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * y.to(x.dtype) * F.silu(z.float())).to(x.dtype)


class _Conv(nn.Module):
    """Holds the depthwise conv weight [channels, 1, kernel] under the checkpoint's name."""

    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels, 1, kernel))


class Step:
    """What one pass over new tokens needs to know besides the tokens.

    start: column of the first new token (the cache length); bidir_from: index,
    within the new tokens, where the bidirectional block begins (T: none);
    commit: how many of the new tokens, from the first, to write into `cache` (True: all,
    False: none); pad: [B] left padding per row.
    """

    def __init__(self, T: int, mode: str, cache: PrefixCache | None, commit: bool | int, block_len: int,
                 pad: torch.Tensor, device):
        self.cache, self.pad = cache, pad
        self.commit = T if commit is True else int(commit)
        self.start = cache.length if cache is not None else 0
        self.bidir_from = {"causal": T, "block": max(T - block_len, 0), "bidirectional": 0}[mode]
        cols = torch.arange(self.start, self.start + T, device=device)
        self.positions = cols[None, :] - pad[:, None]           # [B, T] RoPE positions
        self.valid = self.positions >= 0                         # [B, T] False on left padding
        # whole unpadded rows read causally from the start (training's causal passes, an unpadded
        # prefill): the attention kernel's own causal mask, which skips the upper triangle and
        # needs no [B, 1, T, T] mask (the twin's training steps 1.27x faster on CPU, the same gradients)
        self.plain_causal = self.bidir_from == T and self.start == 0 and not bool(pad.any())

    @cached_property
    def attention_mask(self) -> torch.Tensor:
        """[B, 1, T or 1, keys] bool, built once for all attention layers: key j is visible to
        query i when it is not padding, and before i or both are inside the bidirectional block."""
        T = self.positions.shape[1]
        kcol = torch.arange(self.start + T, device=self.pad.device)
        not_pad = kcol[None, None, :] >= self.pad[:, None, None]           # [B, 1, S]
        if self.bidir_from == 0:   # every new token is in the block: it sees every key
            return not_pad[:, None]
        qcol = torch.arange(self.start, self.start + T, device=self.pad.device)
        b0 = self.start + self.bidir_from
        see = (kcol[None, :] <= qcol[:, None]) | ((qcol[:, None] >= b0) & (kcol[None, :] >= b0))
        itself = kcol[None, None, :] == qcol[None, :, None]   # a padding query sees itself, never NaN
        return (see[None] & not_pad | itself)[:, None]


class GatedAttention(nn.Module):
    def __init__(self, c: ModelConfig, layer: int):
        super().__init__()
        self.layer, self.heads, self.kv_heads, self.head_dim = layer, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim * 2, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
        self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
        self.register_buffer("inv_freq", torch.empty(c.rotary_dim // 2), persistent=False)

    def rope(self, x, positions):  # x [B, h, T, d]; rotate-half over the first rotary_dim dims
        freqs = positions[:, None, :, None].float() * self.inv_freq       # [B, 1, T, rd/2]
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
        rd = cos.shape[-1]
        rot, rest = x[..., :rd].float(), x[..., rd:]
        half = torch.cat([-rot[..., rd // 2:], rot[..., : rd // 2]], -1)
        return torch.cat([(rot * cos + half * sin).to(x.dtype), rest], -1)

    def forward(self, x, s: Step):
        B, T, _ = x.shape
        # q_proj's output is laid out per head as [query | gate]
        q, gate = self.q_proj(x).view(B, T, self.heads, 2 * self.head_dim).chunk(2, dim=-1)
        q = self.rope(self.q_norm(q).transpose(1, 2), s.positions)                           # [B, h, T, d]
        k = self.rope(self.k_norm(self.k_proj(x).view(B, T, self.kv_heads, -1)).transpose(1, 2), s.positions)
        v = self.v_proj(x).view(B, T, self.kv_heads, -1).transpose(1, 2)
        if s.cache is not None and self.layer in s.cache.keys:
            k = torch.cat([s.cache.keys[self.layer], k], 2)
            v = torch.cat([s.cache.values[self.layer], v], 2)
        if s.cache is not None and s.commit:
            end = s.start + s.commit
            s.cache.keys[self.layer], s.cache.values[self.layer] = k[:, :, :end], v[:, :, :end]
        mask = None if s.plain_causal else s.attention_mask
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=s.plain_causal, enable_gqa=True)
        out = out.transpose(1, 2).reshape(B, T, -1) * torch.sigmoid(gate.reshape(B, T, -1))
        return self.o_proj(out)


class GatedDeltaNet(nn.Module):
    def __init__(self, c: ModelConfig, layer: int):
        super().__init__()
        self.layer = layer
        self.hk, self.hv = c.linear_num_key_heads, c.linear_num_value_heads
        self.dk, self.dv = c.linear_key_head_dim, c.linear_value_head_dim
        self.kernel = c.linear_conv_kernel_dim
        key_dim, value_dim = self.hk * self.dk, self.hv * self.dv
        self.in_proj_qkv = nn.Linear(c.hidden_size, 2 * key_dim + value_dim, bias=False)
        self.in_proj_z = nn.Linear(c.hidden_size, value_dim, bias=False)
        self.in_proj_b = nn.Linear(c.hidden_size, self.hv, bias=False)
        self.in_proj_a = nn.Linear(c.hidden_size, self.hv, bias=False)
        self.conv1d = _Conv(2 * key_dim + value_dim, self.kernel)
        self.A_log = nn.Parameter(torch.empty(self.hv))
        self.dt_bias = nn.Parameter(torch.empty(self.hv))
        self.norm = GatedRMSNorm(self.dv, c.rms_norm_eps)
        self.out_proj = nn.Linear(value_dim, c.hidden_size, bias=False)

    def forward(self, x, s: Step):
        B, T, _ = x.shape
        x = x * s.valid[..., None].to(x.dtype)       # padding must not leak into the conv or the state
        mixed = self.in_proj_qkv(x).transpose(1, 2)   # [B, C, T]
        cache = s.cache
        history = cache.conv.get(self.layer) if cache is not None else None
        if history is None:
            history = mixed.new_zeros(B, mixed.shape[1], self.kernel - 1)
        window = torch.cat([history, mixed], -1)
        if cache is not None and s.commit:   # the last kernel-1 inputs of the committed tokens
            cache.conv[self.layer] = window[..., s.commit:s.commit + self.kernel - 1]
        # depthwise causal conv as K shifted products: the same as F.conv1d, and forward plus
        # backward run 2-3x faster on CPU (measured; conv1d's backward took 8% of a training step)
        w = self.conv1d.weight.to(window.dtype)[:, 0]         # [C, K]
        mixed = F.silu(sum(w[:, j, None] * window[..., j:j + T] for j in range(self.kernel)))
        q, k, v = mixed.transpose(1, 2).split([self.hk * self.dk, self.hk * self.dk, self.hv * self.dv], -1)

        def heads(t, h, d):  # [B, T, h*d] -> [B, hv, T, d] in float32; key head i serves value heads i*r..
            return t.reshape(B, T, h, d).float().repeat_interleave(self.hv // h, 2).transpose(1, 2)

        q, k = heads(q, self.hk, self.dk), heads(k, self.hk, self.dk)
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) / math.sqrt(self.dk)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        v = heads(v, self.hv, self.dv)
        beta = torch.sigmoid(self.in_proj_b(x).float()).transpose(1, 2)                           # [B, hv, T]
        g = (-self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())).transpose(1, 2)

        state = cache.state.get(self.layer) if cache is not None else None
        c = s.commit if cache is not None else 0
        if 0 < c < T:   # the cache takes the state after the committed tokens; the rest go on from it
            o, state = gated_delta.scan(*(t[:, :, :c] for t in (q, k, v, g, beta)), state)
            rest, _ = gated_delta.scan(*(t[:, :, c:] for t in (q, k, v, g, beta)), state)
            o = torch.cat([o, rest], 2)
        else:
            o, state = gated_delta.scan(q, k, v, g, beta, state)
        if c:
            cache.state[self.layer] = state
        b0 = s.bidir_from
        if b0 < T - 1:  # the last token of a block has nothing after it
            back = gated_delta.backward_exclusive(*(t[:, :, b0:] for t in (q, k, v, g, beta)))
            o = torch.cat([o[:, :, :b0], o[:, :, b0:] + back], 2)
        z = self.in_proj_z(x).view(B, T, self.hv, self.dv)
        o = self.norm(o.transpose(1, 2).to(x.dtype), z)
        return self.out_proj(o.reshape(B, T, -1))


class Experts(nn.Module):
    """Routed experts as stacked tensors: gate_up_proj [E, 2I, D] (gate rows first), down_proj [E, D, I]."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        E, I, D = c.num_experts, c.moe_intermediate_size, c.hidden_size
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * I, D))
        self.down_proj = nn.Parameter(torch.empty(E, D, I))

    def forward(self, x, expert, weight):
        # N tokens, A active experts per token, D model dim; expert, weight: [N, A]
        flat = expert.reshape(-1)
        order = flat.argsort()                               # the N*A (token, expert) pairs by expert
        token = order // expert.shape[1]
        counts = torch.bincount(flat, minlength=self.gate_up_proj.shape[0]).tolist()
        # one gather in, one scatter out; each expert works on a contiguous run of rows
        outs = []
        for e, rows in enumerate(x[token].split(counts)):
            if len(rows):
                gate, up = F.linear(rows, self.gate_up_proj[e]).chunk(2, -1)
                outs.append(F.linear(F.silu(gate) * up, self.down_proj[e]))
        y = torch.cat(outs) * weight.reshape(-1)[order, None]
        return torch.zeros_like(x).index_add_(0, token, y.to(x.dtype))


class Router(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.top_k = c.num_experts_per_tok
        self.weight = nn.Parameter(torch.empty(c.num_experts, c.hidden_size))

    def forward(self, x):  # softmax over all experts, keep the top k, renormalise
        probs = F.linear(x, self.weight).float().softmax(-1)
        weight, expert = probs.topk(self.top_k, -1)
        return expert, (weight / weight.sum(-1, keepdim=True)).to(x.dtype)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.gate = Router(c)
        self.experts = Experts(c)
        self.shared_expert = MLP(c.hidden_size, c.shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(c.hidden_size, 1, bias=False)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        expert, weight = self.gate(x)
        y = self.experts(x, expert, weight) + torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        return y.reshape(shape)


class Layer(nn.Module):
    def __init__(self, c: ModelConfig, i: int):
        super().__init__()
        self.kind = c.layer_types[i]
        if self.kind == "linear_attention":
            self.linear_attn = GatedDeltaNet(c, i)
        else:
            self.self_attn = GatedAttention(c, i)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MoE(c)

    def forward(self, x, s: Step):
        mixer = self.linear_attn if self.kind == "linear_attention" else self.self_attn
        x = x + mixer(self.input_layernorm(x), s)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Layer(c, i) for i in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class CloverModel(nn.Module):
    """The whole network. `forward` is the uncached reference; `prefill`, `step`
    and `commit` are the cached path the decoder uses, one code path for both."""

    family = "clover"
    noise = "mask"  # canvases start as mask tokens

    def __init__(self, config: ModelConfig, tokenizer=None):
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        self.source = None  # the directory it was loaded from, if any
        self.model = Backbone(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.reset_buffers(self.lm_head.weight.device)

    def reset_buffers(self, device):
        """Recompute the non-persistent RoPE tables (after building on the meta device)."""
        c = self.config
        for m in self.modules():
            if isinstance(m, GatedAttention):
                m.inv_freq = 1.0 / c.rope_theta ** (torch.arange(0, c.rotary_dim, 2, device=device).float() / c.rotary_dim)
        if c.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    @property
    def device(self):
        return self.lm_head.weight.device

    def _run(self, ids, mode: str, cache: PrefixCache | None = None, commit: bool | int = False,
             block_len: int | None = None, pad=None):
        if mode not in MODES:
            raise UsageError(f"mode must be one of {MODES}, got {mode!r}")
        if mode != "causal" and self.config.mask_token_id is None:
            raise UsageError("this checkpoint has no mask token (config.json mask_token_id, or a mask token "
                             "in tokenizer.json), so it can only run causally; it cannot denoise")
        if pad is None:
            pad = cache.pad if cache is not None else ids.new_zeros(ids.shape[0])
        s = Step(ids.shape[1], mode, cache, commit, block_len or self.config.block_size, pad, ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, s)
        if cache is not None:
            cache.length += s.commit
        return self.model.norm(x)

    def forward(self, input_ids, mode: str = "causal", *, block_len: int | None = None, pad=None):
        """Logits [batch, length, vocab] of a whole sequence, no cache.

        block mode: the last `block_len` (default config.block_size) tokens are the
        current block. pad: [batch] number of left-padding tokens per row.
        """
        return self.lm_head(self.hidden(input_ids, mode, block_len=block_len, pad=pad))

    def hidden(self, input_ids, mode: str = "causal", *, block_len: int | None = None, pad=None):
        """`forward` before the output head: final hidden states [batch, length, hidden].
        Training applies lm_head to the masked positions only."""
        return self._run(input_ids, mode, block_len=block_len, pad=pad)

    @torch.no_grad()
    def prefill(self, input_ids, lengths=None) -> tuple[PrefixCache, torch.Tensor]:
        """Encode left-padded prompts [B, P] once (causally). lengths: [B] real lengths.

        Returns the cache and the next token's logits [B, vocab] (the output head runs on the
        last column only; nothing reads the others)."""
        cache = empty_cache(input_ids, lengths)
        return cache, self.lm_head(self._run(input_ids, "causal", cache, commit=True)[:, -1])

    @torch.no_grad()
    def step(self, block_ids, cache: PrefixCache, mode: str = "block", *, at=None):
        """One denoising step: logits of the current block against the cache, which is left unchanged.

        at: optional (rows, columns) index tensors; then only the logits there, [N, vocab]
        (the output head is a large share of a step over a long block)."""
        h = self._run(block_ids, mode, cache, commit=False, block_len=block_ids.shape[1])
        return self.lm_head(h if at is None else h[at])

    @torch.no_grad()
    def prefill_step(self, input_ids, block_ids, lengths=None, *, at=None,
                     cache: PrefixCache | None = None) -> tuple[PrefixCache, torch.Tensor]:
        """`prefill` of the prompts and the first `step` of a block over them, in one pass: the
        prompt columns are encoded causally and cached, the block columns see them and each other.
        With `cache`, input_ids continue it (a finished block: `commit`, then `step`, in one pass).

        Returns the cache (of the prompts only) and the block's logits, as `step` gives them."""
        P = input_ids.shape[1]
        cache = empty_cache(input_ids, lengths) if cache is None else cache
        h = self._run(torch.cat([input_ids, block_ids], 1), "block", cache, commit=P,
                      block_len=block_ids.shape[1])[:, P:]
        return cache, self.lm_head(h if at is None else h[at])

    @torch.no_grad()
    def commit(self, block_ids, cache: PrefixCache):
        """Append a finished block to the history (causally, as the prompt was); returns the next
        token's logits [B, vocab]."""
        return self.lm_head(self._run(block_ids, "causal", cache, commit=True)[:, -1])

    def init_weights(self, generator: torch.Generator | None = None, std: float = 0.02):
        """Random initialisation for training from scratch (and for tests)."""
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("A_log"):
                    p.copy_(torch.empty_like(p).uniform_(1, 16, generator=generator).log())
                elif name.endswith("dt_bias"):  # softplus^-1 of a step size in [1e-3, 1e-1]
                    dt = torch.empty_like(p).uniform_(math.log(1e-3), math.log(1e-1), generator=generator).exp()
                    p.copy_(dt + torch.log(-torch.expm1(-dt)))
                elif name.endswith("linear_attn.norm.weight"):
                    p.fill_(1.0)
                elif name.endswith("norm.weight"):
                    p.zero_()  # zero-centred: scale 1 + w
                else:
                    p.normal_(0.0, std, generator=generator)
        return self
