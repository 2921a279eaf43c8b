"""The synthetic trio builder: determinism, the style split, the shipped files, chord parsing,
and `musicgen prepare` over the shipped dataset."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import symusic
from paths import SHARED

from musicgen.data.trio import build_trio, chart_of, drum_pool, split_drum_styles
from musicgen.data.trio_patterns import Chord, parse_chord
from musicgen.errors import MusicgenError

ROOT = Path(__file__).resolve().parents[1]
POP909, GROOVE = SHARED / "pop909", SHARED / "groove_drums"
TRIO = ROOT / "data" / "trio"
SPLITS = ("train", "validation", "test")
STYLE_KEYS = ("drum_file", "drum_style", "bass_pattern", "accomp_pattern", "pop909_id")


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def read_meta(root: Path) -> list[dict]:
    with open(root / "metadata.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def assert_split_disjoint(rows: list[dict], keys: tuple[str, ...] = STYLE_KEYS) -> None:
    for key in keys:
        sets = {s: {r[key] for r in rows if r["split"] == s} for s in SPLITS}
        assert not sets["train"] & sets["test"], key
        assert not sets["train"] & sets["validation"], key
        assert not sets["validation"] & sets["test"], key


@pytest.mark.shared
def test_builder_is_deterministic(tmp_path):
    kw = {"n_songs": 9, "seed": 7, "min_bars": 16, "max_bars": 20, "progress": False}
    rows_a = build_trio(POP909, GROOVE, tmp_path / "a", **kw)
    rows_b = build_trio(POP909, GROOVE, tmp_path / "b", **kw)
    a, b = files(tmp_path / "a"), files(tmp_path / "b")
    assert rows_a == rows_b and a == b and len(a) == 10  # 9 songs + metadata.csv
    assert {r["split"] for r in rows_a} == {"train", "validation", "test"}
    assert_split_disjoint(rows_a)
    other = files_of_seed(tmp_path / "c", 8)
    assert other != a


def files_of_seed(out: Path, seed: int) -> dict[str, bytes]:
    build_trio(POP909, GROOVE, out, n_songs=9, seed=seed, max_bars=20, progress=False)
    return files(out)


def holds_sus4_seventh(row: dict) -> bool:
    """Whether a trio song's chart window (its metadata row) holds a POP909 `sus4(b7)`."""
    chords, _ = chart_of(POP909 / row["pop909_id"])
    start, bars = int(row["start_bar"]), int(row["bars"])
    return any(
        c is not None and c.intervals == (0, 5, 7, 10) for c in chords[start * 4 :][: bars * 4]
    )


@pytest.mark.shared
def test_shipped_dataset_is_reproduced_but_for_the_sus4_sevenths(tmp_path):
    """data/trio predates the one Harte parser (its README): a rebuild matches every file but the
    58 songs whose chart holds a sus4(b7), whose Piano track now voices the seventh."""
    build_trio(POP909, GROOVE, tmp_path, progress=False)  # the defaults shipped in data/trio
    shipped = {k: v for k, v in files(TRIO).items() if k != "README.md"}
    rebuilt = files(tmp_path)
    assert rebuilt.keys() == shipped.keys()
    differ = {k for k in shipped if rebuilt[k] != shipped[k]}
    assert len(differ) == 58 and "metadata.csv" not in differ
    assert differ <= {r["song"] for r in read_meta(TRIO) if holds_sus4_seventh(r)}
    for name in sorted(differ):
        old, new = symusic.Score(str(TRIO / name)), symusic.Score(str(tmp_path / name))
        assert [t.notes for t in old.tracks[:2]] == [t.notes for t in new.tracks[:2]]  # bass, drums
        assert old.tracks[2].notes != new.tracks[2].notes


def test_shipped_dataset_matches_its_metadata():
    rows = read_meta(TRIO)
    assert len(rows) == 300
    assert [sum(r["split"] == s for r in rows) for s in ("train", "validation", "test")] == [
        240,
        30,
        30,
    ]
    assert_split_disjoint(rows)
    total = sum(p.stat().st_size for p in TRIO.rglob("*") if p.is_file())
    assert total < 3 * 2**20
    assert "CC BY 4.0" in (TRIO / "README.md").read_text()
    for r in rows[::25]:
        score = symusic.Score(str(TRIO / r["song"]))
        assert [(t.name, t.program, t.is_drum) for t in score.tracks] == [
            ("Bass", 33, False),
            ("Drums", 0, True),
            ("Piano", 0, False),
        ]
        assert all(len(t.notes) > 0 for t in score.tracks)
        assert round(score.tempos[0].qpm) == int(r["tempo"])
        assert 16 <= int(r["bars"]) <= 48
        assert score.end() == int(r["bars"]) * 4 * score.tpq  # the last note ends on the bar line
        assert min(t.notes[0].time for t in score.tracks) == 0
    by_style: dict[str, set] = {}
    for r in rows:  # a style keeps its drum groove, patterns and tempo for every song
        by_style.setdefault(r["bass_pattern"], set()).add(
            (r["drum_file"], r["accomp_pattern"], r["tempo"])
        )
    assert all(len(v) == 1 for v in by_style.values())
    assert len({r["pop909_id"] for r in rows}) == len(rows)  # each POP909 chart used once


@pytest.mark.shared
def test_drum_style_labels_split_whole():
    pool = drum_pool(GROOVE)
    split = split_drum_styles(pool, np.random.default_rng(0))
    assert set(split) == {g.style for g in pool}
    assert split["rock"] == "train"  # the most frequent labels always train
    assert {"test", "validation"} <= set(split.values())


def test_chord_parsing():
    assert parse_chord("C#:min7") == Chord(1, (0, 3, 7, 10), 1)
    assert parse_chord("G:maj/3") == Chord(7, (0, 4, 7), 11)
    assert parse_chord("Bb:min/b3") == Chord(10, (0, 3, 7), 1)
    assert parse_chord("Ab:hdim7") == Chord(8, (0, 3, 6, 10), 8)
    assert parse_chord("E:minmaj7") == Chord(4, (0, 3, 7, 11), 4)
    assert parse_chord("N") is None and parse_chord("X:maj") is None
    # the one Harte parser: added degrees are voiced, a ninth chord holds its ninth
    assert parse_chord("G:sus4(b7)") == Chord(7, (0, 5, 7, 10), 7)
    assert parse_chord("C:9") == Chord(0, (0, 4, 7, 10, 2), 0)
    assert parse_chord("D:min9/b7") == Chord(2, (0, 3, 7, 10, 2), 0)


@pytest.mark.shared
def test_builder_bad_input(tmp_path):
    with pytest.raises(MusicgenError, match="POP909 folder not found"):
        build_trio(tmp_path / "nope", GROOVE, tmp_path / "out", n_songs=3, progress=False)
    with pytest.raises(MusicgenError, match="info.csv not found"):
        build_trio(POP909, tmp_path, tmp_path / "out", n_songs=3, progress=False)


def test_prepare_cli_on_trio_subset(tmp_path):
    """`musicgen prepare --dataset groove` on a copy of 4 shipped songs per split (kept small for
    speed); the folders give the splits."""
    subset = tmp_path / "trio"
    for split in SPLITS:
        (subset / split).mkdir(parents=True)
        for p in sorted((TRIO / split).glob("*.mid"))[:4]:
            shutil.copy(p, subset / split / p.name)
    out = tmp_path / "prepared"
    cmd = [
        sys.executable,
        "-m",
        "musicgen.cli",
        "prepare",
        "--dataset",
        "groove",
        "--tokenizer",
        "groove",
        "--input",
        str(subset),
        "--output",
        str(out),
    ]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    from musicgen.data.dataset import PreparedSplit

    sizes = {s: len(PreparedSplit(out, s)) for s in ("train", "validation", "test")}
    assert sizes == {"train": 4, "validation": 4, "test": 4}
    split = PreparedSplit(out, "test")
    tok = split.tokenizer
    assert tok.name == "groove" and tok.vocab_size == 795
    ids = split[0]
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    g = tok.grammar()
    assert all(g.advance(int(i)) for i in ids) and g.finished()
