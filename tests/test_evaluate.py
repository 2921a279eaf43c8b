"""Evaluation tasks and figures on tiny models built here and real POP909 songs."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from paths import DATA

from musicgen.checkpoint import load_checkpoint, save_checkpoint
from musicgen.cli import main
from musicgen.config import Config
from musicgen.data.dataset import load_songs
from musicgen.errors import MusicgenError
from musicgen.evaluate import (
    attention_maps,
    evaluate_music,
    evaluate_nll,
    per_position_nll,
    positional_kernels,
    range_mean,
    seeded_nll,
    segment_means,
    song_prompt,
    split_by_time,
    true_continuation,
)
from musicgen.evaluate.plots import (
    plot_attention,
    plot_kernels,
    plot_music_stats,
    plot_nll_curves,
    plot_style_boxes,
    plot_training_log,
)
from musicgen.measures.metrics import BAR_BEATS, make_notes, notes_from_score
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer

POP909 = DATA / "pop909"


def png_size(path: Path) -> tuple[int, int]:
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def tiny_config(vocab: int, pe: str = "ape", gated: bool = False, crop: int = 128) -> Config:
    cfg = Config()
    cfg.data.crop_len = crop
    m = cfg.model
    m.vocab_size, m.n_layers, m.d_model, m.n_heads, m.d_ff = vocab, 2, 32, 2, 64
    m.dropout, m.n_features, m.num_realizations, m.kernel_size = 0.0, 16, 8, 16
    m.pe, m.gated = pe, gated
    return cfg


@pytest.fixture(scope="module")
def remi():
    return build_tokenizer("remi")


@pytest.fixture(scope="module")
def songs(remi):
    return [np.asarray(remi.encode(POP909 / f"{n:03d}" / f"{n:03d}.mid")) for n in (1, 2, 3)]


# --- per-position NLL -------------------------------------------------------------------------


def test_per_position_nll_matches_cross_entropy(remi, songs):
    torch.manual_seed(0)
    model = build_model(tiny_config(remi.vocab_size).model)
    model.train()
    cut = [s[:n] for s, n in zip(songs, (90, 60, 120), strict=True)]
    sums, counts = per_position_nll(model, cut, 100, "cpu", batch_size=2)
    assert model.training  # restored
    assert counts.tolist() == [3] * 59 + [2] * 30 + [1] * 11
    total, n = 0.0, 0
    model.eval()
    for s in cut:
        x = torch.as_tensor(s[:101], dtype=torch.long)
        with torch.no_grad():
            total += F.cross_entropy(model(x[None, :-1])[0], x[1:], reduction="sum").item()
        n += len(x) - 1
    assert sums.sum() / counts.sum() == pytest.approx(total / n, rel=1e-5)
    one_by_one, _ = per_position_nll(model, cut, 100, "cpu", batch_size=1)
    np.testing.assert_allclose(one_by_one, sums, rtol=1e-4)  # right padding changes nothing


def test_segment_means_exact():
    sums = np.array([1.0, 3.0, 2.0, 0.0, 0.0])
    counts = np.array([1, 1, 1, 0, 0])
    means = segment_means(sums, counts, segment=2)
    assert means[:2] == [2.0, 2.0] and math.isnan(means[2])


@pytest.fixture(scope="module")
def run(tmp_path_factory, remi, songs):
    """A prepared validation split of three songs and three tiny checkpoints."""
    root = tmp_path_factory.mktemp("eval")
    data = root / "data"
    (data / "validation").mkdir(parents=True)
    remi.save(data / "tokenizer.json")
    cut = [s[:300] for s in songs]
    np.save(data / "validation" / "tokens.npy", np.concatenate(cut).astype(np.uint16))
    np.save(data / "validation" / "offsets.npy", np.cumsum([0] + [len(s) for s in cut]))
    ckpts = {}
    for pe, gated in (("ape", False), ("sine_spe", True), ("conv_spe", True)):
        torch.manual_seed(0)
        cfg = tiny_config(remi.vocab_size, pe, gated)
        model = build_model(cfg.model)
        for block in getattr(model, "blocks", []):  # gates away from 0.5 to test the mixing
            if block.attn.gate is not None:
                torch.nn.init.normal_(block.attn.gate, std=1.0)
        ckpts[pe] = save_checkpoint(root / f"{pe}.pt", model, cfg, remi)
    return root, data, ckpts


def test_evaluate_nll_several_checkpoints(run):
    root, data, ckpts = run
    out = root / "nll"
    res = evaluate_nll([ckpts["ape"], ckpts["conv_spe"]], data, out, max_songs=2)
    assert res["songs"] == 2
    assert len(res["models"]) == 2
    for m in res["models"].values():
        assert m["max_len"] == 256  # 2 x crop_len
        assert len(m["per_segment"]) == 2 and all(0 < v < 10 for v in m["per_segment"])
        assert m["tokens_per_segment"] == [256, 256]
        assert 0 < m["mean_within"] < 10 and 0 < m["mean_beyond"] < 10
    saved = json.loads((out / "nll.json").read_text())
    assert saved["models"].keys() == res["models"].keys()
    # per song, the same draws: the songs' means weigh back to the totals; paired differences
    ape, conv = res["models"].values()
    for key in ("within", "beyond"):
        assert len(ape["per_song"][key]) == 2
        assert np.mean(ape["per_song"][key]) == pytest.approx(ape[f"mean_{key}"], rel=1e-9)
    [(pair, diff)] = res["paired"].items()
    assert pair.endswith(" - " + next(iter(res["models"])))
    expected = np.mean(conv["per_song"]["beyond"]) - np.mean(ape["per_song"]["beyond"])
    assert diff["beyond"]["mean"] == pytest.approx(expected) and diff["beyond"]["n"] == 2
    assert diff["beyond"]["low"] <= diff["beyond"]["mean"] <= diff["beyond"]["high"]
    assert png_size(out / "nll.png") == (800, 500)
    # the SPE noise is seeded: the same numbers twice
    again = [
        evaluate_nll([ckpts["conv_spe"]], data, root / f"nll{i}", max_songs=1, seed=5)
        for i in range(2)
    ]
    assert [next(iter(r["models"].values()))["per_segment"] for r in again][0] == next(
        iter(again[1]["models"].values())
    )["per_segment"]


def test_seeded_nll_averages_draws_independent_of_batching_and_sharding(run):
    """Draw d of song i has its own seed: rank shards and the caller's RNG change nothing;
    several draws average the single-draw curves."""
    root, data, ckpts = run
    model = load_checkpoint(ckpts["conv_spe"]).model
    songs = load_songs(data, "validation")
    one = [seeded_nll(model, songs, 128, "cpu", seeds=1, seed=2, first_index=0)[0]]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    sums, counts = seeded_nll(model, songs, 128, "cpu", seeds=3, seed=2)
    assert torch.equal(torch.get_rng_state(), before)  # the caller's RNG is untouched
    batched = seeded_nll(model, songs, 128, "cpu", seeds=3, seed=2, batch_size=3)
    assert np.array_equal(batched[1], counts)  # a batch shares one draw: only counts agree
    shards = [
        seeded_nll(model, songs[r::2], 128, "cpu", seeds=3, seed=2, first_index=r, step=2)
        for r in range(2)
    ]
    assert np.allclose(shards[0][0] + shards[1][0], sums, atol=1e-9)
    assert np.array_equal(shards[0][1] + shards[1][1], counts)
    draws = [seeded_nll(model, songs, 128, "cpu", seed=2)[0]]  # draw 0 alone
    assert np.allclose(draws[0], one[0]) and not np.allclose(draws[0], sums)
    assert counts.sum() == sum(min(len(s), 129) - 1 for s in songs)  # one draw's count
    with pytest.raises(MusicgenError, match="^seeds: must be at least 1"):
        evaluate_nll([ckpts["ape"]], data, root / "bad", seeds=0)
    res = evaluate_nll([ckpts["conv_spe"]], data, root / "nll3", max_len=128, seed=2, seeds=3)
    curve = next(iter(res["models"].values()))
    assert res["seeds"] == 3 and curve["mean_within"] == pytest.approx(
        range_mean(sums, counts, 0, 128)
    )


def test_cli_evaluate_nll_seeds(run, capsys):
    root, data, ckpts = run
    args = [
        "evaluate",
        "nll",
        "--checkpoint",
        str(ckpts["sine_spe"]),
        "--data",
        str(data),
        "--max-len",
        "128",
        "--out",
        str(root / "cli"),
    ]
    assert main([*args, "--seeds", "2"]) == 0
    assert json.loads((root / "cli" / "nll.json").read_text())["seeds"] == 2
    assert main([*args, "--seeds", "0"]) == 1
    assert "error: --seeds: must be at least 1, got 0" in capsys.readouterr().err


def test_evaluate_nll_rejects_other_tokenizer(run, tmp_path):
    root, data, ckpts = run
    other = tmp_path / "groove"
    (other / "validation").mkdir(parents=True)
    build_tokenizer("groove").save(other / "tokenizer.json")
    np.save(other / "validation" / "tokens.npy", np.array([1, 2, 3], np.uint16))
    np.save(other / "validation" / "offsets.npy", np.array([0, 3]))
    with pytest.raises(MusicgenError, match="tokenizer differs"):
        evaluate_nll([ckpts["ape"]], other, tmp_path / "o")


# --- style continuation -----------------------------------------------------------------------


def test_split_by_time_exact():
    notes = make_notes([0, 1, 8, 9, 10, 12, 16], [1] * 7, [60] * 7)
    segs = split_by_time(notes, start=8.0, n=4)  # [8, 10), [10, 12), [12, 14), [14, 16]
    assert [s.onset.tolist() for s in segs] == [[8, 9], [10], [12], [16]]
    empty = split_by_time(notes, start=100.0)
    assert len(empty) == 4 and all(len(s) == 0 for s in empty)


def test_song_prompt_skips_leading_silence(remi, songs):
    ids = [int(i) for i in songs[0]]
    prompt = song_prompt(remi, ids, 2).ids
    g = remi.grammar()
    assert all(g.advance(t) for t in prompt) and not g.finished()
    assert prompt[0] == remi.bos_id
    notes = notes_from_score(remi.decode(prompt))
    bars = len(remi.bar_starts(np.asarray(prompt))) - 1  # the last Bar opens the continuation
    assert notes.onset.min() < BAR_BEATS  # the first prompt bar has music
    assert notes.onset.max() < bars * BAR_BEATS
    if notes.onset.min() >= BAR_BEATS / 2:  # a pickup: its bar and 2 more
        assert bars == 3 and notes.onset[notes.onset >= BAR_BEATS].size > 0
    else:
        assert bars == 2
    with pytest.raises(MusicgenError):
        song_prompt(remi, ids[:12], 2)  # too short


def test_true_continuation_is_what_followed_the_prompt(remi, songs):
    ids = [int(i) for i in songs[0]]
    prompt = song_prompt(remi, ids, 2).ids
    truth = true_continuation(remi, ids, prompt, max_tokens=400)  # 400 ids after the prompt
    assert truth[: len(prompt)] == prompt and len(truth) == len(prompt) + 400
    body = truth[1:]  # without BOS: a contiguous run of the source
    assert any(ids[i : i + len(body)] == body for i in range(len(ids) - len(body) + 1))
    # the continuation starts where the prompt's bars end: decoded, it begins after them
    notes = notes_from_score(remi.decode(truth))
    bars = len(remi.bar_starts(np.asarray(prompt))) - 1
    assert notes.onset[notes.onset >= bars * BAR_BEATS].size > 0


def test_song_prompt_groove_drums():
    tok = build_tokenizer("groove")
    song = DATA / "groove_drums" / "drummer1" / "eval_session" / "3_soul-groove3_86_beat_4-4.mid"
    ids = tok.encode(song)
    prompt = song_prompt(tok, ids, 2).ids
    g = tok.grammar()
    assert all(g.advance(t) for t in prompt)
    notes = notes_from_score(tok.decode(prompt))
    assert notes.track_keys == ["program:33", "drums", "program:0"]
    assert 0 <= notes.onset.min() and notes.onset.max() < 2 * BAR_BEATS
    assert len(notes) < len(notes_from_score(tok.decode(ids)))


def test_evaluate_style_end_to_end(run, tmp_path):
    from musicgen.evaluate import evaluate_style

    root, data, ckpts = run
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "004.mid").write_bytes((POP909 / "004" / "004.mid").read_bytes())
    res = evaluate_style(ckpts["sine_spe"], prompts, tmp_path / "o", max_tokens=160, samples=2)
    for metric in ("time_pitch", "onset_duration"):
        assert len(res["summary"][metric]) == 4
        ref = [seg["mean"] for seg in res["reference_summary"][metric]]
        assert len(ref) == 4 and all(0 <= v <= 1 for v in ref)
    sample = res["songs"][0]["samples"][0]
    assert len(sample["segments"]) == 4
    prompt_len = res["songs"][0]["prompt_tokens"]
    for s in res["songs"][0]["samples"]:  # max_tokens: the ids sampled after the prompt
        assert s["tokens"] > prompt_len
        if s["stop"] == "max_tokens":
            assert s["tokens"] >= prompt_len + 160
    assert res["prompts_kept"] == {"samples": 2, "decoded": 2, "written": 2}
    assert sample["prompt_written"] == {"kept": True, "extra": 0, "missing": 0}
    assert len(list((tmp_path / "o" / "samples").glob("*.mid"))) == 2
    assert png_size(tmp_path / "o" / "style.png") == (800, 500)


def test_prompt_check_sees_a_changed_or_added_prompt_note(remi):
    import symusic

    from musicgen.evaluate.style import prompt_check, song_prompt
    from musicgen.generation.api.prompt import encode_song

    prompt = song_prompt(remi, encode_song(remi, POP909 / "004" / "004.mid"), 2)
    assert prompt_check(prompt, prompt.notes) == {"kept": True, "extra": 0, "missing": 0}
    later = prompt.notes.copy()  # a note after bar N is not the prompt's business
    later.tracks[0].notes.append(symusic.Note(prompt.end_tick, 10, 60, 80))
    assert prompt_check(prompt, later)["kept"]
    changed = prompt.notes.copy()
    n = changed.tracks[0].notes[0]
    changed.tracks[0].notes[0] = symusic.Note(n.time, n.duration, n.pitch + 1, n.velocity)
    assert prompt_check(prompt, changed) == {"kept": False, "extra": 1, "missing": 1}
    added = prompt.notes.copy()
    added.tracks[0].notes.append(symusic.Note(prompt.end_tick - 1, 1, 100, 80))
    assert prompt_check(prompt, added) == {"kept": False, "extra": 1, "missing": 0}


# --- music statistics -------------------------------------------------------------------------


def test_evaluate_music_with_reference_and_grammar(tmp_path, remi):
    gen, ref = tmp_path / "gen", tmp_path / "ref"
    gen.mkdir()
    ref.mkdir()
    for n in (1, 2):
        (gen / f"{n}.mid").write_bytes((POP909 / f"{n:03d}" / f"{n:03d}.mid").read_bytes())
    (gen / "broken.mid").write_bytes(b"garbage")
    (ref / "5.mid").write_bytes((POP909 / "005" / "005.mid").read_bytes())
    res = evaluate_music(gen, tmp_path / "o", reference=ref, tokenizer=remi)
    assert res["generated"]["note_density"]["n"] == 2
    assert res["generated"]["grammar_error_rate"]["mean"] == 0.0
    assert [s["path"].endswith("broken.mid") for s in res["skipped"]] == [True]
    assert res["reference"]["pitch_class_entropy"]["n"] == 1
    assert png_size(tmp_path / "o" / "music.png") == (800, 500)
    json.loads((tmp_path / "o" / "music.json").read_text())  # strict JSON (no NaN)


def test_evaluate_music_against_the_head_of_each_reference_song(tmp_path):
    gen, ref = tmp_path / "gen", tmp_path / "ref"
    gen.mkdir()
    ref.mkdir()
    (gen / "1.mid").write_bytes((POP909 / "001" / "001.mid").read_bytes())
    (ref / "5.mid").write_bytes((POP909 / "005" / "005.mid").read_bytes())
    whole = evaluate_music(gen, tmp_path / "a", reference=ref)
    head = evaluate_music(gen, tmp_path / "b", reference=ref, reference_bars=16)
    assert head["reference_bars"] == 16 and whole["reference_bars"] is None
    assert head["generated"] == whole["generated"]  # only the reference is cut
    n_whole, n_head = whole["reference_files"][0]["notes"], head["reference_files"][0]["notes"]
    assert 0 < n_head < n_whole


def test_cli_reference_bars_needs_a_reference(tmp_path, capsys):
    args = ["evaluate", "music", str(POP909 / "001"), "--reference-bars", "16", "--out"]
    assert main([*args, str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == "error: --reference-bars: needs --reference"


def test_cli_evaluate_music_missing_folder(tmp_path, capsys):
    assert main(["evaluate", "music", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nope" in err


# --- kernels and attention --------------------------------------------------------------------


def _load(path):
    from musicgen.checkpoint import load_checkpoint

    return load_checkpoint(path).model


def test_kernels_conv_vanish_beyond_filter_and_gate_mixes(run):
    model = _load(run[2]["conv_spe"])
    lags = np.arange(-20, 21)
    kern = positional_kernels(model, lags, layer=1)  # (L, H, D)
    delta = torch.sigmoid(model.blocks[1].attn.gate).detach().numpy()
    far = np.abs(lags) >= 16  # kernel_size 16: P is zero there, so (1 - delta) P + delta = delta
    np.testing.assert_allclose(kern[far], np.broadcast_to(delta, kern[far].shape), atol=1e-6)
    fq, fk = model.spe[0].filt_q.detach().numpy(), model.spe[0].filt_k.detach().numpy()
    p0 = (fq * fk).sum(-1)  # lag 0: the filters' inner product
    np.testing.assert_allclose(kern[20], (1 - delta) * p0 + delta, rtol=1e-5, atol=1e-6)


def test_kernels_sine_closed_form(run):
    model = _load(run[2]["sine_spe"])
    spe = model.spe[0]
    lags = np.array([0, 3, 50])
    kern = positional_kernels(model, lags, layer=0)
    f = (torch.sigmoid(spe.freq) / 2).detach().numpy()
    lam2 = F.softplus(spe.gain).detach().numpy() ** 2
    theta = spe.phase.detach().numpy()
    delta = torch.sigmoid(model.blocks[0].attn.gate).detach().numpy()
    for i, t in enumerate(lags):
        p = (lam2 * np.cos(2 * np.pi * f * t + theta)).sum(-1)
        np.testing.assert_allclose(kern[i], (1 - delta) * p + delta, rtol=1e-4, atol=1e-5)


def test_kernels_refuse_absolute_encoding(run):
    with pytest.raises(MusicgenError, match="no learned positional kernel"):
        positional_kernels(_load(run[2]["ape"]), np.arange(3))


@pytest.mark.parametrize("pe", ["ape", "sine_spe"])
def test_attention_maps_reproduce_the_layer_output(run, songs, pe):
    """A @ V through the output projection equals what the attention module returns."""
    model = _load(run[2][pe])
    ids = [int(i) for i in songs[1][:40]]
    attn = model.blocks[1].attn
    seen = {}
    h1 = attn.register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0]))
    h2 = attn.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out))
    maps = attention_maps(model, ids, layers=[1], heads=[0, 1], seed=3)
    h1.remove()
    h2.remove()
    a = np.stack([maps[(1, 0)], maps[(1, 1)]])  # (H, N, N)
    np.testing.assert_allclose(a.sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(a, k=1) == 0)
    x = seen["x"]
    n = x.shape[1]
    _, _, v = attn.qkv(x).view(1, n, 3, attn.n_heads, attn.head_dim).unbind(2)
    mixed = torch.einsum("hnm,mhd->nhd", torch.from_numpy(a).float(), v[0]).reshape(1, n, -1)
    with torch.no_grad():
        expected = attn.out(mixed)
    torch.testing.assert_close(expected, seen["out"], rtol=1e-3, atol=1e-4)


def test_attention_rejects_bad_layer(run, songs):
    with pytest.raises(MusicgenError, match="^layer: 5 is out of range"):
        attention_maps(_load(run[2]["ape"]), [1, 2, 3], layers=[5], heads=[0])


# --- figures ----------------------------------------------------------------------------------


def test_every_plot_is_a_png_of_the_fixed_size(tmp_path):
    rng = np.random.default_rng(0)
    paths = [
        plot_nll_curves(
            {"ape": [3, 2.5, 2.9], "conv": [3, 2.4, 2.4]}, 128, 256, tmp_path / "a.png"
        ),
        plot_style_boxes(
            {
                "time_pitch": [rng.random(5) for _ in range(4)],
                "onset_duration": [[], [0.5], [0.2, 0.3], [1.0]],
            },
            tmp_path / "b.png",
        ),
        plot_kernels({"head 0": rng.random((3, 9))}, np.arange(-4, 5), tmp_path / "c.png"),
        plot_attention({"l0 h0": np.tril(rng.random((6, 6)))}, tmp_path / "d.png"),
        plot_training_log(
            [{"kind": "train", "step": s, "loss": 4 - s / 50, "lr": 1e-4} for s in range(0, 100, 5)]
            + [{"kind": "val", "step": 50, "loss": 3}],
            tmp_path / "e.png",
        ),
        plot_music_stats(
            {"polyphony": [2, 3], "entropy": [float("nan")]}, None, tmp_path / "f.png"
        ),
    ]
    for p in paths:
        assert png_size(p) == (800, 500)


def test_cli_plot_log(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    lines = [
        json.dumps({"kind": "train", "step": s, "loss": 5 - s / 100, "lr": 2e-4})
        for s in range(0, 300, 10)
    ]
    lines.append(
        json.dumps(
            {
                "kind": "val",
                "step": 100,
                "loss": 3.0,
                "segment": 128,
                "loss_per_segment": [3.0, 3.1, None],
            }
        )
    )
    lines.append('{"kind": "train", "st')  # torn last line (crash mid-write)
    log.write_text("\n".join(lines))
    assert main(["plot", "log", str(tmp_path), "--out", str(tmp_path / "o")]) == 0
    assert png_size(tmp_path / "o" / "log.png") == (800, 500)
    assert png_size(tmp_path / "o" / "log_segments.png") == (800, 500)
    assert main(["plot", "log", str(tmp_path / "none")]) == 1
    assert "log.jsonl" in capsys.readouterr().err


def test_cli_plot_kernels_and_attention(run, tmp_path, capsys):
    _, _, ckpts = run
    out = tmp_path / "o"
    assert (
        main(
            [
                "plot",
                "kernels",
                "--checkpoint",
                str(ckpts["conv_spe"]),
                "--out",
                str(out),
                "--heads",
                "0",
                "1",
                "--features",
                "2",
            ]
        )
        == 0
    )
    assert png_size(out / "kernels.png") == (800, 500)
    saved = json.loads((out / "kernels.json").read_text())
    assert len(saved["lags"]) == 2 * 16 + 1 and len(saved["kernels"]["head 1"]) == 2
    midi = POP909 / "001" / "001.mid"
    assert (
        main(
            [
                "plot",
                "attention",
                "--checkpoint",
                str(ckpts["sine_spe"]),
                "--midi",
                str(midi),
                "--tokens",
                "48",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert png_size(out / "attention.png") == (800, 500)
    assert main(["plot", "kernels", "--checkpoint", str(ckpts["ape"]), "--out", str(out)]) == 1
    assert "no learned positional kernel" in capsys.readouterr().err


def test_nll_per_note_is_total_nll_over_the_notes_scored(run, remi):
    root, data, ckpts = run
    res = evaluate_nll([ckpts["ape"]], data, root / "per_note", max_songs=2, max_len=200)
    m = next(iter(res["models"].values()))
    total = sum(v * n for v, n in zip(m["per_segment"], m["tokens_per_segment"], strict=True))
    pitch = remi.tables.family == 5  # notes: a Pitch whose triple is complete in the first 201
    expected = 0
    for s in np.load(data / "validation" / "tokens.npy")[:600].reshape(2, 300)[:, :201]:
        idx = np.flatnonzero(pitch[s])
        expected += int(np.sum(idx + 2 < len(s)))
    assert m["notes"] == expected > 50
    assert m["nll_per_note"] == pytest.approx(total / expected, rel=1e-6)
    assert m["nll_per_note"] > m["mean_within"]  # a note takes ~3 tokens, and more


def test_evaluate_nll_split_all_scores_every_song(run, tmp_path, capsys):
    root, data, ckpts = run
    folder = tmp_path / "data"
    shutil.copytree(data, folder)
    shutil.copytree(data / "validation", folder / "train")  # train: the same three songs
    per = {
        s: evaluate_nll([ckpts["ape"]], folder, tmp_path / s, split=s)
        for s in ("train", "validation", "all")
    }
    assert per["all"]["songs"] == 6 and per["all"]["split"] == "all"
    m = {s: next(iter(r["models"].values())) for s, r in per.items()}
    assert m["all"]["notes"] == 2 * m["validation"]["notes"]
    assert m["all"]["nll_per_note"] == pytest.approx(m["validation"]["nll_per_note"], rel=1e-5)
    assert (
        main(
            [
                "evaluate",
                "nll",
                "--checkpoint",
                str(ckpts["ape"]),
                "--data",
                str(folder),
                "--split",
                "all",
                "--out",
                str(tmp_path / "cli"),
            ]
        )
        == 0
    )
    assert "per note = " in capsys.readouterr().out
    with pytest.raises(MusicgenError, match="split 'nope' not found"):
        evaluate_nll([ckpts["ape"]], folder, tmp_path / "x", split="nope")


def test_other_song_baseline_scores_each_song_against_the_next_ones_continuation():
    from musicgen.evaluate import other_song_baseline, segment_similarities

    # song A: quarter notes rising by 2; song B: long notes on the off-beats, rising by 7 (no
    # shared histogram bin with A); both continue past the 2-bar prompt (8 beats)
    a = make_notes(np.arange(0, 24.0), [0.25] * 24, [60 + 2 * (k % 2) for k in range(24)])
    b = make_notes(np.arange(2.5, 24, 4.0), [1.5] * 6, [60 + 7 * (k % 2) for k in range(6)])
    base = other_song_baseline([a, b], [a, b], 2, ("time_pitch", "onset_duration"))
    assert base["time_pitch"] == [[0.0, 0.0]] * 4 and base["onset_duration"] == [[0.0, 0.0]] * 4
    same = other_song_baseline([a, a], [a, a], 2, ("time_pitch",))  # = its own continuation
    own = [seg["time_pitch"] for seg in segment_similarities(a, a, 2, ("time_pitch",))]
    assert same["time_pitch"] == [[v, v] for v in own] and min(own) > 0.8
    assert other_song_baseline([a], [a], 2, ("time_pitch",)) == {"time_pitch": [[], [], [], []]}


def test_cli_evaluate_style_prints_the_other_song_baseline(run, tmp_path, capsys):
    root, data, ckpts = run
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    for n in ("004", "010"):
        (prompts / f"{n}.mid").write_bytes((POP909 / n / f"{n}.mid").read_bytes())
    assert (
        main(
            [
                "evaluate",
                "style",
                "--checkpoint",
                str(ckpts["ape"]),
                "--prompts",
                str(prompts),
                "--max-tokens",
                "160",
                "--samples",
                "1",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "time_pitch (true continuation): seg1" in out and "time_pitch (other song): seg1" in out
    assert "prompts kept: 2/2 as decoded, 2/2 in the written files" in out
    res = json.loads((tmp_path / "o" / "style.json").read_text())
    for seg in res["baseline_summary"]["time_pitch"]:
        assert seg["n"] == 2 and 0 <= seg["mean"] <= 1


def test_repeat_nll_marks_the_ids_of_a_bar_that_repeats(remi, songs):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "experiments"))
    from repeat_nll import repeat_mask, score

    from musicgen.tokenizers.remi_grammar import RemiTables

    split, tok = songs[0], remi
    bars = tok.bar_starts(split)[4:]  # bars with notes
    a, b = split[bars[0] : bars[1]], split[bars[1] : bars[2]]
    ids = np.concatenate([split[: bars[0]], a, b, a, split[bars[0] : bars[0] + 1]])  # A B A Bar
    fam = tok.tables.family[ids]
    scored = (fam == RemiTables.POSITION) | (fam == RemiTables.PITCH)
    mask = repeat_mask(ids, tok.bar_starts(ids), scored)
    third = slice(len(ids) - 1 - len(a), len(ids) - 1)
    assert (mask[third][scored[third]] == 1).all() and scored[third].any()
    assert (mask[: third.start][scored[: third.start]] == 0).all()
    assert (mask[~scored] == -1).all()
    # an untrained model gives both groups a probability; the counts are the mask's
    torch.manual_seed(0)
    model = build_model(tiny_config(tok.vocab_size).model).eval()
    r = score(model, tok, [ids])
    assert r["repeated_ids"] == int(scored[third].sum()) and 0 < r["p_true_repeated"] < 1
