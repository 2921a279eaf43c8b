"""Windowed softmax attention (model.local_layers): the blocked form equals a naive banded
softmax, the window is respected, and the config refuses what it cannot build."""

from __future__ import annotations

import pytest
import torch

from musicgen.config import ModelConfig
from musicgen.errors import MusicgenError
from musicgen.model import build_model, local
from musicgen.model.local import LocalAttention, local_causal_attention, rotary


def naive(q, k, v, window):
    n = q.shape[2]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~((j <= i) & (i - j < window)), float("-inf"))
    return torch.softmax(scores, -1) @ v


@pytest.mark.parametrize("block", [3, 7, 256])
@pytest.mark.parametrize("n,window", [(5, 8), (8, 8), (23, 8), (64, 16), (50, 1)])
def test_blocked_form_equals_the_banded_softmax(monkeypatch, n, window, block):
    """Query blocks shorter than, as long as and longer than the window."""
    monkeypatch.setattr(local, "QUERY_BLOCK", block)
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(2, 3, n, 4, generator=g) for _ in range(3))
    got = local_causal_attention(q, k, v, window)
    assert torch.allclose(got, naive(q, k, v, window), atol=1e-5)


def test_a_key_beyond_the_window_changes_nothing():
    cfg = ModelConfig(vocab_size=10, d_model=8, n_heads=2, local_window=4)
    torch.manual_seed(0)
    attn = LocalAttention(cfg)
    x = torch.randn(1, 12, 8)
    y = x.clone()
    y[0, 3] += 5.0  # position 3 is out of the window of positions 7..11
    a, b = attn(x), attn(y)
    assert torch.equal(a[0, 7:], b[0, 7:]) and not torch.allclose(a[0, 3:7], b[0, 3:7])


def test_step_keeps_only_the_window():
    cfg = ModelConfig(vocab_size=10, d_model=8, n_heads=2, local_window=3)
    attn = LocalAttention(cfg)
    cache = attn.init_cache(2, "cpu")
    for _ in range(5):
        attn(torch.randn(2, 1, 8), cache=cache)
    assert cache.k.shape == (2, 2, 3, 4) and cache.v.shape == (2, 2, 3, 4)


def test_rotary_scores_depend_only_on_the_distance():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 6, 8, generator=g), torch.randn(1, 2, 6, 8, generator=g)
    a = rotary(q, 0) @ rotary(k, 0).transpose(-1, -2)  # (1, 2, 6, 6)
    b = rotary(q, 1000) @ rotary(k, 1000).transpose(-1, -2)  # the same tokens, later
    assert torch.allclose(a, b, atol=1e-3)
    assert torch.allclose(rotary(q, 7).norm(dim=-1), q.norm(dim=-1), atol=1e-5)  # a rotation
    assert not torch.allclose(a, q @ k.transpose(-1, -2), atol=1e-3)  # it does turn them


def test_step_with_rotary_continues_the_token_index():
    cfg = ModelConfig(vocab_size=10, d_model=8, n_heads=2, local_window=3)
    torch.manual_seed(0)
    attn = LocalAttention(cfg).eval()
    x = torch.randn(1, 9, 8)
    cache = attn.init_cache(1, "cpu")
    steps = torch.cat([attn(x[:, i : i + 1], cache=cache) for i in range(9)], dim=1)
    assert cache.pos == 9 and torch.allclose(steps, attn(x), atol=1e-5)


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(local_layers=[2]), "each must be a block index in 0..1"),
        (dict(local_layers=[0, 0]), "appears twice"),
        (dict(local_window=0), "local_window: must be > 0"),
        (dict(local_layers=[0], d_model=6), "local_rope: needs an even head size"),
        (dict(local_layers=[0], head="perceiver_s"), "not available with head 'perceiver_s'"),
    ],
)
def test_bad_local_configs_are_one_line_errors(kw, message):
    cfg = ModelConfig(**{**dict(vocab_size=10, n_layers=2, d_model=8, n_heads=2, d_ff=16), **kw})
    with pytest.raises(MusicgenError, match=message):
        build_model(cfg)


@pytest.mark.parametrize(
    "pe,lost",
    [
        (dict(), {"blocks.1.attn.features.proj"}),
        (dict(pe="sine_spe", gated=True), {"blocks.1.attn.features.proj", "blocks.1.attn.gate"}),
    ],
)
def test_init_from_a_performer_keeps_the_learned_weights_of_a_block_made_local(
    tmp_path, capsys, pe, lost
):
    from musicgen.checkpoint import save_checkpoint
    from musicgen.config import Config
    from musicgen.tokenizers import build_tokenizer
    from musicgen.train.run import init_weights

    remi = build_tokenizer("remi")
    cfg = Config()
    cfg.model = ModelConfig(
        vocab_size=remi.vocab_size,
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_features=8,
        num_realizations=4,
        **pe,
    )
    torch.manual_seed(0)
    src = build_model(cfg.model)
    save_checkpoint(tmp_path / "src.pt", src, cfg, remi, {})
    cfg.model.local_layers = [1]
    dst = build_model(cfg.model)
    assert init_weights(dst, str(tmp_path / "src.pt"), remi) == []
    assert "not used by the windowed blocks: blocks.1.attn." in capsys.readouterr().out
    theirs, ours = src.state_dict(), dst.state_dict()
    assert set(theirs) - set(ours) == lost
    assert all(torch.equal(theirs[k], ours[k]) for k in ours)  # qkv and out included


def test_attention_figures_refuse_a_windowed_softmax_layer():
    from musicgen.evaluate import attention_maps

    cfg = ModelConfig(vocab_size=10, n_layers=2, d_model=8, n_heads=2, d_ff=16, local_layers=[1])
    model = build_model(cfg)
    assert attention_maps(model, [1, 2, 3], layers=[0], heads=[0])[(0, 0)].shape == (3, 3)
    with pytest.raises(MusicgenError, match="1 is a windowed softmax layer"):
        attention_maps(model, [1, 2, 3], layers=[1], heads=[0])
