"""Positional encodings: SPE statistics match the designed kernels, gating, noise, APE tables."""

from __future__ import annotations

import math

import pytest
import torch

from musicgen.errors import MusicgenError
from musicgen.model import sine_ops
from musicgen.model.positional import (
    NOISE_BLOCK,
    ConvSPE,
    LearnedPE,
    SineSPE,
    SinusoidalPE,
    SPENoise,
)


def _empirical_kernel(spe, n: int, draws: int, gate=None) -> torch.Tensor:
    """Mean over draws of Qbar'_d[m] . Kbar'_d[n] / R, read off by projecting one-hot q, k."""
    pos = torch.arange(n)
    eye = torch.eye(spe.d).reshape(spe.d, 1, 1, spe.d).expand(spe.d, n, spe.h, spe.d)  # D,N,H,D
    acc = torch.zeros(spe.d, spe.h, n, n)
    with torch.no_grad():
        for s in range(draws):
            codes = spe.codes(pos, pos, SPENoise(s, "cpu"))
            qh = codes.project(eye, "q", gate)  # (D, N, H, R) = Qbar'_d / sqrt(R)
            kh = codes.project(eye, "k", gate)
            acc += torch.einsum("dmhr,dnhr->dhmn", qh, kh)
    return acc / draws  # (D, H, M, N)


def _designed(spe, n: int) -> torch.Tensor:
    lags = torch.arange(n)[:, None] - torch.arange(n)[None, :]  # m - n
    with torch.no_grad():
        k = spe.kernel(lags.flatten())  # (N*N, H, D)
    return k.reshape(n, n, spe.h, spe.d).permute(3, 2, 0, 1)  # (D, H, M, N)


def test_sine_spe_statistics_match_closed_form():
    torch.manual_seed(0)
    spe = SineSPE(n_heads=2, head_dim=2, num_realizations=256, num_sines=3)
    with torch.no_grad():
        spe.phase.uniform_(-math.pi, math.pi)
        spe.freq.normal_(0.0, 1.5)
        spe.gain.normal_(0.0, 0.5)
    emp, want = _empirical_kernel(spe, 12, 100), _designed(spe, 12)
    assert (emp - want).abs().max() < 0.06
    assert want.abs().max() > 0.3  # the test is not comparing two near-zero things


def test_conv_spe_statistics_match_cross_correlation_and_vanish_past_p():
    torch.manual_seed(0)
    p = 4
    spe = ConvSPE(n_heads=2, head_dim=2, num_realizations=256, kernel_size=p)
    with torch.no_grad():
        spe.filt_k.normal_(0.0, 0.5)  # Q and K filters differ: an asymmetric kernel
    emp, want = _empirical_kernel(spe, 12, 100), _designed(spe, 12)
    assert (emp - want).abs().max() < 0.06
    lags = (torch.arange(12)[:, None] - torch.arange(12)[None, :]).abs()
    assert torch.equal(want[..., lags >= p], torch.zeros_like(want[..., lags >= p]))
    assert want[..., lags < p].abs().max() > 0.3
    assert not torch.allclose(want, want.transpose(-1, -2))  # cross-, not auto-correlation
    f = spe.filt_q.detach()[0, 0]
    g = spe.filt_k.detach()[0, 0]
    assert torch.isclose(want[0, 0, 3, 1], (f[:2] * g[2:]).sum(), atol=1e-6)  # lag 2


@pytest.mark.parametrize("kind", ["sine", "conv"])
def test_gated_statistics_mix_kernel_and_constant(kind):
    torch.manual_seed(0)
    spe = SineSPE(2, 2, 256, 3) if kind == "sine" else ConvSPE(2, 2, 256, 3)
    gate = torch.logit(torch.tensor([[0.3, 0.7], [0.5, 0.1]]))  # delta per (head, feature)
    emp, want = _empirical_kernel(spe, 8, 100, gate), _designed(spe, 8)
    delta = torch.sigmoid(gate).T[:, :, None, None]  # (D, H, 1, 1)
    assert (emp - ((1 - delta) * want + delta)).abs().max() < 0.06


@pytest.mark.parametrize("kind", ["sine", "conv"])
def test_gate_one_is_position_free_and_gate_zero_is_pure_kernel(kind):
    torch.manual_seed(0)
    spe = SineSPE(2, 4, 16, 3) if kind == "sine" else ConvSPE(2, 4, 16, 5)
    x = torch.randn(3, 10, 2, 4)
    noise = SPENoise(7, "cpu")
    a = spe.codes(torch.arange(10), torch.arange(10), noise)
    b = spe.codes(torch.arange(500, 510), torch.arange(500, 510), noise)
    one = torch.full((2, 4), math.inf)
    zero = torch.full((2, 4), -math.inf)
    with torch.no_grad():
        for side in ("q", "k"):
            assert torch.equal(a.project(x, side, one), b.project(x, side, one))
            assert torch.equal(a.project(x, side, zero), a.project(x, side, None))
            assert not torch.allclose(a.project(x, side, None), b.project(x, side, None))
        # delta = 1: q^_m = sum_d q_md eps_d / sqrt(R), no trace of the position m
        direct = torch.einsum("bmhd,hdr->bmhr", x, spe.gate_noise(noise)) / 4.0
        assert torch.allclose(a.project(x, "q", one), direct, atol=1e-6)


def test_conv_noise_is_a_function_of_position_across_blocks():
    """Codes for positions around a noise-block boundary match however they are requested."""
    torch.manual_seed(0)
    spe = ConvSPE(1, 2, 4, 8)
    noise = SPENoise(3, "cpu")
    whole = spe.codes(torch.arange(2 * NOISE_BLOCK + 40), torch.arange(2 * NOISE_BLOCK + 40), noise)
    part_pos = torch.arange(NOISE_BLOCK - 10, NOISE_BLOCK + 10)
    part = spe.codes(part_pos, part_pos, SPENoise(3, "cpu"))  # fresh cache, different range
    single = spe.codes(torch.tensor([NOISE_BLOCK + 3]), torch.tensor([5]), SPENoise(3, "cpu"))
    x = torch.randn(1, 2 * NOISE_BLOCK + 40, 1, 2)
    with torch.no_grad():
        w = whole.project(x, "q", None)
        p = part.project(x[:, part_pos], "q", None)
        s_q = single.project(x[:, [NOISE_BLOCK + 3]], "q", None)
        s_k = single.project(x[:, [5]], "k", None)
        assert torch.allclose(w[:, part_pos], p, atol=1e-6)
        assert torch.allclose(w[:, [NOISE_BLOCK + 3]], s_q, atol=1e-6)
        assert torch.allclose(whole.project(x, "k", None)[:, [5]], s_k, atol=1e-6)
        few_pos = torch.arange(NOISE_BLOCK - 2, NOISE_BLOCK + 2)  # a generation step's window
        few = spe.codes(few_pos, few_pos, SPENoise(3, "cpu"))
        for side in ("q", "k"):
            want = whole.project(x, side, None)[:, few_pos]
            assert torch.allclose(few.project(x[:, few_pos], side, None), want, atol=1e-5)


def test_noise_depends_on_seed_only():
    a, b, c = SPENoise(1, "cpu"), SPENoise(1, "cpu"), SPENoise(2, "cpu")
    assert torch.equal(a.gaussian((0, 1), (3, 4)), b.gaussian((0, 1), (3, 4)))
    assert not torch.equal(a.gaussian((0, 1), (3, 4)), c.gaussian((0, 1), (3, 4)))
    assert not torch.equal(a.gaussian((0, 1), (3, 4)), a.gaussian((1, 1), (3, 4)))


def test_sine_codes_far_past_training_length_are_finite_and_periodic():
    torch.manual_seed(0)
    spe = SineSPE(1, 2, 8, 2)
    with torch.no_grad():
        spe.freq.fill_(0.0)  # f = 1/4 exactly: codes repeat every 4 positions
    noise = SPENoise(0, "cpu")
    far = torch.tensor([10**7, 10**7 + 1])
    codes = spe.codes(far, far, noise)
    near = spe.codes(torch.tensor([0, 1]), torch.tensor([0, 1]), noise)
    x = torch.randn(1, 2, 1, 2)
    with torch.no_grad():
        assert torch.allclose(codes.project(x, "q", None), near.project(x, "q", None), atol=1e-5)


def test_sinusoidal_table():
    pe = SinusoidalPE(8)(torch.arange(5))
    assert pe.shape == (5, 8)
    assert torch.allclose(pe[3, 0], torch.tensor(math.sin(3.0)))
    assert torch.allclose(pe[3, 3], torch.tensor(math.cos(3 / 10000 ** (2 / 8))))
    assert torch.isfinite(SinusoidalPE(8)(torch.tensor([10**6]))).all()


def test_learned_table_refuses_positions_past_max_len():
    pe = LearnedPE(16, 8)
    assert pe(torch.arange(16)).shape == (16, 8)
    with pytest.raises(MusicgenError, match="model.max_len"):
        pe(torch.tensor([16]))


@pytest.mark.parametrize("pairs", [0, 100])
@pytest.mark.parametrize("tables", [True, False])
@pytest.mark.parametrize("block", [16, 10_000])
@pytest.mark.parametrize("per_row", [False, True])
def test_sine_tables_and_blocked_contraction_equal_the_direct_one_with_gradients(
    monkeypatch, tables, block, per_row, pairs
):
    """Both contraction paths (shared (N, H, D, R) tables; per layer, in position blocks with a
    hand-written backward), for positions shared by the batch or given per row, give the
    paper's sum_d q_d Qbar_d[m] and the gradients (frequencies, gains, q) of contracting
    (q * Omega) with lambda Z directly."""
    import musicgen.model.positional as positional

    monkeypatch.setattr(positional, "TABLE_MIN_BATCH", 1 if tables else 100)
    monkeypatch.setattr(sine_ops, "SINE_BLOCK", block)
    monkeypatch.setattr(sine_ops, "COLLECT_BLOCK", block)
    monkeypatch.setattr(sine_ops, "PAIR_PATH_MAX", pairs)  # both ways to Omega's gradient
    torch.manual_seed(0)
    spe = SineSPE(2, 4, 8, 3)
    pos = torch.stack([torch.arange(50), torch.arange(50) + 7]) if per_row else torch.arange(50)
    x = torch.randn(2, 50, 2, 4, generator=torch.Generator().manual_seed(1)).requires_grad_()
    codes = spe.codes(pos, pos, SPENoise(3, "cpu"))
    out = codes.project(x, "q", None)
    out.square().sum().backward()
    grads = [t.grad.clone() for t in (spe.freq, spe.gain, x)]
    spe.zero_grad()
    x.grad = None
    omega, lz = spe.codes(pos, pos, SPENoise(3, "cpu")).parts["q"]  # (N, H, D, 2K), (H, D, 2K, R)
    direct = torch.einsum("bnhdj,hdjr->bnhr", x.unsqueeze(-1) * omega, lz) / math.sqrt(8)
    direct.square().sum().backward()
    assert torch.allclose(out, direct, atol=1e-5)
    for got, want in zip(grads, (spe.freq.grad, spe.gain.grad, x.grad), strict=True):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    assert ("q" in codes._tables) == tables  # built once, shared by the layers


@pytest.mark.parametrize("min_batch", [1, 100])
def test_sine_codes_for_positions_per_batch_row_equal_codes_per_row(monkeypatch, min_batch):
    """Positions given as (B, N) (e.g. musical time per song) give each row its own codes."""
    import musicgen.model.positional as positional

    monkeypatch.setattr(positional, "TABLE_MIN_BATCH", min_batch)
    torch.manual_seed(0)
    spe = SineSPE(2, 4, 8, 3)
    pos = torch.tensor([[0, 1, 2, 5, 9], [3, 3, 4, 10, 11]])
    x = torch.randn(2, 5, 2, 4)
    noise = SPENoise(4, "cpu")
    both = spe.codes(pos, pos, noise)
    gate = torch.randn(2, 4)
    for side in ("q", "k"):
        got = both.project(x, side, gate)
        for b in range(2):
            one = spe.codes(pos[b], pos[b], noise).project(x[b : b + 1], side, gate)
            assert torch.allclose(got[b : b + 1], one, atol=1e-6)


def _two_layers(x, scale, omega, lz, extra):
    """Two layers' contractions through one side's codes (the second reads another x and is
    scaled by 1/2), and a third layer whose output is unused: Omega's and lambda Z's gradients
    are summed over the layers that got one."""
    side = sine_ops.SineSide(omega, lz)
    side.contract(x.cos(), scale, extra)  # a layer without gradient leaves nothing pending
    first = side.contract(x, scale, extra)
    return torch.cat([first, 0.5 * side.contract(x.sin(), scale, extra)], 1)


@pytest.mark.parametrize("pairs", [0, 100])
@pytest.mark.parametrize("gate", ["none", "scale", "scale+noise"])
@pytest.mark.parametrize("batch, per_row", [(1, False), (2, False), (2, True)])
def test_blocked_sine_contraction_backward_passes_gradcheck(
    monkeypatch, batch, per_row, gate, pairs
):
    """The per-layer sine contraction's hand-written backward (blocks of 7 positions) and its
    Omega / lambda Z node (their gradients from the layers' pending pairs) against finite
    differences, for Omega shared by the batch and given per row, with and without the gate's
    (H, D) scale and its (H, D, R) noise term folded in."""
    monkeypatch.setattr(sine_ops, "SINE_BLOCK", 7)
    monkeypatch.setattr(sine_ops, "COLLECT_BLOCK", 6)  # blocks across the batch rows too
    monkeypatch.setattr(sine_ops, "PAIR_PATH_MAX", pairs)  # P first, or pair by pair
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 20, 2, 3, dtype=torch.double, generator=g, requires_grad=True)
    scale = torch.rand(2, 3, dtype=torch.double, generator=g, requires_grad=True)
    om_shape = ((batch,) if per_row else ()) + (20, 2, 3, 4)
    omega = torch.randn(om_shape, dtype=torch.double, generator=g, requires_grad=True)
    lz = torch.randn(2, 3, 4, 5, dtype=torch.double, generator=g, requires_grad=True)
    extra = torch.randn(2, 3, 5, dtype=torch.double, generator=g, requires_grad=True)
    args = (x, None if gate == "none" else scale, omega, lz, extra if "noise" in gate else None)
    assert torch.autograd.gradcheck(_two_layers, args)
    xs = x if gate == "none" else x * scale
    direct = torch.einsum("bnhdj,hdjr->bnhr", xs.unsqueeze(-1) * omega, lz)
    if args[4] is not None:
        direct = direct + torch.einsum("bnhd,hdr->bnhr", x, extra)
    assert torch.allclose(sine_ops.SineSide(omega, lz).contract(*args[:2], args[4]), direct)
    side = sine_ops.SineSide(omega, lz)
    side.contract(*args[:2], args[4]).sum().backward()
    assert side.pending == []  # the pairs are dropped once the gradients are formed


def test_cos_sin_backward_from_its_output_passes_gradcheck():
    from musicgen.model.sine_ops import CosSin

    ang = torch.randn(5, 2, 3, 4, dtype=torch.double, requires_grad=True)
    assert torch.equal(CosSin.apply(ang), torch.cat([ang.cos(), ang.sin()], -1))
    assert torch.autograd.gradcheck(CosSin.apply, (ang,))


def _fft_filter(spe: ConvSPE, z: torch.Tensor, n_out: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The FFT correlation convSPE used before the blocked Toeplitz product (the reference)."""
    n_fft = z.shape[0]
    zf = torch.fft.rfft(z, dim=0)  # (n_fft // 2 + 1, HD, R)
    out = []
    for f in (spe.filt_q, spe.filt_k):
        f = f.reshape(spe.h * spe.d, spe.p)
        ff = torch.fft.rfft(f, n=n_fft, dim=1).conj().T.unsqueeze(-1)  # (F, HD, 1)
        out.append(torch.fft.irfft(zf * ff, n=n_fft, dim=0)[:n_out])
    return out[0], out[1]


def _filter_grad(filt, zb, g, n_out: int, group: int) -> torch.Tensor:
    """The filters' gradient of sum_f <out_f, g_f> by `conv_filter.filters_token`."""
    from musicgen.model import conv_filter

    def grads(c0, c1):
        return [gf[:, c0:c1] for gf in g]

    filt = filt.detach().requires_grad_()
    conv_filter.filters_token(filt, n_out, lambda: zb, grads, group).backward()
    return filt.grad


@pytest.mark.parametrize("n_out, p, block, group", [(50, 7, 16, 3), (64, 16, 16, 8), (5, 9, 4, 64)])
def test_conv_blocked_toeplitz_equals_the_fft_correlation_with_filter_gradients(
    monkeypatch, n_out, p, block, group
):
    """Same noise -> the same codes and the same filter gradients as the FFT correlation, for
    outputs that end inside a block, on a block edge, and filters longer than a block."""
    from musicgen.model import conv_filter

    monkeypatch.setattr(conv_filter, "CONV_BLOCK", block)
    monkeypatch.setattr(conv_filter, "CONV_GROUP", group)
    torch.manual_seed(0)
    spe = ConvSPE(2, 3, 5, p)
    with torch.no_grad():
        spe.filt_k.normal_()
    z = torch.randn(n_out + p - 1, 6, 5)
    g = torch.randn(2, n_out, 6, 5)
    nz = conv_filter.noise_rows(n_out, p) // block
    zb = conv_filter.blocks_from_rows(z, block, nz)
    got = conv_filter.correlate(zb, spe._filters(), n_out)
    grad = _filter_grad(spe._filters(), zb, g, n_out, group)  # (2, HD, P)
    want = _fft_filter(spe, z, n_out)
    (want[0] * g[0] + want[1] * g[1]).sum().backward()
    for a, b in zip(got, want, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(grad[0].view(2, 3, p), spe.filt_q.grad, atol=1e-4)
    assert torch.allclose(grad[1].view(2, 3, p), spe.filt_k.grad, atol=1e-4)


@pytest.mark.parametrize("sides", [(0, 1), (1,)])
def test_conv_filters_gradient_equals_central_differences(sides):
    """The token's gradient is the derivative of sum_f <correlate(filt)_f, g_f> (float64 central
    differences), one side's gradient missing included (that table unused). Not gradcheck: the
    token's own gradient is always 0, so its backward ignores it by design."""
    from musicgen.model import conv_filter

    gen = torch.Generator().manual_seed(0)
    z = torch.randn(23, 3, 2, dtype=torch.double, generator=gen)
    filt = torch.randn(2, 3, 6, dtype=torch.double, generator=gen)
    g = torch.randn(2, 18, 3, 2, dtype=torch.double, generator=gen)
    zb = conv_filter.blocks_from_rows(z, 4, 7)  # 5 output blocks + 3 Toeplitz blocks - 1

    def value(filt):
        out = conv_filter.correlate(zb, filt, 18)
        return sum((out[i] * g[i]).sum() for i in sides)

    def grads(c0, c1):
        return [g[i, :, c0:c1] if i in sides else None for i in range(2)]

    leaf = filt.clone().requires_grad_()
    conv_filter.filters_token(leaf, 18, lambda: zb, grads, 2).backward()
    numeric = torch.zeros_like(filt)
    for i in range(filt.numel()):
        e = torch.zeros_like(filt).view(-1)
        e[i] = 1e-6
        e = e.view_as(filt)
        numeric.view(-1)[i] = (value(filt + e) - value(filt - e)) / 2e-6
    assert torch.allclose(leaf.grad, numeric, atol=1e-7)
    assert bool(leaf.grad[0].any()) == (0 in sides)  # the unused side's filter gets none


def _conv_reference_codes(spe: ConvSPE, noise: SPENoise, q_pos, k_pos):
    """Codes with autograd through the FFT correlation (the filters' gradient by autograd)."""
    from musicgen.model import conv_filter
    from musicgen.model.positional import SPECodes

    start = int(min(q_pos.min(), k_pos.min())) // conv_filter.CONV_BLOCK * conv_filter.CONV_BLOCK
    n_out = int(max(q_pos.max(), k_pos.max())) + 1 - start
    zb = spe._noise(noise, start, start + conv_filter.noise_rows(n_out, spe.p))
    z = zb.permute(2, 1, 0, 3).reshape(-1, zb.shape[0], zb.shape[3])  # (L, HD, R)
    qbar, kbar = _fft_filter(spe, z, n_out)
    tables = [
        t[pos - start].view(len(pos), spe.h, spe.d, spe.r)
        for t, pos in ((qbar, q_pos), (kbar, k_pos))
    ]
    return SPECodes(tables[0], tables[1], spe.gate_noise(noise), spe.r)


@pytest.mark.parametrize(
    "q_pos, k_pos, sides",
    [
        (torch.arange(130), torch.arange(130), "qk"),  # training: both tables, every row
        (torch.arange(70, 100), torch.arange(40, 100), "qk"),  # rows of a later span
        (torch.tensor([70, 75, 99]), torch.arange(90, 100), "q"),  # gathered rows, k unused
        (torch.arange(2 * NOISE_BLOCK + 40), torch.arange(2 * NOISE_BLOCK + 40), "qk"),  # redrawn
    ],
)
def test_conv_codes_gradients_equal_autograd_through_the_tables(q_pos, k_pos, sides):
    """Layers projecting q and k through one ConvCodes (gated) get the values and the gradients
    (x, gate, both filters) of autograd through differentiable tables: the filters' node sums
    the layers' pairs one head at a time, scatters rows, and redraws noise it did not keep."""
    torch.manual_seed(0)
    spe = ConvSPE(2, 3, 4, 9)
    with torch.no_grad():
        spe.filt_k.normal_()
    gate = torch.randn(2, 3, requires_grad=True)
    gen = torch.Generator().manual_seed(1)
    xs = {
        s: [torch.randn(2, len(p), 2, 3, generator=gen) for _ in range(3)]
        for s, p in (("q", q_pos), ("k", k_pos))
    }
    params = [spe.filt_q, spe.filt_k, gate]

    def run(codes):
        loss, leaves = 0.0, []
        for side in sides:
            for x in xs[side]:
                x = x.clone().requires_grad_()
                leaves.append(x)
                loss = loss + codes.project(x, side, gate).sin().sum()
        grads = torch.autograd.grad(loss, params + leaves, allow_unused=True)
        return loss.detach(), [torch.zeros(()) if g is None else g for g in grads]

    got = run(spe.codes(q_pos, k_pos, SPENoise(5, "cpu")))
    want = run(_conv_reference_codes(spe, SPENoise(5, "cpu"), q_pos, k_pos))
    assert torch.allclose(got[0], want[0], rtol=1e-5)
    for a, b in zip(got[1], want[1], strict=True):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)


def test_noise_blocks_drawn_together_equal_blocks_drawn_one_by_one():
    """The pool of threads draws each block from its own generator: the same values."""
    keys = [(0, 2, b) for b in range(5)]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the pool is used from 2 threads on
    try:
        together = SPENoise(7, "cpu").gaussians(keys, (3, 4, 5), keep=False)
    finally:
        torch.set_num_threads(threads)
    one = SPENoise(7, "cpu")
    for key, got in zip(keys, together, strict=True):
        assert torch.equal(got, one.gaussian(key, (3, 4, 5)))
    cached = SPENoise(7, "cpu")
    cached.gaussian(keys[2], (3, 4, 5))  # a cached block is returned, not drawn again
    assert torch.equal(cached.gaussians(keys, (3, 4, 5), keep=True)[2], together[2])
    assert all(k in cached._cache for k in keys)
