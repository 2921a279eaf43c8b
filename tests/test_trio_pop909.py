"""The POP909 trio set (real piano, chord bass, tempo-matched drums) and the band measure: the
genre split, determinism, the parts of a built song, the measure on hand-made pieces, and
`musicgen evaluate music --band` end to end. Built from the bundled sources in
tests/data/trio_sources (POP909 songs with their annotations, a few Groove MIDI grooves)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import symusic
import test_trio as trio_tests
from paths import DATA, SHARED
from test_trio import files, read_meta

from musicgen.data.trio import SPLITS, drum_pool
from musicgen.data.trio_pop909 import build_pop909_trio, genre_of, split_drum_genres
from musicgen.errors import MusicgenError
from musicgen.evaluate.band import band_measures, band_summary, band_windows, folder_band

ROOT = Path(__file__).resolve().parents[1]
SOURCES = DATA / "trio_sources"
POP909, GROOVE = SOURCES / "pop909", SOURCES / "groove_drums"
SPLIT_KEYS = ("pop909_id", "drum_file", "drum_style", "drum_genre")


def assert_split_disjoint(rows: list[dict]) -> None:
    trio_tests.assert_split_disjoint(rows, SPLIT_KEYS)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trio") / "set"
    build_pop909_trio(POP909, GROOVE, out, seed=0, progress=False)
    return out


def test_split_keeps_test_genres_out_of_train(built):
    rows = read_meta(built)
    assert {r["split"] for r in rows} == set(SPLITS)
    assert_split_disjoint(rows)
    skipped = read_meta_file(built / "skipped.csv")
    assert [r["pop909_id"] for r in skipped] == ["034"]  # in 3/4
    assert "not in 4/4" in skipped[0]["reason"]
    assert len(rows) + len(skipped) == 11
    pool = drum_pool(GROOVE)
    split = split_drum_genres(pool, np.random.default_rng(0))
    assert set(split) == {genre_of(g) for g in pool}
    assert {split[g] for g in ("rock", "funk", "hiphop")} == {"train"}  # the most frequent
    for r in rows:  # every song's drums come from a genre of its own split
        assert split[r["drum_genre"]] == r["split"]


def read_meta_file(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_same_seed_same_bytes(built, tmp_path):
    build_pop909_trio(POP909, GROOVE, tmp_path / "again", seed=0, progress=False)
    assert files(tmp_path / "again") == files(built)
    build_pop909_trio(POP909, GROOVE, tmp_path / "other", seed=1, progress=False)
    assert files(tmp_path / "other") != files(built)
    # a song's file does not depend on which other songs were built
    build_pop909_trio(POP909, GROOVE, tmp_path / "few", seed=0, max_songs=4, progress=False)
    few = files(tmp_path / "few")
    assert sum(k.endswith(".mid") for k in few) == 3  # 034, the first, is in 3/4
    assert all(few[k] == files(built)[k] for k in few if k.endswith(".mid"))


def test_a_song_holds_its_piano_a_chord_bass_and_drums(built):
    row = next(r for r in read_meta(built) if r["pop909_id"] == "151")
    score = symusic.Score(str(built / row["song"]))
    assert [(t.name, t.program, t.is_drum) for t in score.tracks] == [
        ("Bass", 33, False),
        ("Drums", 0, True),
        ("Piano", 0, False),
    ]
    assert score.tpq == 12 and round(score.tempos[0].qpm) == int(row["tempo"])
    bars = int(row["bars"])
    assert score.end() <= bars * 48
    bass = score.tracks[0].notes
    assert {n.time for n in bass if n.time % 48 == 0} == set(range(0, bars * 48, 48))
    source = symusic.Score(str(POP909 / "151" / "151.mid"))
    real = Counter(n.pitch for t in source.tracks if t.name in ("BRIDGE", "PIANO") for n in t.notes)
    piano = Counter(n.pitch for n in score.tracks[2].notes)
    assert not piano - real  # the song's own accompaniment, never its melody's extra notes
    assert sum(piano.values()) > 0.8 * sum(real.values())
    assert all(n.time % 3 == 0 or n.time % 4 == 0 for n in score.tracks[2].notes)


def test_builder_bad_input(tmp_path):
    with pytest.raises(MusicgenError, match="POP909 folder not found"):
        build_pop909_trio(tmp_path / "nope", GROOVE, tmp_path / "out", progress=False)
    with pytest.raises(MusicgenError, match="info.csv not found"):
        build_pop909_trio(POP909, tmp_path, tmp_path / "out", progress=False)
    few = [g for g in drum_pool(GROOVE) if genre_of(g) in ("rock", "funk", "jazz", "pop")]
    with pytest.raises(MusicgenError, match="4 genres, need at least 5"):
        split_drum_genres(few, np.random.default_rng(0))


def band_piece(path: Path, piano_bars: tuple[int, ...]) -> Path:
    """4 bars at 480 ticks a beat: kick on every bar, snare on beat 3 of every bar, hi-hat eighths
    in bar 0 (16 hits, 3 pitches); a bass note held over bars 0-1 and one in bar 3; a piano
    quarter note at the start of each of `piano_bars`."""
    bar = 4 * 480
    score = symusic.Score(480)
    drums, bass, piano = (
        symusic.Track("Drums", 0, True),
        symusic.Track("Bass", 33, False),
        symusic.Track("Piano", 0, False),
    )
    for b in range(4):
        drums.notes.append(symusic.Note(b * bar, 60, 36, 90))
        drums.notes.append(symusic.Note(b * bar + 960, 60, 38, 90))
    for k in range(8):
        drums.notes.append(symusic.Note(k * 240, 60, 42, 70))
    bass.notes.append(symusic.Note(0, 2 * bar, 40, 90))
    bass.notes.append(symusic.Note(3 * bar, 480, 43, 90))
    for b in piano_bars:
        piano.notes.append(symusic.Note(b * bar, 480, 64, 80))
    for t in (bass, drums, piano):
        score.tracks.append(t)
    score.dump_midi(str(path))
    return path


def test_band_measure_on_hand_made_pieces(tmp_path):
    thin = band_measures(band_piece(tmp_path / "thin.mid", (0, 1)))
    assert thin == {
        "bars": 4,
        "drum_pitches": 3,
        "bass_bars": 0.75,
        "third_bars": 0.5,
        "longest_note_bars": 2.0,
        "drum_hits_per_bar": 4.0,
        "band": False,  # the piano plays in 2 bars of 4
    }
    full = band_measures(band_piece(tmp_path / "full.mid", (0, 1, 2)))
    assert full["third_bars"] == 0.75 and full["band"]
    head = band_measures(tmp_path / "thin.mid", bars=2)
    assert head == {
        "bars": 2,
        "drum_pitches": 3,
        "bass_bars": 1.0,
        "third_bars": 1.0,
        "longest_note_bars": 2.0,
        "drum_hits_per_bar": 6.0,
        "band": True,
    }
    windows = band_windows(tmp_path / "thin.mid", 2)
    assert [w["bass_bars"] for w in windows] == [1.0, 0.5]
    assert [w["drum_pitches"] for w in windows] == [3, 2]
    summary = band_summary([thin, full])
    assert summary["pieces"] == 2 and summary["band_share"] == 0.5
    assert summary["criteria"]["third_bars"] == 0.5
    assert summary["measures"]["third_bars"]["min"] == 0.5
    assert summary["measures"]["third_bars"]["max"] == 0.75


def test_band_folder_skips_a_bad_file(tmp_path):
    band_piece(tmp_path / "ok.mid", (0, 1, 2, 3))
    (tmp_path / "bad.mid").write_bytes(b"not midi")
    rows, skipped = folder_band(tmp_path)
    assert [Path(r["path"]).name for r in rows] == ["ok.mid"]
    assert Path(skipped[0]["path"]).name == "bad.mid" and "bad.mid" in skipped[0]["reason"]


def test_evaluate_music_band_cli(built, tmp_path):
    out = tmp_path / "eval"
    cmd = [sys.executable, "-m", "musicgen.cli", "evaluate", "music", str(built / "test")]
    cmd += ["--band", "--reference", str(built / "train"), "--reference-bars", "8"]
    cmd += ["--out", str(out)]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "plays as a band" in res.stdout and "drum_pitches" in res.stdout
    band = json.loads((out / "music.json").read_text())["band"]
    train = [r for r in read_meta(built) if r["split"] == "train"]
    assert band["reference"]["pieces"] == sum(int(r["bars"]) // 8 for r in train)
    assert band["generated"]["pieces"] == len(list((built / "test").glob("*.mid")))
    assert band["generated"]["band_share"] == 1.0  # the real songs play as a band
    assert set(band["generated"]["measures"]) == {
        "drum_pitches",
        "bass_bars",
        "third_bars",
        "longest_note_bars",
        "drum_hits_per_bar",
    }


@pytest.mark.shared
def test_full_build_numbers(tmp_path):
    rows, skipped = build_pop909_trio(
        SHARED / "pop909", SHARED / "groove_drums", tmp_path, progress=False
    )
    assert len(rows) + len(skipped) == 850
    assert all("not in 4/4" in s["reason"] for s in skipped)
    assert_split_disjoint([{k: str(v) for k, v in r.items()} for r in rows])
    counts = Counter(r["split"] for r in rows)
    assert counts["test"] >= 75 and counts["validation"] >= 75
