"""An SPE code table read by every layer, whose gradient is summed over the layers in one product.

A table T (N, H, D, R) of codes (or (B, N, H, D, R), positions per batch row) is contracted by
each layer l with its q or k: out_l[b, n, h] = x_l[b, n, h] @ T[n, h] (a (1 x D) @ (D x R)
product per position and head). Autograd would give each layer's backward its own full-size
gradient of T (the outer products x_l ⊗ g_l, 268 MB at 2048 tokens of the default width) and
then add it into T's gradient: L table-sized writes and L additions. Here each layer's backward
returns only x's gradient and leaves (x_l, g_l) with the table; once every layer has run (the
table's node runs after all of them), T's gradient is sum_l x_l^T g_l as one batched GEMM whose
inner dimension is the layers (and the batch): one table-sized write in all.

The layers reach the table's node through a scalar `token` (its gradient is always zero): the
table's own tensor is read detached, so autograd never builds a per-layer gradient of it.

The products run in the table's dtype: float32, or bf16 when the codes were made for bf16
autocast (`attention.matmul_dtype`); then the output, x's gradient and the pending pairs are bf16
(every product accumulates in float32 and rounds its result once), while the gate's gradients
are summed in float32.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


class SharedTable:
    """A code table and the (x, grad) pairs its layers have left for its gradient.

    The autograd nodes hold the pending list and their saved tensors, never this object (it
    holds the token, whose node would then hold it back: a cycle that keeps the table alive
    after backward)."""

    def __init__(self, table: Tensor, token: Tensor | None = None, pending: list | None = None):
        """`token`, `pending`: another node takes the gradient from `pending` (see
        `head_gradient`); by default the table's own node sums it into the table's gradient."""
        self.value = table.detach()  # (N, H, D, R) or (B, N, H, D, R)
        self.pending: list[tuple[Tensor, Tensor]] = [] if pending is None else pending
        if token is None and table.requires_grad:
            token = _Collect.apply(table, self.pending)
        self.token = token

    def contract(
        self,
        x: Tensor,
        scale: Tensor | None = None,
        extra: Tensor | None = None,
        dtype: torch.dtype | None = None,
    ) -> Tensor:
        """x (B, N, H, D), times `scale` (H, D) if given (the SPE gate's) -> (B, N, H, R) in
        `dtype`: (x s)[b, n, h] @ T[(b,) n, h], plus x[b, n, h] @ extra[h] if given ((H, D, R),
        the gate's noise term: added in place, no (B, N, H, R) temporaries that a layer would
        leave as holes in the heap). The products' operands are `dtype` (None: the table's); a
        table made in another dtype is cast per call (codes make theirs in the dtype their
        layers ask for)."""
        table = self.value if dtype is None else self.value.to(dtype)
        if self.token is None or not torch.is_grad_enabled():
            return _forward(x, scale, extra, table)
        return _Contract.apply(x, scale, extra, self.token, table, self.pending)


def _forward(x: Tensor, scale: Tensor | None, extra: Tensor | None, table: Tensor) -> Tensor:
    """(x s) @ T + x @ extra (`SharedTable.contract`) -> (B, N, H, R), in the table's dtype."""
    b, n, h, _ = x.shape
    dt = table.dtype
    rows = table_rows(scaled(x, scale, dt), table)  # (M, B', D)
    out = _rows_out(torch.bmm(rows, _matrices(table)), table, b, n, h)
    if extra is None:
        return out
    return out.add_(torch.einsum("bnhd,hdr->bnhr", x.to(dt), extra.to(dt)))


def scaled(x: Tensor, scale: Tensor | None, dtype: torch.dtype) -> Tensor:
    """x s (x (B, N, H, D), s (H, D) or None) in `dtype`, one pass. A bf16 x times a float32
    scale into bf16 multiplies in bf16 (the scale rounded as the product's operand, as
    autocast rounds weights: a mixed-dtype product runs 2-3x slower). For autograd Functions'
    forward and backward (not differentiable itself)."""
    if scale is None:
        return x.to(dtype)
    if x.dtype == dtype:
        return x * scale.to(dtype)
    return torch.mul(x, scale, out=torch.empty(x.shape, dtype=dtype, device=x.device))


def wide_sum(t: Tensor, dims: tuple[int, ...]) -> Tensor:
    """t summed over `dims`, in float32 when t is narrower (a bf16 product's sum is not rounded
    to bf16), else in t's own dtype."""
    return t.sum(dims) if t.dtype.itemsize >= 4 else t.sum(dims, dtype=torch.float32)


def head_gradient(
    pending: list[tuple[Tensor, Tensor]], n_heads: int, h: int, rows: slice = slice(None)
) -> Tensor:
    """Head h's rows of an (N, H, D, R) table's gradient, sum_l x_l^T g_l over the layers'
    pending pairs: (N, D, R) (the positions `rows` of N only), one GEMM per position, without
    the full table's gradient; in the pairs' dtype (bf16 pairs: float32 accumulation, one
    rounding)."""
    n = pending[0][0].shape[0] // n_heads
    xs = torch.cat([x.view(n, n_heads, -1, x.shape[-1])[rows, h] for x, _ in pending], 1)
    gs = torch.cat([g.view(n, n_heads, -1, g.shape[-1])[rows, h] for _, g in pending], 1)
    return torch.bmm(xs.transpose(1, 2), gs)  # (N, D, L B') @ (N, L B', R)


def _matrices(t: Tensor) -> Tensor:
    """The table as (M, D, R) matrices: M = N H, or B N H for positions per batch row."""
    return t.reshape(-1, t.shape[-2], t.shape[-1])


def table_rows(x: Tensor, t: Tensor) -> Tensor:
    """x (B, N, H, D) as the (M, B', D) rows that multiply each table matrix (B' = B for a table
    shared by the batch, 1 for a table per batch row; a view at batch 1)."""
    b, n, h, d = x.shape
    if t.dim() == 5:
        return x.reshape(b * n * h, 1, d)
    return x.permute(1, 2, 0, 3).reshape(n * h, b, d)


def _rows_out(out: Tensor, t: Tensor, b: int, n: int, h: int) -> Tensor:
    """(M, B', R) -> (B, N, H, R), the inverse layout of `table_rows` for table t."""
    if t.dim() == 5:
        return out.view(b, n, h, -1)
    return out.view(n, h, b, -1).permute(2, 0, 1, 3)


class _Contract(torch.autograd.Function):
    """One layer's contraction: x's gradient now, the table's left in `pending`. With a scale,
    x s is rebuilt in backward rather than kept from forward: x (the layer's q or k) is kept by
    autograd anyway, so the forward's peak holds one tensor per layer fewer."""

    @staticmethod
    def forward(ctx, x, scale, extra, token: Tensor, table: Tensor, pending: list) -> Tensor:
        ctx.save_for_backward(x, scale, extra, table)
        ctx.pending = pending
        return _forward(x, scale, extra, table)

    @staticmethod
    @once_differentiable  # the table's part goes by `pending`: no graph of it to differentiate
    def backward(ctx, g: Tensor):
        x, scale, extra, table = ctx.saved_tensors
        b, n, h, _ = x.shape
        dt = table.dtype  # g (B, N, H, R) comes in it too (the output's dtype)
        g_rows = table_rows(g.to(dt), table)  # (M, B', R)
        ctx.pending.append((table_rows(scaled(x, scale, dt), table), g_rows))
        grad_x = grad_scale = grad_extra = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            gx = torch.bmm(g_rows, _matrices(table).transpose(1, 2))  # (M, B', D)
            gxs = _rows_out(gx, table, b, n, h)  # the gradient of x s, (B, N, H, D)
            if ctx.needs_input_grad[1]:
                grad_scale = wide_sum(gxs * x, (0, 1))  # (H, D), the scale's dtype
            if ctx.needs_input_grad[0]:
                grad_x = scaled(gxs, scale, x.dtype)
                if extra is not None:
                    grad_x = grad_x.add_(_noise_grad_x(g, extra, dt))
        if ctx.needs_input_grad[2]:
            grad_extra = _noise_grad(x, g, dt).to(extra.dtype)
        return grad_x, grad_scale, grad_extra, g.new_zeros(()), None, None


class _Collect(torch.autograd.Function):
    """The table's node: its gradient is sum over layers of x_l^T g_l, one batched GEMM."""

    @staticmethod
    def forward(ctx, table: Tensor, pending: list) -> Tensor:
        ctx.pending, ctx.shape, ctx.dtype = pending, table.shape, table.dtype
        return table.new_zeros(())

    @staticmethod
    @once_differentiable
    def backward(ctx, _grad_token: Tensor):
        pending = ctx.pending
        if not pending:
            return None, None
        xs = torch.cat([x for x, _ in pending], 1)  # (M, L B', D)
        gs = torch.cat([g for _, g in pending], 1)  # (M, L B', R)
        pending.clear()
        return torch.bmm(xs.transpose(1, 2), gs).view(ctx.shape).to(ctx.dtype), None


def _noise_grad_x(g: Tensor, extra: Tensor, dtype: torch.dtype) -> Tensor:
    """x's gradient through the gate's noise term: g (B, N, H, R) @ extra^T -> (B, N, H, D),
    operands in `dtype`."""
    return torch.einsum("bnhr,hdr->bnhd", g.to(dtype), extra.to(dtype))


def _noise_grad(x: Tensor, g: Tensor, dtype: torch.dtype) -> Tensor:
    """The noise term's (H, D, R) gradient, sum over positions of x (x) g, operands in `dtype`
    (float32 accumulation)."""
    return torch.einsum("bnhd,bnhr->hdr", x.to(dtype), g.to(dtype))
