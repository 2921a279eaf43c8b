"""Positional encodings: absolute ones added to the input, and Stochastic Positional Encoding.

SPE (Liutkus et al. 2021) draws per head and feature d random codes Qbar_d[m], Kbar_d[n] in R^R with
E[Qbar_d[m] . Kbar_d[n]] / R = P_d(m - n), and replaces q, k (head_dim D) by
    q^_m = sum_d q_md Qbar'_d[m] / sqrt(R),   k^_n = sum_d k_nd Kbar'_d[n] / sqrt(R)     (size R)
where Qbar' = sqrt(1 - delta_d) Qbar + sqrt(delta_d) eps_d with one eps_d in R^R (gating, optional).
Codes are functions of absolute position indices, so queries and keys may sit at any positions
(q_pos, k_pos), also far past the training length. All randomness comes from an `SPENoise` (a seed):
the same seed gives the same codes in the parallel and the step-by-step forms.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musicgen.model import conv_filter
from musicgen.model.shared_table import SharedTable, head_gradient
from musicgen.model.sine_ops import CosSin, SineSide
from musicgen.model.spe_noise import SPENoise

NOISE_BLOCK = 256  # convSPE white noise is drawn lazily in blocks of this many positions


class SinusoidalPE(nn.Module):
    """The Transformer's fixed sin/cos table, computed on the fly for any position."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        inv = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
        self.register_buffer("inv_freq", inv, persistent=False)
        self.d_model = d_model

    def forward(self, pos: Tensor) -> Tensor:
        """pos (N,) -> (N, d_model)."""
        ang = pos.double()[:, None] * self.inv_freq.double()[None]
        pe = torch.stack([ang.sin(), ang.cos()], -1).reshape(len(pos), -1)
        return pe[:, : self.d_model].float()


class LearnedPE(nn.Module):
    """A learned table of max_len positions (cannot go past max_len)."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, pos: Tensor) -> Tensor:
        from musicgen.errors import MusicgenError

        if int(pos.max()) >= self.max_len:
            raise MusicgenError(
                f"model.max_len: position {int(pos.max())} is past the learned table "
                f"({self.max_len} positions); use a relative encoding or a larger max_len"
            )
        return self.table(pos)


class SPECodes:
    """Codes for one set of query and key positions; `project` contracts them with q or k.

    The codes are tables Qbar, Kbar of shape (N, H, D, R), or (B, N, H, D, R) for positions given
    per batch row, built once (lazily, the first time a side is projected) and shared by every
    layer that gets this object: per layer, one batched (B x D) @ (D x R) matmul per (position,
    head) that reads the table in place; the table's gradient is summed over the layers once
    (`shared_table.SharedTable`).
    """

    def __init__(self, q_part, k_part, eps: Tensor | None, r: int) -> None:
        self.parts = {"q": q_part, "k": k_part}
        self.eps, self.r = eps, r  # eps (H, D, R) gate noise
        self._tables: dict[str, Tensor] = {}
        self._shared: dict[str, SharedTable] = {}

    def _build(self, part) -> Tensor:
        """The (..., N, H, D, R) table of one side from its part (the part itself by default)."""
        return part

    def table(self, side: str) -> Tensor:
        if side not in self._tables:
            self._tables[side] = self._build(self.parts[side])
        return self._tables[side]

    def _contract(
        self, x: Tensor, side: str, scale: Tensor, extra: Tensor | None, dtype: torch.dtype | None
    ) -> Tensor:
        """x (B, N, H, D) -> (x scale) @ table + x @ extra (if given): (B, N, H, R)."""
        if side not in self._shared:  # its gradient is summed over the layers in one GEMM
            self._shared[side] = SharedTable(self.table(side))
        return self._shared[side].contract(x, scale, extra, dtype)

    def project(
        self, x: Tensor, side: str, gate: Tensor | None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """x (B, N, H, D) float32 -> (B, N, H, R) in `dtype`, the contraction's operand dtype
        (bf16 under bf16 autocast: `attention.matmul_dtype`; the gate and its gradient stay
        float32; None: the codes' own); `gate` (H, D) logits of delta or None. The scales go on
        the small factors (H, D) and (H, D, R), not on x: no (B, N, H, .) products beyond the
        contraction's own (each layer's would leave holes in the heap)."""
        inv = 1 / math.sqrt(self.r)
        if gate is None:
            wide = torch.promote_types(x.dtype, torch.float32)  # a bf16 x: a float32 scale
            return self._contract(x, side, x.new_full(x.shape[2:], inv, dtype=wide), None, dtype)
        delta = torch.sigmoid(gate.float())
        eps = (delta.sqrt() * inv).unsqueeze(-1) * self.eps  # (H, D, R)
        return self._contract(x, side, (1 - delta).sqrt() * inv, eps, dtype)


class RowCodes(SPECodes):
    """The codes of one position, sliced from a block of positions made at once by the
    generation step: `qk` (2, 1, H, D, R) holds its q and k tables stacked (a view), which the
    fused step (`fused.LinearStep`) contracts with q and k in one product."""

    def __init__(self, qk: Tensor, eps: Tensor | None, r: int) -> None:
        super().__init__(qk[0], qk[1], eps, r)
        self.qk = qk


def project_pair(codes, qk: Tensor, gate: Tensor | None) -> Tensor:
    """`project` of one position's q and k for any codes object: qk (2, H, B, D) -> (2, H,
    B, R) (the fused step folds the gate into one product instead: `fused.LinearStep`)."""
    x = qk.permute(2, 0, 1, 3).unsqueeze(2)  # (B, 2, 1, H, D)
    q, k = codes.project(x[:, 0], "q", gate), codes.project(x[:, 1], "k", gate)
    return torch.stack([q[:, 0], k[:, 0]]).transpose(1, 2)


TABLE_MIN_BATCH = 3  # sineSPE: shared tables from this batch size on, per-layer contraction below
TABLE_MAX_STEP = 4  # sineSPE: shared tables also for inputs of at most this many positions


class SineCodes(SPECodes):
    """Tables at batch >= TABLE_MIN_BATCH; below, per layer `(q ⊙ Omega)` (B, N, H, D, 2K) then
    lambda Z: 2K / B times the table's bytes per layer, which wins when the table read in every
    layer (forward and for q's gradient) costs more than the 2K-fold FLOPs (at batch 1 the
    tables also take about 1.5x APE's memory, see docs/model.md)."""

    def __init__(
        self, q_part, k_part, eps: Tensor | None, r: int, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__(q_part, k_part, eps, r)
        self._sides: dict[str, SineSide] = {}
        self.dtype = dtype  # the tables' (bf16 for bf16 autocast: half the bytes per layer)

    def _build(self, part) -> Tensor:
        omega, lz = part  # omega (..., N, H, D, 2K), lz (H, D, 2K, R)
        with torch.no_grad():  # its gradient goes to Omega and lambda Z by the side's node
            table = torch.einsum("...hdj,hdjr->...hdr", omega, lz)
            if table.dtype == self.dtype:  # (`to` would return it as it is, not contiguous)
                return table.contiguous()
            return table.to(self.dtype, memory_format=torch.contiguous_format)

    def _contract(
        self, x: Tensor, side: str, scale: Tensor, extra: Tensor | None, dtype: torch.dtype | None
    ) -> Tensor:
        """Both paths leave the layers' (x s, g) pairs with the side's `SineSide`, whose node
        forms Omega's and lambda Z's gradients once: no table-sized gradient on either."""
        if side not in self._sides:
            self._sides[side] = SineSide(*self.parts[side])
        codes = self._sides[side]
        # a few positions (a generation step): the table is tiny, built once for all layers
        small = x.shape[1] <= TABLE_MAX_STEP
        if small or x.shape[0] >= TABLE_MIN_BATCH or side in self._tables:
            if side not in self._shared:
                self._shared[side] = SharedTable(self.table(side), codes.token, codes.pending)
            return self._shared[side].contract(x, scale, extra, dtype)
        return codes.contract(x, scale, extra, dtype)  # (B, N, H, R)


class ConvCodes(SPECodes):
    """Qbar, Kbar (N, H, D, R), made by the blocked Toeplitz product without a graph
    (`conv_filter.correlate`); `train_filters` gives both tables one gradient node."""

    def train_filters(self, filt: Tensor, n_out: int, draw, rows: tuple[Tensor, Tensor]) -> None:
        """The layers' pending pairs of both tables become the filters' (F, C, P) gradient one
        head at a time (`conv_filter.filters_token`): no table-sized gradient, and the noise
        `draw()` is drawn again in backward. rows: each table's rows among the n_out codes.
        Its products take the tables' dtype (bf16 codes: bf16 operands, float32 gradient)."""
        h, d = self.parts["q"].shape[1:3]
        pending: tuple[list, list] = ([], [])
        grads = functools.partial(_table_grads, pending, rows, n_out, h)
        token = conv_filter.filters_token(filt, n_out, draw, grads, d, self.parts["q"].dtype)
        self._shared = {
            s: SharedTable(self.parts[s], token, p) for s, p in zip("qk", pending, strict=True)
        }


def _table_grads(pending, rows, n_out: int, n_heads: int, c0: int, c1: int) -> list:
    """Both tables' gradients for the channels c0..c1 of one head: (n_out, D, R) each (None for a
    table no layer read); the pairs are dropped after the last head (they would otherwise live
    as long as the graph)."""
    out = []
    for side, idx in zip(pending, rows, strict=True):
        if not side:
            out.append(None)
            continue
        g = head_gradient(side, n_heads, c0 // (c1 - c0))  # (len(idx), D, R)
        if len(idx) != n_out:  # rows of the codes no table holds get none
            g = g.new_zeros(n_out, *g.shape[1:]).index_copy_(0, idx, g)
        out.append(g)
    if c1 == n_heads * (c1 - c0):
        for side in pending:
            side.clear()
    return out


class _SPE(nn.Module):
    """Shared by both SPE kinds: shapes, the gate noise, the noise-key tag of this module."""

    def __init__(self, n_heads: int, head_dim: int, num_realizations: int, tag: int) -> None:
        super().__init__()
        self.h, self.d, self.r, self.tag = n_heads, head_dim, num_realizations, tag

    def gate_noise(self, noise: SPENoise) -> Tensor:
        return noise.gaussian((self.tag, 1), (self.h, self.d, self.r))  # (H, D, R)


class SineSPE(_SPE):
    """P_d(tau) = sum_k lambda_dk^2 cos(2 pi f_dk tau + theta_dk): a learned periodic kernel."""

    def __init__(self, n_heads, head_dim, num_realizations, num_sines, tag: int = 0) -> None:
        super().__init__(n_heads, head_dim, num_realizations, tag)
        self.k = num_sines
        # frequencies log-spaced over periods 4 .. 4096 positions, plus a little jitter per feature
        f0 = torch.logspace(math.log10(1 / 4096), math.log10(1 / 4), num_sines)
        logit = torch.log(2 * f0) - torch.log1p(-2 * f0)  # f = sigmoid(p) / 2 in (0, 1/2)
        self.freq = nn.Parameter(
            logit.expand(n_heads, head_dim, -1) + 0.1 * torch.randn(n_heads, head_dim, num_sines)
        )
        self.phase = nn.Parameter(torch.zeros(n_heads, head_dim, num_sines))
        g0 = math.log(math.expm1(1 / math.sqrt(num_sines)))  # softplus(g0)^2 * K = 1 -> P(0) = 1
        self.gain = nn.Parameter(torch.full((n_heads, head_dim, num_sines), g0))

    def frequencies(self) -> Tensor:
        return torch.sigmoid(self.freq.float()) / 2

    def kernel(self, lags: Tensor) -> Tensor:
        """The designed P_d at integer lags: (L,) -> (L, H, D)."""
        lam2 = F.softplus(self.gain.float()) ** 2
        ang = 2 * math.pi * self.frequencies() * lags.float()[:, None, None, None] + self.phase
        return (lam2 * torch.cos(ang)).sum(-1)

    def _angles(self, pos: Tensor) -> Tensor:
        """pos (N,) or (B, N) -> 2 pi f m (..., N, H, D, K); f * m reduced mod 1 in float64
        (exact far past training)."""
        fm = self.frequencies().double() * pos.double()[..., None, None, None]
        return 2 * math.pi * (fm - fm.detach().floor()).float()

    def _omega(self, ang: Tensor, with_phase: bool) -> Tensor:
        """Angles (..., N, H, D, K) -> [cos, sin] (..., N, H, D, 2K), with the phase for q."""
        if with_phase:
            ang = ang + self.phase.float()
        return CosSin.apply(ang)

    def codes(
        self, q_pos: Tensor, k_pos: Tensor, noise: SPENoise, dtype: torch.dtype = torch.float32
    ) -> SineCodes:
        """Omega and lambda Z (float32) of both sides; `dtype`: the shared tables' (`SineCodes`:
        built from them, without a graph, the first time a layer asks)."""
        z = noise.gaussian((self.tag, 0), (self.h, self.d, 2 * self.k, self.r))
        lam = F.softplus(self.gain.float()).repeat(1, 1, 2)  # lambda~ (H, D, 2K)
        lz = lam.unsqueeze(-1) * z  # (H, D, 2K, R)
        k_ang = self._angles(k_pos)
        q_ang = k_ang if q_pos is k_pos else self._angles(q_pos)  # forward: the same positions
        q_part = (self._omega(q_ang, True), lz)
        k_part = (self._omega(k_ang, False), lz)
        return SineCodes(q_part, k_part, self.gate_noise(noise), self.r, dtype)


class ConvSPE(_SPE):
    """Qbar_d = Z_d * PhiQ_d, Kbar_d = Z_d * PhiK_d (length-P filters over white noise positions).

    Qbar_d[m] = sum_p PhiQ_d[p] Ztilde_d[m + p], Ztilde index i holding the noise sample of "time"
    i - P + 1, so the code at m uses the window of the last P samples; P_d(m - n) is the filters'
    cross-correlation, zero for |m - n| >= P.
    """

    def __init__(self, n_heads, head_dim, num_realizations, kernel_size, tag: int = 0) -> None:
        super().__init__(n_heads, head_dim, num_realizations, tag)
        self.p = kernel_size
        phi = torch.randn(n_heads, head_dim, kernel_size)
        phi = phi / phi.norm(dim=-1, keepdim=True)  # P_d(0) = 1 at initialisation
        self.filt_q = nn.Parameter(phi.clone())
        self.filt_k = nn.Parameter(phi.clone())

    def kernel(self, lags: Tensor) -> Tensor:
        """The designed P_d(tau) = sum_p PhiQ[p] PhiK[p + tau] (zero for |tau| >= P): (L, H, D)."""
        fq, fk = self.filt_q.float(), self.filt_k.float()
        out = []
        for t in lags.tolist():
            if abs(t) >= self.p:
                out.append(fq.new_zeros(self.h, self.d))
            elif t >= 0:
                out.append((fq[..., : self.p - t] * fk[..., t:]).sum(-1))
            else:
                out.append((fq[..., -t:] * fk[..., : self.p + t]).sum(-1))
        return torch.stack(out)

    def _noise(self, noise: SPENoise, lo: int, hi: int) -> Tensor:
        """Ztilde[lo : lo + nz bs] (nz bs >= hi - lo, lo a multiple of bs = CONV_BLOCK) in the
        filter's block layout (HD, bs, nz, R), assembled from seeded blocks of NOISE_BLOCK
        positions, each drawn in that layout: noise block b holds position b NOISE_BLOCK + k bs
        + a at [:, a, k]."""
        bs = conv_filter.CONV_BLOCK
        per = NOISE_BLOCK // bs
        k0, k1 = lo // bs, -(-hi // bs)  # blocks of bs positions [k0, k1)
        b0, b1 = k0 // per, (k1 - 1) // per
        noise.drop_below((self.tag, 2), b0)
        keep = hi - lo <= 2 * NOISE_BLOCK  # cache for generation; long spans are used once
        keys = [(self.tag, 2, b) for b in range(b0, b1 + 1)]
        blocks = noise.gaussians(keys, (self.h * self.d, bs, per, self.r), keep)
        pieces = [
            blk[:, :, max(k0 - b * per, 0) : min(k1 - b * per, per)]
            for b, blk in zip(range(b0, b1 + 1), blocks, strict=True)
        ]
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces, 2)

    def _filters(self) -> Tensor:
        return torch.stack([self.filt_q.float(), self.filt_k.float()]).flatten(1, 2)  # (2, HD, P)

    def _window(self, noise: SPENoise, lo: int, hi: int) -> tuple[Tensor, Tensor]:
        """Qbar, Kbar (hi - lo, HD, R) for a few positions: one window of P samples each."""
        bs, n = conv_filter.CONV_BLOCK, hi - lo
        zb = self._noise(noise, lo - lo % bs, hi + self.p - 1)
        j = torch.arange(lo % bs, lo % bs + n + self.p - 1, device=zb.device)
        z = zb[:, j % bs, j // bs].transpose(0, 1)  # (n + P - 1, HD, R)
        win = z.unfold(0, self.p, 1)  # (n, HD, R, P)
        fq, fk = self._filters()
        return torch.einsum("ncrp,cp->ncr", win, fq), torch.einsum("ncrp,cp->ncr", win, fk)

    def _table(self, bar: Tensor, rows: Tensor) -> Tensor:
        """Codes (n, HD, R) -> the table (len(rows), H, D, R) of those (increasing) rows: a view
        for a range of rows."""
        a, b = int(rows[0]), int(rows[-1]) + 1
        bar = bar[a:b] if b - a == len(rows) else bar.index_select(0, rows)
        return bar.view(len(rows), self.h, self.d, self.r)

    def codes(
        self, q_pos: Tensor, k_pos: Tensor, noise: SPENoise, dtype: torch.dtype = torch.float32
    ) -> ConvCodes:
        """Positions must be increasing (each set); codes are made for the span of both sets:
        a window of P samples per position for a generation step, else the blocked Toeplitz
        product from the block of bs positions that holds the first. `dtype`: the tables' (bf16
        for bf16 autocast: the Toeplitz GEMMs then run in bf16, the filters stay float32)."""
        lo = int(min(q_pos.min(), k_pos.min()))
        hi = int(max(q_pos.max(), k_pos.max())) + 1
        eps = self.gate_noise(noise)
        if hi - lo <= 4:  # a generation step
            qbar, kbar = (t.to(dtype) for t in self._window(noise, lo, hi))
            return ConvCodes(
                self._table(qbar, q_pos - lo), self._table(kbar, k_pos - lo), eps, self.r
            )
        start = lo - lo % conv_filter.CONV_BLOCK
        n_out, rows = hi - start, (q_pos - start, k_pos - start)
        end = start + conv_filter.noise_rows(n_out, self.p)
        draw = functools.partial(self._noise, noise, start, end)  # (C, bs, nz, R)
        filt = self._filters()
        qbar, kbar = conv_filter.correlate(draw(), filt, n_out, dtype)
        codes = ConvCodes(self._table(qbar, rows[0]), self._table(kbar, rows[1]), eps, self.r)
        if filt.requires_grad:
            codes.train_filters(filt, n_out, draw, rows)
        return codes
