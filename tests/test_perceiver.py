"""Perceiver S: the two cross-attention masks, no leaks, step == score, effective segmentation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from paths import UNIT_SONGS

from musicgen.config import load_config
from musicgen.data.dataset import IGNORE_INDEX, CropDataset, PreparedSplit
from musicgen.data.segments import (
    SegmentDataset,
    UniformCropDataset,
    end_range,
    make_train_dataset,
    segment,
    uniform_end_range,
)
from musicgen.errors import MusicgenError
from musicgen.model import build_model
from musicgen.model.perceiver import PAD_ID, PerceiverS

ROOT = Path(__file__).resolve().parents[1]
SONGS = UNIT_SONGS
TINY = ROOT / "configs" / "pop909" / "perceiver_tiny.yaml"
M, N, V = 24, 8, 40  # window, queries, vocabulary of the hand-sized models


def tiny_model(
    pe: str = "sine_spe",
    combine: str = "sum",
    cross: str = "both",
    m: int = M,
    n: int = N,
    seed: int = 0,
    extra: tuple[str, ...] = (),
) -> PerceiverS:
    cfg = load_config(
        TINY,
        [
            f"model.pe={pe}",
            f"model.vocab_size={V}",
            f"model.perceiver.context_len={m}",
            f"model.perceiver.n_queries={n}",
            f"model.perceiver.combine={combine}",
            f"model.perceiver.cross={cross}",
            *extra,
        ],
    ).model
    torch.manual_seed(seed)
    model = build_model(cfg)
    assert isinstance(model, PerceiverS) and model.predicts_last == n
    return model.eval()


def song_ids(b: int, length: int, seed: int = 0, pads: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (b, length), generator=g)
    ids[:, :pads] = PAD_ID
    return ids


PES = ["ape", "sine_spe", "conv_spe"]


# ---------------------------------------------------------------------------------------------
# the two masks: exact zeros of the gradient


def _window_grads(out_fn, x: torch.Tensor, n: int) -> torch.Tensor:
    """|d out[:, i] / d x| summed over batch and features: (n queries, m positions)."""
    rows = []
    for i in range(n):
        x.grad = None
        out_fn()[:, i].sum().backward()
        rows.append(x.grad.abs().sum((0, 2)))
    return torch.stack(rows)


@pytest.mark.parametrize("pe", PES)
def test_cross_attention_masks_hide_exactly_what_they_should(pe):
    model = tiny_model(pe)
    ids = song_ids(2, M, pads=3)
    pos = torch.arange(M)
    x = model.embed_window(ids, pos).detach().requires_grad_(True)  # (B, m, d)
    ok, noise = ids != PAD_ID, model.new_noise("cpu", seed=1)
    lat = lambda: x[:, M - N :]  # noqa: E731
    full = _window_grads(lambda: model.full_attention(lat(), x, ok, noise), x, N)
    scale = _window_grads(lambda: model.scale_attention(lat(), x, ok, noise), x, N)
    for i in range(N):
        q = M - N + i  # window position of query i
        assert torch.all(full[i, q + 1 :] == 0) and torch.all(scale[i, q + 1 :] == 0)  # causal M
        assert torch.all(scale[i, : M - N] == 0)  # scale mask: positions 1..m-n are hidden
        assert torch.all(full[i, 3 : q + 1] > 0)  # the full layer sees the whole past context
        assert torch.all(scale[i, M - N : q + 1] > 0)
        assert torch.all(full[i, :3] == 0)  # padding keys are masked (and only through q: none)


@pytest.mark.parametrize(
    "pe,combine,cross",
    [
        ("ape", "sum", "both"),
        ("sine_spe", "sum", "both"),
        ("conv_spe", "sequential", "both"),
        ("ape", "sum", "full"),
        ("sine_spe", "sum", "full"),
    ],
)
def test_whole_model_prediction_never_sees_later_tokens(pe, combine, cross):
    model = tiny_model(pe, combine, cross)
    ids = song_ids(2, M)
    x = model.embed_window(ids, torch.arange(M)).detach().requires_grad_(True)
    ok, noise = ids != PAD_ID, model.new_noise("cpu", seed=2)
    grads = _window_grads(lambda: model.core(x, ok, noise), x, N)  # through the Performer blocks
    for i in range(N):
        q = M - N + i
        assert torch.all(grads[i, q + 1 :] == 0)
        assert torch.all(grads[i, : q + 1] > 0)


def test_real_queries_ignore_padding_completely():
    model = tiny_model("sine_spe")
    a = song_ids(1, M, seed=3, pads=10)
    x = model.embed_window(a, torch.arange(M)).detach()
    noise = model.new_noise("cpu", seed=4)
    y1 = model.core(x, a != PAD_ID, noise)
    x2 = x.clone()
    x2[:, :10] += torch.randn(1, 10, x.shape[-1])  # whatever sits in the padded part
    assert torch.equal(y1, model.core(x2, a != PAD_ID, noise))


# ---------------------------------------------------------------------------------------------
# forward / score / step agree where they should


@pytest.mark.parametrize(
    "pe,combine,shared,cross",
    [
        ("ape", "sum", True, "both"),
        ("ape_learned", "sequential", True, "both"),
        ("sine_spe", "sum", True, "both"),
        ("conv_spe", "sum", False, "both"),
        ("none", "sum", True, "both"),
        ("ape", "sum", True, "full"),  # Perceiver AR
        ("sine_spe", "sum", False, "full"),
    ],
)
def test_step_by_step_equals_score_at_every_position(pe, combine, shared, cross):
    model = tiny_model(pe, combine, cross, extra=(f"model.spe_shared={str(shared).lower()}",))
    length = 3 * N + 5  # several query blocks, windows sliding past the song's head
    ids = song_ids(2, length, seed=5)
    ids[:, 0] = 1
    with torch.no_grad():
        ref = model.score(ids, seed=7)  # (B, L, V)
        state = model.init_state(2, "cpu", seed=7)
        steps = []
        for t in range(length):
            logits, state = model.step(ids[:, t], state)
            steps.append(logits)
    assert ref.shape == (2, length, V)
    torch.testing.assert_close(torch.stack(steps, 1), ref, rtol=1e-4, atol=1e-5)


def test_forward_matches_score_on_aligned_windows():
    model = tiny_model("conv_spe")
    ids = song_ids(2, 2 * M, seed=6)
    with torch.no_grad():
        ref = model.score(ids, seed=3)
        fwd = lambda x: model(x, noise=model.new_noise("cpu", seed=3))  # noqa: E731
        for n_ids in (1, 5, N):  # a song's head: the first query block
            torch.testing.assert_close(fwd(ids[:, :n_ids]), ref[:, :n_ids], rtol=1e-5, atol=1e-6)
        for end in (2 * N, 3 * N):  # window ending at a block end: its last n positions
            out = fwd(ids[:, max(0, end - M) : end])
            assert out.shape == (2, N, V)
            torch.testing.assert_close(out, ref[:, end - N : end], rtol=1e-5, atol=1e-6)
    with pytest.raises(MusicgenError, match="at most context_len"):
        model(ids[:, : M + 1])


def test_score_uses_the_context_of_its_window_only():
    model = tiny_model("ape")
    ids = song_ids(1, 5 * N, seed=8)
    t = 4 * N + 2  # block 4: window covers positions 5N - M .. 5N - 1
    far, near = 5 * N - M - 1, 5 * N - M
    with torch.no_grad():
        ref = model.score(ids)[0, t]
        changed = ids.clone()
        changed[0, far] = (changed[0, far] + 1) % V or 1
        assert torch.equal(model.score(changed)[0, t], ref)
        changed = ids.clone()
        changed[0, near] = (changed[0, near] + 1) % V or 1
        assert not torch.allclose(model.score(changed)[0, t], ref)


@pytest.mark.parametrize("pe", ["ape", "sine_spe"])
def test_perceiver_ar_future_ids_never_change_earlier_logits(pe):
    model = tiny_model(pe, cross="full")
    ids = song_ids(1, 4 * N + 3, seed=9)
    with torch.no_grad():
        ref = model.score(ids, seed=1)
        for t in (1, N, 2 * N + 3, 4 * N + 2):
            changed = ids.clone()
            changed[0, t:] = (changed[0, t:] + 1) % V + 1
            out = model.score(changed, seed=1)
            assert torch.equal(out[:, :t], ref[:, :t])
            assert not torch.allclose(out[:, t], ref[:, t])  # the changed id itself is read


def test_perceiver_ar_has_one_cross_attention_and_a_checkpoint_rebuilds_it(tmp_path):
    from dataclasses import asdict

    from musicgen.config import config_from_dict

    ar, s = tiny_model("sine_spe", cross="full"), tiny_model("sine_spe")
    assert ar.cross_scale is None and s.cross_scale is not None
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n_params(s) - n_params(ar) == n_params(s.cross_scale)
    cfg = load_config(TINY, ["model.perceiver.cross=full", "model.perceiver.segmentation=uniform"])
    again = config_from_dict(asdict(cfg))  # what a checkpoint stores and reads back
    assert (again.model.perceiver.cross, again.model.perceiver.segmentation) == ("full", "uniform")
    assert config_from_dict({}).model.perceiver.cross == "both"  # checkpoints before the key


def test_bad_perceiver_settings_are_clear_errors():
    with pytest.raises(MusicgenError, match="n_queries <= context_len"):
        tiny_model(m=8, n=16)
    with pytest.raises(MusicgenError, match="combine"):
        tiny_model(combine="concat")
    with pytest.raises(MusicgenError, match=r"model\.perceiver\.cross: .*'half'.*both, full"):
        tiny_model(cross="half")
    with pytest.raises(MusicgenError, match=r"perceiver\.segmentation: .*effective, uniform"):
        load_config(TINY, ["model.perceiver.segmentation=random"])


# ---------------------------------------------------------------------------------------------
# effective segmentation


@pytest.fixture(scope="module")
def train_split(prepared) -> PreparedSplit:
    return PreparedSplit(prepared, "train")


def head_probability(length: int, context_len: int, n_queries: int) -> float:
    """Probability that a uniformly drawn end (`end_range`) gives a window that starts at the
    song's head: the closed form the segment tests hold the dataset to."""
    lo, hi = end_range(length, n_queries)
    if hi < lo:
        return 0.0
    heads = max(0, min(hi, context_len + 1) - lo + 1)
    return heads / (hi - lo + 1)


def test_head_probability_is_the_count_of_ends_that_reach_the_head():
    for length, m, n in [(1000, 256, 64), (300, 512, 64), (65, 128, 64), (10, 128, 64)]:
        lo, hi = end_range(length, n)
        heads = sum(max(0, e - 1 - m) == 0 for e in range(lo, hi + 1))
        assert head_probability(length, m, n) == pytest.approx(heads / (hi - lo + 1))


def test_segments_start_at_the_head_as_often_as_the_rule_implies(train_split):
    m, n, per_song = 512, 64, 600
    lengths = train_split.lengths
    assert all(lengths > 2 * m)  # so the head probability is strictly between 0 and 1
    ds = SegmentDataset(train_split, m, n, seed=11, num_samples=per_song * len(train_split))
    bos = train_split.tokenizer.bos_id
    hits = 0
    for i in range(len(ds)):
        inp = ds[i]["input"]
        hits += int(inp[int((inp == PAD_ID).sum())] == bos)  # first real input id is the BOS
    p = np.array([head_probability(int(lg), m, n) for lg in lengths])
    expected = per_song * p.sum()
    sd = math.sqrt(per_song * (p * (1 - p)).sum())
    assert abs(hits - expected) < 4 * sd, (hits, expected, sd)


def test_segment_items_align_inputs_and_targets_and_never_target_padding(train_split):
    m, n = 256, 64
    ds = SegmentDataset(train_split, m, n, transpose=(-6, 6), seed=3, num_samples=200)
    plain = SegmentDataset(train_split, m, n, seed=3, num_samples=200)
    pad_id = train_split.tokenizer.pad_id
    for i in range(len(ds)):
        item = ds[i]
        inp, tgt = item["input"], item["target"]
        assert inp.shape == (m,) and tgt.shape == (n,)
        real = inp[m - n :] != pad_id
        assert torch.equal(tgt != IGNORE_INDEX, real)  # a target exactly where the input is real
        assert not torch.any(tgt == pad_id)
        assert torch.equal(tgt[:-1][real[1:]], inp[m - n + 1 :][real[1:]])  # shifted by one
        pads = int((inp == pad_id).sum())
        assert torch.all(inp[pads:] != pad_id)  # padding only on the left
        _, end, song, _ = plain.draw(i)  # without transposition: the exact song slice
        assert end in range(*np.add(end_range(len(song), n), (0, 1)))
        ref = plain[i]
        assert ref["input"][pads:].tolist() == song[max(0, end - 1 - m) : end - 1].tolist()
        assert ref["target"].tolist() == song[end - n : end].tolist()
    assert torch.equal(ds[5]["input"], ds[5]["input"])  # deterministic per (seed, epoch, index)
    first = ds[5]["input"].clone()
    ds.set_epoch(1)
    assert not torch.equal(ds[5]["input"], first)


def test_a_song_shorter_than_the_queries_is_left_padded_with_ignored_targets(train_split):
    song = np.asarray(train_split[0][:10], dtype=np.int64)
    item = segment(song, end_range(len(song), 16)[1], 32, 16)
    assert item["input"][-9:].tolist() == song[:-1].tolist()
    assert torch.all(item["input"][:-9] == PAD_ID)
    assert item["target"][-9:].tolist() == song[1:].tolist()
    assert torch.all(item["target"][:-9] == IGNORE_INDEX)


def test_uniform_crops_are_full_windows_at_a_uniform_start(train_split):
    m, n, per_song = 256, 64, 400
    lengths = train_split.lengths
    ds = UniformCropDataset(train_split, m, n, seed=5, num_samples=per_song * len(train_split))
    starts: dict[int, list[int]] = {}
    for i in range(len(ds)):
        song_i, end, song, _ = ds.draw(i)
        assert end in range(*np.add(uniform_end_range(len(song), m), (0, 1)))
        item = ds[i]
        assert not torch.any(item["input"] == PAD_ID)  # songs are longer than m + 1: no padding
        assert item["input"].tolist() == song[end - 1 - m : end - 1].tolist()
        assert item["target"].tolist() == song[end - n : end].tolist()
        starts.setdefault(song_i, []).append(end - 1 - m)
    for song_i, got in starts.items():  # start uniform in [0, l - m - 1]: a chi-square check
        k = int(lengths[song_i]) - m  # possible starts
        bins = np.bincount(np.asarray(got) * 8 // k, minlength=8)  # 8 equal-width bins
        expected = len(got) / 8
        chi2 = float(((bins - expected) ** 2 / expected).sum())
        assert chi2 < 24.3, (song_i, bins)  # 7 degrees of freedom, p = 0.001
    heads = sum(s == 0 for got in starts.values() for s in got)
    assert heads < 0.05 * len(ds)  # far rarer than effective segmentation's head rate


def test_training_dataset_follows_the_head(train_split):
    cfg = load_config(TINY)
    ds = make_train_dataset(cfg, train_split, 8)
    assert isinstance(ds, SegmentDataset) and len(ds) == 8
    assert ds[0]["input"].shape == (cfg.model.perceiver.context_len,)
    assert ds[0]["target"].shape == (cfg.model.perceiver.n_queries,)
    cfg.model.perceiver.segmentation = "uniform"
    assert isinstance(make_train_dataset(cfg, train_split, 8), UniformCropDataset)
    cfg.model.head = "lm"
    assert isinstance(make_train_dataset(cfg, train_split, 8), CropDataset)


# ---------------------------------------------------------------------------------------------
# end to end: train the tiny preset on POP909 songs, generate a MIDI file from the checkpoint


@pytest.mark.slow  # about a minute on the shared 2-core machine
def test_tiny_training_lowers_the_loss_and_the_checkpoint_generates_midi(prepared, tmp_path):
    import json

    import symusic

    from musicgen.checkpoint import load_checkpoint
    from musicgen.generation.decoding.sample import SamplingOptions, generate
    from musicgen.train.run import train

    cfg = load_config(
        TINY,
        [
            f"data.path={prepared}",
            "train.max_steps=30",
            "train.val_every=30",
            "train.ckpt_every=30",
            "train.device=cpu",
        ],
    )
    last = train(cfg, tmp_path / "run").last
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in log if r["kind"] == "train"]
    assert len(losses) == 30
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5, losses
    assert any(r["kind"] == "val" and math.isfinite(r["loss"]) for r in log)

    loaded = load_checkpoint(last)
    assert isinstance(loaded.model, PerceiverS)
    tok = loaded.tokenizer
    gen = torch.Generator().manual_seed(0)
    max_new = 2 * cfg.model.perceiver.context_len  # past one window: the context slides
    out = generate(
        loaded.model,
        tok,
        [[tok.bos_id]] * 2,
        SamplingOptions(temperature=1.0),
        max_new,
        generator=gen,
    )
    for k, res in enumerate(out):
        assert res.errors == 0  # grammar masking keeps every sampled id valid
        path = tmp_path / f"sample{k}.mid"
        tok.decode_to_midi(res.ids, path)
        score = symusic.Score(str(path))
        assert sum(len(t.notes) for t in score.tracks) > 0
