"""Feature maps phi for linear attention: FAVOR+ (Performer) and ReLU (linear transformer).

Both expose the same calls so the attention code does not care which one it has:
  query(x) -> phi(x)                        (any per-position scale cancels in num / den)
  key_causal(x) -> (phi(x_j) * exp(-s_j), s)   (parallel form; s = None when nothing is stabilised)
  key(x, shift) -> (phi(x) * exp(-shift'), shift')   (recurrent form: one shift per (batch, head))
The key stabiliser s_j is a running max over positions <= j (and features) of the FAVOR+ exponent:
it depends on no later key, so the parallel form weighs key j for query n by exp(s_j - s_n) <= 1,
and the recurrent form rescales its carried sums (S, z) by exp(old - new) when the max grows (online
max, as in streaming softmax). Both compute the same attention for any spread of key exponents.
`query` and `key_causal` take the dtype their output feeds the attention's products in (bf16
under bf16 autocast): the exponents, the stabiliser and exp stay float32, the result is rounded
once as it is written.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


def orthogonal_gaussian(n_rows: int, dim: int, generator: torch.Generator | None = None) -> Tensor:
    """Rows in blocks of `dim` exactly orthogonal, each scaled to a chi(dim) norm (FAVOR+)."""
    blocks = []
    for _ in range(math.ceil(n_rows / dim)):
        g = torch.randn(dim, dim, generator=generator)
        q, _ = torch.linalg.qr(g)
        blocks.append(q.T)
    w = torch.cat(blocks)[:n_rows]  # (m, dim), unit rows
    norms = torch.randn(n_rows, dim, generator=generator).norm(dim=1, keepdim=True)
    return w * norms


class FavorFeatures(nn.Module):
    """Positive orthogonal random features: phi(x) = exp(W x - |x|^2 / 2) / sqrt(m).

    Inputs are pre-scaled by scale_dim^-1/4 so phi(q).phi(k) estimates exp(q.k / sqrt(scale_dim)).
    The projection W is a buffer: saved in state_dict, moved with .to(), never trained.
    """

    # Only guards 0 / 0: the key shift makes den's scale arbitrary, so a larger eps would make the
    # parallel (global max) and recurrent (running max) forms differ.
    eps = 1e-20

    def __init__(self, in_dim: int, n_features: int, scale_dim: int) -> None:
        super().__init__()
        self.in_dim, self.n_features = in_dim, n_features
        self.scale = float(scale_dim) ** -0.25
        self.register_buffer("proj", orthogonal_gaussian(n_features, in_dim))  # (m, in_dim)

    @property
    def out_dim(self) -> int:
        return self.n_features

    @torch.no_grad()
    def redraw(self, generator: torch.Generator | None = None) -> None:
        self.proj.copy_(orthogonal_gaussian(self.n_features, self.in_dim, generator).to(self.proj))

    def _wx(self, x: Tensor) -> Tensor:
        """x (..., in) -> W x (..., m) of the pre-scaled x."""
        return _float(x) @ (self.proj.float() * self.scale).T

    def _parts(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """x (..., in) -> (W x (..., m), |x|^2 / 2 (..., 1)) of the pre-scaled x."""
        x = _float(x)
        return self._wx(x), (0.5 * self.scale**2) * (x * x).sum(-1, keepdim=True)

    def _exponent(self, x: Tensor) -> Tensor:
        wx, half_sq = self._parts(x)
        return wx - half_sq  # (..., m)

    def _exp(self, wx: Tensor, bias: Tensor, dtype: torch.dtype | None = None) -> Tensor:
        """exp(wx - bias) / sqrt(m) in two passes, in place on the fresh product wx; written in
        `dtype` if given (`_ExpTo`: no float32 copy kept)."""
        wx = wx.sub_(bias + 0.5 * math.log(self.n_features))
        return wx.exp_() if dtype in (None, wx.dtype) else _ExpTo.apply(wx, dtype)

    def query(self, x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
        """x (B, H, N, in) -> (B, H, N, m), float32 or `dtype`; stabilised per position (cancels
        in the ratio), so the |x|^2 term, constant over features, drops out as well."""
        wx = self._wx(x)
        return self._exp(wx, wx.detach().amax(-1, keepdim=True), dtype)

    def key_causal(self, x: Tensor, dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
        """x (B, H, N, in) -> (phi (B, H, N, m), float32 or `dtype`, s (B, H, N) float32);
        s_j = max over positions <= j, m."""
        wx, half_sq = self._parts(x)
        top = wx.detach().amax(-1, keepdim=True) - half_sq.detach()  # (B, H, N, 1)
        s = top[..., 0].cummax(-1).values  # (B, H, N), non-decreasing
        return self._exp(wx, half_sq + s[..., None], dtype), s

    def key(self, x: Tensor, shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B, H, N, in) -> (phi (B, H, N, m), shift (B, H)); shift = max(old, max over N, m).

        With N > 1 and no old shift, a later key can move the shift of earlier ones (fine for a
        whole-sequence reference, not for causal training: use `key_causal`)."""
        u = self._exponent(x)
        new = u.detach().amax(dim=(-2, -1))  # (B, H)
        if shift is not None:
            new = torch.maximum(shift, new)
        phi = torch.exp(u - new[..., None, None]) / math.sqrt(self.n_features)
        return phi, new


class ReluFeatures(nn.Module):
    """phi(x) = relu(x): the linear transformer's map; no randomness, no stabiliser needed."""

    eps = 1e-6

    def __init__(self, in_dim: int, n_features: int, scale_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim

    @property
    def out_dim(self) -> int:
        return self.in_dim

    def redraw(self, generator: torch.Generator | None = None) -> None:
        """Nothing random to redraw."""

    def query(self, x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
        return torch.relu(x.to(torch.float32 if dtype is None else dtype))

    def key_causal(self, x: Tensor, dtype: torch.dtype | None = None) -> tuple[Tensor, None]:
        return self.query(x, dtype), None

    def key(self, x: Tensor, shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if shift is None:
            shift = x.new_zeros(x.shape[0], x.shape[1], dtype=torch.float32)
        return torch.relu(x.float()), shift


def _float(x: Tensor) -> Tensor:
    """x in float32: a narrower x (bf16 q, k) is cast into a contiguous tensor, which the
    exponent's product then reads without another copy; a float32 x as it is."""
    if x.dtype == torch.float32:
        return x
    return x.to(torch.float32, memory_format=torch.contiguous_format)


class _ExpTo(torch.autograd.Function):
    """exp(u) written in a narrower dtype in one pass (u and exp in float32, one rounding); its
    backward reads that output, as exp's does, so no float32 copy is kept."""

    @staticmethod
    def forward(ctx, u: Tensor, dtype: torch.dtype) -> Tensor:
        out = torch.exp(u, out=torch.empty_like(u, dtype=dtype))
        ctx.save_for_backward(out)
        ctx.u_dtype = u.dtype
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        (out,) = ctx.saved_tensors
        return torch.mul(g, out, out=torch.empty_like(out, dtype=ctx.u_dtype)), None


FEATURE_MAPS: dict[str, type[nn.Module]] = {"favor": FavorFeatures, "relu": ReluFeatures}
