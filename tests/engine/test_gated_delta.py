import pytest
import torch

from clover_struct.engine import gated_delta


def inputs(B=2, H=3, T=50, dk=8, dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(B, H, T, dk, generator=g), dim=-1) / dk ** 0.5
    k = torch.nn.functional.normalize(torch.randn(B, H, T, dk, generator=g), dim=-1)
    v = torch.randn(B, H, T, dv, generator=g)
    decay = -torch.rand(B, H, T, generator=g)
    beta = torch.rand(B, H, T, generator=g)
    state = torch.randn(B, H, dk, dv, generator=g)
    return q, k, v, decay, beta, state


@pytest.mark.parametrize("T,chunk", [(50, 64), (50, 16), (64, 16), (200, 64), (1, 64)])
def test_chunked_equals_recurrent(close, T, chunk):
    q, k, v, g, beta, state = inputs(T=T)
    o_ref, s_ref = gated_delta.recurrent(q, k, v, g, beta, state)
    o, s = gated_delta.chunked(q, k, v, g, beta, state, chunk=chunk)
    close(o, o_ref, "outputs", 1e-5)
    close(s, s_ref, "final state", 1e-5)


def test_chunked_gradients_equal_recurrent(close):
    """Training back-propagates through the chunked scan: its gradients must be the reference's."""
    leaves = [t.double().requires_grad_() for t in inputs(T=37)]
    weight = torch.randn(2, 3, 37, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def grads(scan):
        o, s = scan(*leaves)
        return torch.autograd.grad((o * weight).sum() + s.square().sum(), leaves)

    for name, a, b in zip(("q", "k", "v", "g", "beta", "state"),
                          grads(lambda *x: gated_delta.chunked(*x, chunk=16)), grads(gated_delta.recurrent)):
        close(a, b, f"d loss / d {name}", 1e-8)


def test_splitting_the_sequence_carries_the_state(close):
    q, k, v, g, beta, state = inputs(T=40)
    o_all, s_all = gated_delta.chunked(q, k, v, g, beta, state)
    o1, s1 = gated_delta.chunked(*(t[:, :, :25] for t in (q, k, v, g, beta)), state)
    o2, s2 = gated_delta.chunked(*(t[:, :, 25:] for t in (q, k, v, g, beta)), s1)
    close(torch.cat([o1, o2], 2), o_all, "outputs", 1e-5)
    close(s2, s_all, "state", 1e-5)


def test_backward_exclusive_reads_only_later_tokens(close):
    q, k, v, g, beta, _ = inputs(T=12)
    out = gated_delta.backward_exclusive(q, k, v, g, beta)
    for t in range(12):  # naive: the ordinary rule over reversed tokens t+1.., read with q_t
        later = [x[:, :, t + 1:].flip(2) for x in (k, v, g, beta)]
        if t == 11:
            expected = torch.zeros_like(out[:, :, t])
        else:
            _, S = gated_delta.recurrent(q[:, :, t + 1:], *later)
            expected = torch.einsum("bhkv,bhk->bhv", S, q[:, :, t])
        close(out[:, :, t], expected, f"token {t}", 1e-5)
