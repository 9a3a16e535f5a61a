"""The gated delta rule, the sequence mixer of Gated DeltaNet layers.

Per value head, with a state S of shape [d_k, d_v] and, for each token t,
decay g_t <= 0 (log space), write strength beta_t in (0, 1), key k_t (unit
norm), value v_t and query q_t (unit norm / sqrt(d_k)):

    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,   o_t = S_t^T q_t

`recurrent` is the step-by-step reference. `chunked` computes the same thing
in chunks of C tokens (the WY/UT form of the DeltaNet papers): inside a chunk
the C coupled updates are solved at once with a unit-triangular system, and
only the chunk boundaries are sequential. `scan` picks the fastest correct one
(flash-linear-attention's kernel on CUDA when installed).

`backward_exclusive` is the block-diffusion half: the same rule run from the
end of a block towards its start, from a zero state, where token t reads only
the tokens after it. See model.GatedDeltaNet for how the two halves combine.

All tensors are [batch, heads, time, dim] (g, beta: [batch, heads, time]) and
float32; the state is [batch, heads, d_k, d_v].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # flash-linear-attention: only on CUDA, only when installed
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as _fla_chunk
except ImportError:  # pragma: no cover - depends on the machine
    _fla_chunk = None


def recurrent(q, k, v, g, beta, state=None):
    B, H, T, dk = k.shape
    S = q.new_zeros(B, H, dk, v.shape[-1]) if state is None else state
    out = torch.empty_like(v)
    for t in range(T):
        S = S * g[:, :, t, None, None].exp()
        kv = torch.einsum("bhkv,bhk->bhv", S, k[:, :, t])  # what S already predicts for k_t
        delta = (v[:, :, t] - kv) * beta[:, :, t, None]
        S = S + k[:, :, t, :, None] * delta[:, :, None, :]
        out[:, :, t] = torch.einsum("bhkv,bhk->bhv", S, q[:, :, t])
    return out, S


def _unit_lower_inverse(A):
    """(I + A)^-1 for strictly lower-triangular A [..., C, C], by doubling.

    A is nilpotent (A^C = 0), so (I + A)(I - A)(I + A^2)(I + A^4)... = I once the
    power reaches C: log2(C) batched matmuls instead of a per-matrix triangular
    solve, which on the CPU cost ~40x more for 32x32 blocks.
    """
    inverse = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device) - A
    power = A
    for _ in range(max(A.shape[-1] - 1, 1).bit_length() - 1):
        power = power @ power
        inverse = inverse + inverse @ power
    return inverse


# Chunk length: work inside a chunk grows as C^2 (C^3 for the inverse), the sequential
# loop as T/C. On CPU 16 is fastest by far: a [20, 4, 965, 32] scan took ~1.0 s with
# C=64, ~0.3 s with 32 and ~0.1 s with 16 (1 thread), with the same error against
# `recurrent` (< 1e-7); the scan's forward + backward in training ~3x faster than with 64.
# On CUDA the intra-chunk work is nearly free and every loop turn is a few kernel launches,
# so there longer chunks win.
CHUNK, CUDA_CHUNK = 16, 64


def chunked(q, k, v, g, beta, state=None, chunk: int = CHUNK):
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    C = min(chunk, T)
    pad = (-T) % C
    if pad:  # zero keys, values, betas and decays leave the state untouched
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = (T + pad) // C
    q, k, v = (x.reshape(B, H, n, C, -1) for x in (q, k, v))
    g, beta = g.reshape(B, H, n, C), beta.reshape(B, H, n, C)

    G = g.cumsum(-1)                                          # [B, H, n, C] log decay from chunk start
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    gamma = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()  # Γ_ij, j <= i
    kb = k * beta[..., None]
    # (I + strict_lower((βK)Kᵀ ⊙ Γ)) U = βV  and  … W = βK ⊙ e^G
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    # float64 here keeps the doubling as exact as a triangular solve (C x C is small)
    inverse = _unit_lower_inverse(((kb @ k.transpose(-1, -2)) * gamma).masked_fill(~strict, 0.0).double()).to(k.dtype)
    U = inverse @ (v * beta[..., None])
    W = inverse @ (kb * G.exp()[..., None])
    intra = (q @ k.transpose(-1, -2)) * gamma                 # [B, H, n, C, C], diagonal included
    k_to_end = (k * (G[..., -1:] - G).exp()[..., None]).transpose(-1, -2)   # [B, H, n, dk, C]
    decay = G[..., -1].exp().reshape(B * H, n, 1, 1)         # over each whole chunk
    # Only the state's chain is sequential: per chunk, with S the state entering it, the new
    # values U - W S and the state leaving it, e^{G_C} S + k_to_end (U - W S), each one fused
    # multiply-add over [B*H] matrices. The outputs, (q e^G) S + intra (U - W S), are then
    # computed for all chunks at once. (Fewer, larger ops than computing the outputs inside
    # the loop: a training step 18-22% faster on 2 CPU threads, a one-row decoding step ~10%.)
    U, W, k_to_end = (x.reshape(B * H, n, *x.shape[-2:]) for x in (U, W, k_to_end))
    S = q.new_zeros(B * H, dk, dv) if state is None else state.reshape(B * H, dk, dv)
    # unbind, not U[:, i]: each indexing's backward writes its gradient into a zero tensor
    # of U's full size, n of them per scan (a training step 3-22% slower on 2 CPU threads,
    # the most for the longest canvases)
    entering, new_values = [], []
    for U_i, W_i, k_i, decay_i in zip(*(x.unbind(1) for x in (U, W, k_to_end, decay))):
        entering.append(S)
        new_values.append(torch.baddbmm(U_i, W_i, S, alpha=-1))
        S = torch.baddbmm(S * decay_i, k_i, new_values[-1])
    entering, new_values = (torch.stack(x, 1).view(B, H, n, -1, dv) for x in (entering, new_values))
    out = (q * G.exp()[..., None]) @ entering + intra @ new_values
    return out.reshape(B, H, n * C, dv)[:, :, :T], S.view(B, H, dk, dv)


def scan(q, k, v, g, beta, state=None):
    """The fastest available exact form; returns (outputs, final state)."""
    if _fla_chunk is not None and q.is_cuda:
        o, S = _fla_chunk(*(x.transpose(1, 2).contiguous() for x in (q, k, v)),
                          g=g.transpose(1, 2).contiguous(), beta=beta.transpose(1, 2).contiguous(),
                          scale=1.0, initial_state=state, output_final_state=True)
        return o.transpose(1, 2), S
    if q.shape[2] == 1 and state is not None:
        return recurrent(q, k, v, g, beta, state)
    return chunked(q, k, v, g, beta, state, CUDA_CHUNK if q.is_cuda else CHUNK)


def backward_exclusive(q, k, v, g, beta):
    """o_t from the tokens strictly after t, scanned from the end with a zero state.

    Reversing time turns this into the ordinary rule, except that the read must
    happen before token t is written: so token t's query is paired with the
    state after t+1, i.e. queries are shifted one step in reversed time.
    """
    flip = [x.flip(2) for x in (q, k, v, g, beta)]
    q_next = F.pad(flip[0][:, :, 1:], (0, 0, 0, 1))          # reversed position r reads with q of r+1
    o, _ = scan(q_next, *flip[1:])
    o = F.pad(o[:, :, :-1], (0, 0, 1, 0))                    # … and its output belongs to r+1
    return o.flip(2)
