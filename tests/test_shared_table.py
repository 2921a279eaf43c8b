"""A code table read by several layers: values and gradients equal autograd's per-layer einsum."""

from __future__ import annotations

import pytest
import torch

from musicgen.model.shared_table import SharedTable


def _layers(x0: torch.Tensor, table: torch.Tensor, contract, n_layers: int) -> torch.Tensor:
    """A chain of layers that each contract with the table (x -> tanh(contraction) @ W)."""
    gen = torch.Generator().manual_seed(5)
    x = x0
    for _ in range(n_layers):
        out = contract(x, table)  # (B, N, H, R)
        w = torch.randn(out.shape[-1], x.shape[-1], dtype=x.dtype, generator=gen)
        x = torch.tanh(out) @ w + x
    return x


def _einsum(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    if table.dim() == 5:
        return torch.einsum("bnhd,bnhdr->bnhr", x, table)
    return torch.einsum("bnhd,nhdr->bnhr", x, table)


@pytest.mark.parametrize("batch, per_row", [(1, False), (3, False), (2, True)])
def test_shared_table_equals_per_layer_einsum_with_gradients(batch, per_row):
    """Three layers reading one table: the same outputs, the same gradient of x and of the
    table (summed over the layers once) as autograd through an einsum per layer."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 7, 2, 3, generator=gen, requires_grad=True)
    shape = ((batch,) if per_row else ()) + (7, 2, 3, 4)
    table = torch.randn(shape, generator=gen, requires_grad=True)
    shared = SharedTable(table * 1.0)  # a non-leaf, as the codes are
    got = _layers(x, None, lambda x, _: shared.contract(x), 3)
    got.square().sum().backward()
    got_gx, got_gt = x.grad.clone(), table.grad.clone()
    x.grad = table.grad = None
    want = _layers(x, table, _einsum, 3)
    want.square().sum().backward()
    assert torch.allclose(got, want, atol=1e-5)
    assert torch.allclose(got_gx, x.grad, atol=1e-4)
    assert torch.allclose(got_gt, table.grad, atol=1e-4)
    assert not shared.pending  # consumed by the table's node


@pytest.mark.parametrize("per_row", [False, True])
def test_a_scale_and_a_noise_term_are_folded_in_with_their_gradients(per_row):
    """contract(x, s, e) == contract(x * s) + x @ e, also in the gradients of x, the (H, D)
    scale and the (H, D, R) term (one each per layer, like the SPE gate's) and the table."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 6, 2, 3, generator=gen, requires_grad=True)
    scales = [torch.rand(2, 3, generator=gen, requires_grad=True) for _ in range(2)]
    extras = [torch.randn(2, 3, 4, generator=gen, requires_grad=True) for _ in range(2)]
    table = torch.randn(((2,) if per_row else ()) + (6, 2, 3, 4), generator=gen, requires_grad=True)
    leaves = (x, table, *scales, *extras)

    def run(fold: bool) -> list[torch.Tensor]:
        shared, it = SharedTable(table * 1.0), iter(zip(scales, extras, strict=True))

        def contract(x, _):
            s, e = next(it)
            if fold:
                return shared.contract(x, s, e)
            return _einsum(x * s, table) + torch.einsum("bnhd,hdr->bnhr", x, e)

        _layers(x, None, contract, 2).square().sum().backward()
        grads = [t.grad.clone() for t in leaves]
        for t in leaves:
            t.grad = None
        return grads

    for got, want in zip(run(True), run(False), strict=True):
        assert torch.allclose(got, want, atol=1e-4)


def test_head_gradient_is_the_table_gradient_of_one_head():
    """With another node's token (a leaf here), the layers' pairs stay pending, and
    head_gradient over them == head h's rows of autograd's table gradient."""
    from musicgen.model.shared_table import head_gradient

    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 6, 3, 2, generator=gen, requires_grad=True)
    table = torch.randn(6, 3, 2, 4, generator=gen, requires_grad=True)
    _layers(x, table, _einsum, 3).square().sum().backward()
    token, pending = torch.zeros((), requires_grad=True), []
    shared = SharedTable(table.detach(), token, pending)
    _layers(x, None, lambda x, _: shared.contract(x), 3).square().sum().backward()
    assert len(pending) == 3 and token.grad == 0
    for h in range(3):
        assert torch.allclose(head_gradient(pending, 3, h), table.grad[:, h], atol=1e-5)


def test_shared_table_backward_passes_gradcheck():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 2, 3, dtype=torch.double, generator=gen, requires_grad=True)
    table = torch.randn(5, 2, 3, 4, dtype=torch.double, generator=gen, requires_grad=True)

    def f(x, table):
        shared = SharedTable(table)
        return _layers(x, None, lambda x, _: shared.contract(x), 2)

    assert torch.autograd.gradcheck(f, (x, table))


def test_shared_table_without_gradient_is_a_plain_product():
    """Under no_grad (generation, evaluation) nothing is left for a backward."""
    table = torch.randn(4, 2, 3, 5, requires_grad=True)
    shared = SharedTable(table)
    x = torch.randn(2, 4, 2, 3)
    with torch.no_grad():
        out = shared.contract(x)
    assert torch.allclose(out, _einsum(x, table.detach()), atol=1e-6)
    assert not out.requires_grad and not shared.pending


def test_the_table_is_freed_after_backward_while_the_graph_lives():
    """No autograd node holds the table once backward has run (a reference cycle through the
    token's node kept a table per step alive until the garbage collector ran)."""
    import weakref

    def run() -> tuple[torch.Tensor, weakref.ref]:
        shared = SharedTable(torch.randn(4, 2, 3, 5, requires_grad=True) * 1.0)
        x = torch.randn(1, 4, 2, 3, requires_grad=True)
        out = _layers(x, None, lambda x, _: shared.contract(x), 2)
        out.sum().backward()
        return out, weakref.ref(shared.value)

    out, value = run()
    assert value() is None and out.grad_fn is not None


@pytest.mark.parametrize("per_row", [False, True])
def test_a_layer_without_gradient_adds_nothing_to_the_table(per_row):
    """Three contractions, the middle one outside the loss: its block of the layers' buffers is
    never written, and the table's gradient is the other two's (as autograd's einsum gives)."""
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, 2, 3, generator=gen, requires_grad=True)
    table = torch.randn(((2,) if per_row else ()) + (5, 2, 3, 4), generator=gen, requires_grad=True)

    def loss(contract) -> torch.Tensor:
        first, unused, last = (contract(x * (i + 1)) for i in range(3))
        return (first.square() + last.sin()).sum() + 0 * unused.detach().sum()

    shared = SharedTable(table * 1.0)
    loss(shared.contract).backward()
    got = table.grad.clone()
    table.grad = None
    loss(lambda x: _einsum(x, table)).backward()
    assert torch.allclose(got, table.grad, atol=1e-5)
    assert not shared.pending
