"""Causal linear attention: chunked == naive == recurrent == fast-transformers; feature maps."""

from __future__ import annotations

import math

import pytest
import torch

from musicgen.config import ModelConfig
from musicgen.errors import MusicgenError
from musicgen.model import build_model
from musicgen.model.attention import (
    AttentionCache,
    CausalSelfAttention,
    causal_linear_attention,
    fast_transformers_attention,
    fast_transformers_available,
    naive_linear_attention,
)
from musicgen.model.features import FavorFeatures, ReluFeatures


def _features(kind: str, n: int, seed: int = 0, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) * scale for _ in range(3))
    torch.manual_seed(seed)
    fm = FavorFeatures(8, 16, 8) if kind == "favor" else ReluFeatures(8, 16, 8)
    phi_q = fm.query(q)
    phi_k, _ = fm.key(k)
    return phi_q, phi_k, v, fm


@pytest.mark.parametrize("kind", ["favor", "relu"])
@pytest.mark.parametrize("n,chunk", [(1, 4), (7, 4), (64, 16), (70, 16), (33, 64)])
def test_chunked_equals_naive(kind, n, chunk):
    phi_q, phi_k, v, fm = _features(kind, n)
    ref = naive_linear_attention(phi_q.double(), phi_k.double(), v.double(), fm.eps)
    out = causal_linear_attention(phi_q, phi_k, v, chunk, fm.eps)
    assert out.shape == (2, 3, n, 8)
    assert (out.double() - ref).abs().max() < 1e-5


def test_chunked_gradients_equal_naive():
    phi_q, phi_k, v, fm = _features("favor", 50)
    leaves = [t.detach().requires_grad_() for t in (phi_q, phi_k, v)]
    w = torch.randn(2, 3, 50, 8)
    (causal_linear_attention(*leaves, 16, fm.eps) * w).sum().backward()
    got = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    (naive_linear_attention(*leaves, fm.eps) * w).sum().backward()
    for a, t in zip(got, leaves, strict=True):
        assert (a - t.grad).abs().max() < 1e-4 * (1 + t.grad.abs().max())


@pytest.mark.parametrize("grad", [True, False])  # new sums, or in place (generation)
@pytest.mark.parametrize("kind", ["favor", "relu"])
def test_recurrent_equals_parallel_with_online_stabiliser(kind, grad):
    """Keys 2x larger than usual: the running max rescales (S, z) yet outputs agree."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 40, 8, generator=g) * 2 for _ in range(3))
    torch.manual_seed(0)
    fm = FavorFeatures(8, 16, 8) if kind == "favor" else ReluFeatures(8, 16, 8)
    phi_k, _ = fm.key(k)
    par = causal_linear_attention(fm.query(q), phi_k, v, 16, fm.eps)
    cache = AttentionCache(
        torch.zeros(2, 3, fm.out_dim, 8), torch.zeros(2, 3, fm.out_dim), torch.full((2, 3), -1e30)
    )
    outs = []
    with torch.set_grad_enabled(grad):
        for t in range(40):
            pq = fm.query(q[:, :, t : t + 1])
            outs.append(cache.step(pq[:, :, 0], k[:, :, t : t + 1], v[:, :, t], fm))
    assert (torch.stack(outs, 2) - par).abs().max() < 1e-4


def test_favor_stabiliser_avoids_overflow():
    """Inputs along the projection rows: exp(Wx - |x|^2/2) ~ e^64, products overflow float32."""
    torch.manual_seed(0)
    fm = FavorFeatures(128, 32, 128)
    x = (fm.proj[:12] / fm.scale).reshape(1, 1, 12, 128)  # u_i = |w_i|^2 / 2
    e = torch.exp(fm._exponent(x))
    assert torch.isinf(e @ e.transpose(-1, -2)).any()
    v = torch.randn(1, 1, 12, 4)
    phi_k, _ = fm.key(x)
    out = causal_linear_attention(fm.query(x), phi_k, v, 4, fm.eps)
    e64 = torch.exp(fm._exponent(x).double())
    ref = naive_linear_attention(e64, e64, v.double(), 0.0)
    assert torch.isfinite(out).all()
    assert (out.double() - ref).abs().max() < 1e-4


def test_favor_estimates_softmax_kernel():
    """phi(q).phi(k) -> exp(q.k / sqrt(D)) with many features (unbiased estimator)."""
    torch.manual_seed(0)
    d = 16
    fm = FavorFeatures(d, 8192, d)
    q, k = torch.randn(1, 1, 6, d) * 0.3, torch.randn(1, 1, 6, d) * 0.3
    uq, uk = fm._exponent(q), fm._exponent(k)
    est = torch.exp(uq) @ torch.exp(uk).transpose(-1, -2) / fm.n_features
    exact = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(d))
    err = (est - exact).abs() / exact
    assert err.mean() < 0.03 and err.max() < 0.1


def test_orthogonal_rows_in_blocks():
    torch.manual_seed(0)
    fm = FavorFeatures(8, 20, 8)
    w = fm.proj[:8] / fm.proj[:8].norm(dim=1, keepdim=True)
    assert torch.allclose(w @ w.T, torch.eye(8), atol=1e-5)
    assert "proj" in fm.state_dict()


def _tiny(**kw) -> ModelConfig:
    base = dict(
        vocab_size=30,
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        n_features=16,
        num_realizations=8,
        kernel_size=4,
        num_sines=3,
        chunk_size=8,
    )
    base.update(kw)
    return ModelConfig(**base)


def test_redraw_policies():
    torch.manual_seed(0)
    model = build_model(_tiny(redraw="every", redraw_every=3)).train()
    proj = model.blocks[0].attn.features.proj
    before = proj.clone()
    model.on_train_step(2)
    assert torch.equal(proj, before)
    model.on_train_step(3)
    assert not torch.equal(proj, before)
    after = proj.clone()
    model.eval().on_train_step(6)  # frozen in eval
    assert torch.equal(proj, after)
    never = build_model(_tiny(redraw="never")).train()
    p0 = never.blocks[0].attn.features.proj.clone()
    for s in range(50):
        never.on_train_step(s)
    assert torch.equal(never.blocks[0].attn.features.proj, p0)
    # with a generator the new features depend on it alone (data-parallel ranks agree)
    a, b = (build_model(_tiny(redraw="every", redraw_every=1)).train() for _ in range(2))
    a.on_train_step(5, torch.Generator().manual_seed(42))
    b.on_train_step(5, torch.Generator().manual_seed(42))
    assert torch.equal(a.blocks[1].attn.features.proj, b.blocks[1].attn.features.proj)
    always = build_model(_tiny(redraw="prob", redraw_prob=1.0)).train()
    p0 = always.blocks[1].attn.features.proj.clone()
    always.on_train_step(1)
    assert not torch.equal(always.blocks[1].attn.features.proj, p0)


def test_unknown_backend_and_missing_fast_transformers():
    with pytest.raises(MusicgenError, match="model.backend"):
        build_model(_tiny(backend="cuda_magic"))
    if not fast_transformers_available():
        with pytest.raises(MusicgenError, match="make install-fast"):
            build_model(_tiny(backend="fast_transformers"))


@pytest.mark.skipif(
    not fast_transformers_available(),
    reason="pytorch-fast-transformers not installed (`make install-fast`)",
)
def test_fast_transformers_reference_outputs_and_gradients():
    phi_q, phi_k, v, fm = _features("favor", 70)
    leaves = [t.detach().requires_grad_() for t in (phi_q, phi_k, v)]
    w = torch.randn(2, 3, 70, 8)
    ref = fast_transformers_attention(*leaves, fm.eps)
    (ref * w).sum().backward()
    ref_grads = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    out = causal_linear_attention(*leaves, 16, fm.eps)
    (out * w).sum().backward()
    assert (out - ref).abs().max() < 1e-5
    for a, t in zip(ref_grads, leaves, strict=True):
        assert (a - t.grad).abs().max() < 1e-4 * (1 + a.abs().max())


@pytest.mark.skipif(
    not fast_transformers_available(),
    reason="pytorch-fast-transformers not installed (`make install-fast`)",
)
def test_fast_transformers_backend_model_matches_torch_backend():
    torch.manual_seed(0)
    a = build_model(_tiny(pe="sine_spe")).eval()
    b = build_model(_tiny(pe="sine_spe", backend="fast_transformers")).eval()
    b.load_state_dict(a.state_dict())
    ids = torch.randint(0, 30, (2, 50))
    na, nb = a.new_noise("cpu", seed=5), b.new_noise("cpu", seed=5)
    assert (a(ids, noise=na) - b(ids, noise=nb)).abs().max() < 1e-4


def test_attention_layer_shapes_and_float32_sums_under_autocast():
    torch.manual_seed(0)
    layer = CausalSelfAttention(_tiny(), spe=False)
    x = torch.randn(2, 20, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
    assert y.shape == (2, 20, 16) and y.dtype == torch.bfloat16
    assert (y.float() - layer(x)).abs().max() < 0.1


def _attend(fm, q, k, v, chunk: int = 16):
    """The parallel form as the layer runs it: causal key stabiliser, chunked attention."""
    phi_k, shift = fm.key_causal(k)
    return causal_linear_attention(fm.query(q), phi_k, v, chunk, fm.eps, shift)


def _key_gap(fm, early, late) -> float:
    """Nats by which the largest later key exponent exceeds the largest earlier one (the smallest
    such gap over batch and heads)."""
    top = [fm._exponent(t).amax(-1).amax(-1) for t in (early, late)]  # (B, H) each
    return float((top[1] - top[0]).min())


def _norm_to(x, norm: float):
    return x / x.norm(dim=-1, keepdim=True) * norm


def _exact(fm, q, k, v):
    """float64 attention with unstabilised keys (exp(u) stays finite in float64; no eps, which is
    not scale-free for FAVOR+)."""
    if isinstance(fm, FavorFeatures):
        phi_k, eps = torch.exp(fm._exponent(k).double()), 0.0
    else:
        phi_k, eps = fm.key(k)[0].double(), fm.eps
    return naive_linear_attention(fm.query(q).double(), phi_k, v.double(), eps)


@pytest.mark.parametrize("kind", ["favor", "relu"])
@pytest.mark.parametrize("scale", [21.0, 25.0, 30.0])
def test_parallel_form_is_causal_in_value_for_large_norm_keys(kind, scale):
    """Large-norm early keys (FAVOR+ exponents 40-110 nats below those of ordinary keys): changing
    the later keys and values, from more such keys to ordinary ones, leaves every earlier output
    unchanged (also inside the chunk where the change starts) and equal to exact attention."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 3, 45, 8, generator=g) for _ in range(3))
    torch.manual_seed(0)
    fm = FavorFeatures(8, 16, 8) if kind == "favor" else ReluFeatures(8, 16, 8)
    t0 = 21  # mid-chunk (chunk 16)
    k[:, :, :t0] = _norm_to(k[:, :, :t0], scale)
    k2, v2 = k.clone(), v.clone()
    k[:, :, t0:] = _norm_to(k[:, :, t0:], scale)
    v2[:, :, t0:] = torch.randn(2, 3, 45 - t0, 8, generator=g) * 100
    if kind == "favor":
        assert _key_gap(fm, k[:, :, :t0], k2[:, :, t0:]) > 40
    a, b = _attend(fm, q, k, v), _attend(fm, q, k2, v2)
    assert torch.isfinite(b).all()
    assert (a[:, :, :t0] - b[:, :, :t0]).abs().max() < 1e-6
    for out, kk, vv in ((a, k, v), (b, k2, v2)):
        assert (out.double() - _exact(fm, q, kk, vv)).abs().max() < 1e-4 * (1 + vv.abs().max())


@pytest.mark.parametrize("grad", [True, False])  # new sums, or in place (generation)
@pytest.mark.parametrize("kind", ["favor", "relu"])
def test_recurrent_equals_parallel_across_a_large_key_gap(kind, grad):
    """Training (parallel) and generation (recurrent) agree when later keys jump by 40+ nats:
    the stabiliser stays for some steps and rises at others."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 40, 8, generator=g) for _ in range(3))
    torch.manual_seed(0)
    fm = FavorFeatures(8, 16, 8) if kind == "favor" else ReluFeatures(8, 16, 8)
    k[:, :, :25] = _norm_to(k[:, :, :25], 22.0)
    if kind == "favor":
        assert _key_gap(fm, k[:, :, :25], k[:, :, 25:]) > 40
    par = _attend(fm, q, k, v)
    cache = AttentionCache(
        torch.zeros(1, 2, fm.out_dim, 8), torch.zeros(1, 2, fm.out_dim), torch.full((1, 2), -1e30)
    )
    outs = []
    with torch.set_grad_enabled(grad):
        for t in range(40):
            pq = fm.query(q[:, :, t : t + 1])
            outs.append(cache.step(pq[:, :, 0], k[:, :, t : t + 1], v[:, :, t], fm))
    rec = torch.stack(outs, 2)
    assert (rec - par).abs().max() < 1e-4 * (1 + par.abs().max())
    assert (par.double() - _exact(fm, q, k, v)).abs().max() < 1e-4


@pytest.mark.parametrize("feature_map", ["favor", "relu"])
@pytest.mark.parametrize("pe", ["ape", "sine_spe", "conv_spe"])
def test_attention_layer_is_causal_in_value_for_large_inputs(feature_map, pe):
    """The whole layer (projections, SPE codes, feature map, chunked attention): with early
    inputs 30x too large (very negative key exponents), replacing the later inputs by ordinary
    ones (keys 40+ nats above) leaves the earlier outputs unchanged."""
    torch.manual_seed(0)
    model = build_model(_tiny(pe=pe, gated=pe != "ape", feature_map=feature_map)).eval()
    attn = model.blocks[0].attn
    x = torch.randn(2, 30, 16) * 30
    x2 = x.clone()
    x2[:, 13:] /= 30
    codes = model._codes(torch.arange(30), model.new_noise("cpu", 7))[0]
    with torch.no_grad():
        a, b = attn(x, codes), attn(x2, codes)
    assert torch.isfinite(b).all()
    assert (a[:, :13] - b[:, :13]).abs().max() < 1e-5 * (1 + a[:, :13].abs().max())


def test_causal_stabiliser_gradients_equal_exact_attention():
    """Through the feature maps, the stabilised chunked form has the gradients (for q, k, v) of
    float64 attention with unstabilised keys, also across a 40+ nat key gap."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 37, 8, generator=g) for _ in range(3))
    k[:, :, :20] = _norm_to(k[:, :, :20], 22.0)
    torch.manual_seed(0)
    fm = FavorFeatures(8, 16, 8)
    w = torch.randn(1, 2, 37, 8, generator=g)
    grads = []
    for fn in (lambda a, b, c: _attend(fm, a, b, c, chunk=8), lambda a, b, c: _exact(fm, a, b, c)):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        (fn(*leaves) * w).sum().backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads, strict=True):
        assert (a.double() - b).abs().max() < 1e-4 * (1 + b.abs().max())
