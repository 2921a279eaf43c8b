"""The CPU dropout (model/dropout.py): the keep rate, the scale, the gradient and the modes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from musicgen.model.dropout import Dropout, effective_p, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_the_mask_keeps_one_minus_p_of_the_elements(p):
    torch.manual_seed(0)
    m = keep_mask((1000, 1000), p)  # 1 M elements: the rate's standard error is below 0.0005
    assert m.dtype == torch.bool and m.shape == (1000, 1000)
    assert abs(m.float().mean().item() - (1 - effective_p(p))) < 0.003
    # four elements share a 64-bit draw, each its own 16 bits: each lane keeps the same share
    lanes = m.flatten().view(-1, 4).float().mean(0)
    assert torch.allclose(lanes, torch.full((4,), 1 - p), atol=0.005)


def test_output_is_the_kept_input_scaled_and_the_gradient_follows_the_mask():
    torch.manual_seed(0)
    x = torch.full((64, 257), 2.0, requires_grad=True)  # not a multiple of 4 elements
    y = Dropout(0.25)(x)
    kept = y != 0
    assert torch.allclose(y[kept], torch.tensor(2.0 / (1 - 0.25)))
    y.sum().backward()
    assert torch.equal(x.grad != 0, kept) and torch.allclose(x.grad[kept], torch.tensor(4 / 3))


def test_eval_mode_and_p_zero_are_the_identity():
    x = torch.randn(3, 5)
    d = Dropout(0.3).eval()
    assert d(x) is x and Dropout(0.0)(x) is x


def test_a_seed_fixes_the_mask_and_the_estimate_is_unbiased():
    torch.manual_seed(7)
    a = keep_mask((100, 100), 0.1)
    torch.manual_seed(7)
    assert torch.equal(a, keep_mask((100, 100), 0.1))
    x = torch.randn(2_000_000).abs()
    assert abs(Dropout(0.1)(x).mean().item() / x.mean().item() - 1) < 0.01


def test_the_drop_probability_matches_nn_dropout_in_distribution():
    torch.manual_seed(0)
    x = torch.ones(500_000)
    ours = (Dropout(0.1)(x) == 0).float().mean().item()
    theirs = (F.dropout(x, 0.1, training=True) == 0).float().mean().item()
    assert abs(ours - theirs) < 0.003 and effective_p(0.1) == pytest.approx(0.1, abs=1e-5)
