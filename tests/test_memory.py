"""`musicgen evaluate memory`: its sequences, and its ratio on models whose memory is known."""

import json
import shutil

import numpy as np
import pytest
from paths import DATA, ROOT

from musicgen.cli import main
from musicgen.errors import MusicgenError
from musicgen.evaluate.memory import (
    make_probes,
    mean_ci,
    probe_song,
    read_song,
    song_probes,
    summarize,
)
from musicgen.tokenizers import build_tokenizer

SONG = DATA / "pop909" / "001" / "001.mid"


def copier(ids: np.ndarray, n: int = 6) -> np.ndarray:
    """A model that copies: a token that ends an n-gram heard before costs 0.05 nats, else 2."""
    seen, out = set(), np.full(len(ids) - 1, 2.0)
    for p in range(1, len(ids)):
        gram = tuple(ids[max(0, p - n + 1) : p + 1])
        if len(gram) == n and gram in seen:
            out[p - 1] = 0.05
        seen.add(gram)
    return out


def forgetter(ids: np.ndarray) -> np.ndarray:
    """A model with no memory: a token's NLL depends on the token alone."""
    return 1.0 + (np.asarray(ids[1:]) % 7) / 7.0


@pytest.fixture(scope="module")
def song():
    tok = build_tokenizer(str(ROOT / "configs" / "tokenizer" / "remi_song.yaml"))
    return tok, read_song(tok, SONG, DATA / "pop909_structure")


def test_probe_returns_the_passage_after_the_song_bars_that_precede_it():
    ids = np.arange(100, 160)  # 1 head token, then 12 bars of 5 tokens
    ids[0] = 1
    starts = np.arange(1, 60, 5)
    p = make_probes(ids, starts, first=1, bars=2, gaps=[0, 3, 8])
    assert sorted(p.probes) == [0, 3]  # 2 + 2 + 8 bars from bar 1 do not fit in 12
    seq = p.probes[3]
    q = ids[starts[6] : starts[8]]  # bars 6-7: after bars 1-2 and the 3 gap bars 3-5
    assert seq[0] == 1 and np.array_equal(seq[slice(*p.first[3])], q)
    assert np.array_equal(seq[slice(*p.back[3])], q)
    assert np.array_equal(p.controls[3][slice(*p.alone[3])], q)
    assert np.array_equal(seq[p.first[3][1] : p.back[3][0]], ids[starts[3] : starts[6]])
    assert np.array_equal(p.controls[3], np.concatenate([[1], ids[starts[1] : starts[8]]]))
    assert make_probes(ids, starts, first=1, bars=8, gaps=[0]) is None


def test_a_model_that_copies_scores_far_below_one_and_one_without_memory_scores_one(song):
    tok, ids = song
    assert tok.token_name(int(ids[-1])) != "EOS_None"
    p = song_probes(tok, ids, 8, [0, 16, 32], "001")
    assert sorted(p.probes) == [0, 16, 32]
    copied, forgot = probe_song(copier, p), probe_song(forgetter, p)
    for g in (0, 16, 32):
        assert copied[g]["ratio"] < 0.3, copied[g]
        assert forgot[g]["ratio"] == pytest.approx(1.0)
        assert copied[g]["nll_return"] == pytest.approx(0.05, abs=0.1)


def test_a_phrase_probe_brings_a_whole_phrase_back_after_the_bars_before_it(song):
    tok, ids = song
    p = song_probes(tok, ids, 8, [0, 16], "001", phrases=True)
    for g in (0, 16):
        seq, bars = p.probes[g], p.bars[g]
        q = seq[slice(*p.back[g])]
        assert np.array_equal(seq[slice(*p.first[g])], q)
        assert np.array_equal(p.controls[g][slice(*p.alone[g])], q)
        phrase = tok.sections(q)
        assert [(s.bar, s.bars) for s in phrase] == [(0, bars)] and 4 <= bars <= 8
        gap = seq[p.first[g][1] : p.back[g][0]]
        assert len(tok.bar_starts(gap)) == g
    copied, forgot = probe_song(copier, p), probe_song(forgetter, p)
    assert all(copied[g]["ratio"] < 0.3 and forgot[g]["ratio"] == pytest.approx(1.0)
               for g in (0, 16))  # fmt: skip


def test_the_song_is_read_with_its_phrases_as_training_read_it(song):
    tok, ids = song
    names = {tok.token_name(int(i)).split("_")[0] for i in ids}
    assert {"Section", "SectionBars", "MelodyPitch", "Chord"} <= names


def test_summary_counts_the_songs_too_short_for_a_gap():
    rows = {"a": {0: {"ratio": 0.5, "vs_first": 0.4, "nll_alone": 2, "nll_return": 1,
                      "nll_first": 2.5}},
            "b": {0: {"ratio": 0.7, "vs_first": 0.6, "nll_alone": 2, "nll_return": 1.4,
                      "nll_first": 2.3}, 16: {"ratio": 0.9, "vs_first": 0.8, "nll_alone": 2,
                                              "nll_return": 1.8, "nll_first": 2.2}},
            "c": {}}  # fmt: skip
    s = summarize(rows, [0, 16])
    assert (s["0"]["songs"], s["0"]["too_short"]) == (2, 1)
    assert (s["16"]["songs"], s["16"]["too_short"]) == (1, 2)
    assert s["0"]["ratio"]["mean"] == pytest.approx(0.6)
    ci = mean_ci([0.5, 0.7, 0.6, 0.65])
    assert ci["low"] <= ci["mean"] <= ci["high"] and ci["n"] == 4


def test_evaluate_memory_writes_json_through_the_public_scoring_path(tmp_path, capsys):
    data = tmp_path / "pop909"
    shutil.copytree(DATA / "pop909" / "001", data / "001")
    (data / "002").mkdir()
    (data / "002" / "002.mid").write_bytes(b"not midi")  # listed in `skipped`, not fatal
    out = tmp_path / "eval"
    argv = ["evaluate", "memory", "--checkpoint", "pop909_piano_sine_spe_gated", "--data",
            str(data), "--split", "train", "--passage-bars", "2", "--gaps", "0", "70",
            "--device", "cpu", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    res = json.loads((out / "memory.json").read_text())
    assert res["gap_summary"]["0"]["songs"] == 1
    assert res["gap_summary"]["70"] == {**res["gap_summary"]["70"], "songs": 0, "too_short": 1}
    assert 0 < res["per_song"]["001"]["0"]["ratio"] < 2
    assert [s["song"] for s in res["skipped"]] == ["002"]
    assert "return / alone" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags, named",
    [(["--gaps", "-1"], "--gaps"), (["--passage-bars", "0"], "--passage-bars"),
     (["--max-songs", "0"], "--max-songs"), (["--split", "dev"], "split"),
     (["--structure", "/nonexistent"], "/nonexistent"), (["--phrases"], "--phrases")],
)  # fmt: skip
def test_bad_options_are_one_line_errors_naming_them(flags, named, capsys):
    argv = ["evaluate", "memory", "--checkpoint", "pop909_ape", "--data", str(DATA / "pop909")]
    assert main(argv + flags) == 1
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1


def test_a_missing_data_folder_is_named(tmp_path):
    from musicgen.evaluate.memory import evaluate_memory

    with pytest.raises(MusicgenError, match="missing"):
        evaluate_memory("pop909_ape", tmp_path / "missing", tmp_path / "out")
