"""Chord tokens from POP909's chord_midi.txt: labels, timing, placement, prepare, transpose."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import symusic
from miditok.constants import CHORD_MAPS

from musicgen.data.prepare import prepare
from musicgen.errors import MusicgenError
from musicgen.tokenizers import build_tokenizer, load_tokenizer
from musicgen.tokenizers.chords import (
    ChordSpan,
    fold_quality,
    label_pitch_classes,
    parse_chord_text,
    read_chord_file,
    seconds_to_ticks,
)
from musicgen.tokenizers.remi import RemiTokenizer
from musicgen.tokenizers.remi_grammar import RemiTables

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "tests" / "data" / "pop909"
SONGS = sorted(BUNDLED.glob("*/*.mid"))
QUALITIES = RemiTokenizer().options["chord_qualities"]
MAPS = {q: CHORD_MAPS[q] for q in QUALITIES}


@pytest.fixture(scope="module")
def tok() -> RemiTokenizer:
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")


def chord_names(tok, ids) -> list[str]:
    return [tok.token_name(int(i)) for i in ids if tok.tables.family[int(i)] == RemiTables.CHORD]


def timed_chords(tok, ids) -> list[tuple[int, int, str]]:
    """(bar, position, chord name) of every Chord token, read back from the stream."""
    out, bar, pos = [], -1, -1
    for i in ids:
        name = tok.token_name(int(i))
        if name == "Bar_None":
            bar += 1
        elif name.startswith("Position_"):
            pos = int(name.split("_")[1])
        elif name.startswith("Chord_"):
            out.append((bar, pos, name.removeprefix("Chord_")))
    return out


def accepted(tok, ids) -> bool:
    g = tok.grammar()
    return all(g.advance(int(t)) for t in ids) and g.finished() and g.errors == 0


# --- labels --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "label, root, quality",
    [
        ("C:maj", 0, "maj"),
        ("A:min7", 9, "7min"),
        ("Bb:min", 10, "min"),
        ("C#:7", 1, "7dom"),
        ("F#:maj7/5", 6, "7maj"),  # inversion: root position, same root
        ("Eb:min/b3", 3, "min"),
        ("G:maj6", 7, "maj"),  # sixth folded onto the triad
        ("Ab:min6", 8, "min"),
        ("D:minmaj7", 2, "min"),
        ("B:sus4(b7)", 11, "sus4"),
        ("E:hdim7", 4, "7halfdim"),
        ("F:dim7", 5, "7dim"),
        ("A:aug", 9, "aug"),
        ("G:sus2", 7, "sus2"),
        ("D:dim", 2, "dim"),
        ("Cb:maj", 11, "maj"),
        ("E", 4, "maj"),
    ],
)
def test_labels_fold_onto_the_tokenizer_qualities(label, root, quality):
    r, intervals = label_pitch_classes(label)
    assert r == root and fold_quality(intervals, MAPS) == quality


def test_no_chord_and_unfittable_labels_write_nothing():
    assert label_pitch_classes("N") is None and label_pitch_classes("X") is None
    assert fold_quality(label_pitch_classes("C:5")[1], MAPS) is None  # a power chord: no triad
    assert label_pitch_classes("C:maj(*3)")[1] == frozenset({0, 7})
    # fewer qualities configured: a seventh keeps its triad
    assert fold_quality(label_pitch_classes("G:7")[1], {"maj": (0, 4, 7)}) == "maj"


@pytest.mark.parametrize(
    "text, words",
    [
        ("0.5\t1.0\n", "line 1: expected 'start end label'"),
        ("0.0\t1.0\tC:maj\nabc\t2.0\tC:maj\n", "line 2: expected"),
        ("2.0\t1.0\tC:maj\n", "line 1: bad time span"),
        ("0.0\t1.0\tH:maj\n", "line 1: chord label 'H:maj': not in Harte's syntax"),
        ("0.0\t1.0\tC:blues\n", "unknown quality 'blues'"),
        ("0.0\t1.0\tC:maj(b14)\n", "unknown degree 'b14'"),
    ],
)
def test_malformed_annotation_lines_are_one_line_errors(text, words):
    with pytest.raises(MusicgenError, match="^song/chord_midi.txt: ") as exc:
        parse_chord_text(text, "song/chord_midi.txt")
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_read_chord_file_of_a_real_song():
    spans = read_chord_file(BUNDLED / "001" / "chord_midi.txt")
    assert spans[0] == ChordSpan(0.055333, 0.721998, "N") and spans[4].label == "B:maj"
    with pytest.raises(MusicgenError, match="missing.txt: cannot read chord annotations"):
        read_chord_file(BUNDLED / "missing.txt")


# --- time ----------------------------------------------------------------------------------------


def test_seconds_to_ticks_follows_a_real_tempo_map():
    score = symusic.Score(str(BUNDLED / "471" / "471.mid"))  # 960 ticks/beat, 13 tempo changes
    assert len(score.tempos) == 13
    ticks = score.tracks[0].notes.numpy()["time"].astype(np.float64)
    seconds = score.to("second").tracks[0].notes.numpy()["time"]
    assert np.abs(seconds_to_ticks(score, seconds) - ticks).max() < 1.0


def test_seconds_to_ticks_without_tempo_is_120_bpm():
    score = symusic.Score(480)
    assert seconds_to_ticks(score, np.array([0.0, 0.5, 2.0])).tolist() == [0.0, 480.0, 1920.0]


# --- placement in the token stream --------------------------------------------------------------


def constructed_score() -> symusic.Score:
    """120 bpm, 480 ticks/beat: one note per beat for 2 bars (beat = 0.5 s, bar = 2 s)."""
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 120.0))
    track = symusic.Track(name="piano", program=0)
    for beat in range(8):
        track.notes.append(symusic.Note(beat * 480, 240, 60 + beat, 80))
    score.tracks.append(track)
    return score


def test_chords_sit_at_their_grid_positions_before_the_notes(tok):
    spans = [
        ChordSpan(0.0, 1.0, "C:maj"),
        ChordSpan(1.0, 1.375, "C:maj"),  # repeat: merged
        ChordSpan(1.375, 1.625, "A:min7"),  # 2.75 beats: position 11, where no note starts
        ChordSpan(1.625, 2.0, "D:min"),  # 3.25 beats: position 13
        ChordSpan(2.0, 2.5, "N"),
        ChordSpan(2.5, 3.0, "D:min"),  # N ends it: written again
        ChordSpan(3.0, 3.5, "C:5"),  # no quality fits: dropped, and it ends D:min too
        ChordSpan(3.5, 4.0, "D:min"),
        ChordSpan(9.0, 10.0, "G:7"),  # bar 4, after the last bar: left out
    ]
    ids = tok.encode(constructed_score(), chords=spans)
    assert timed_chords(tok, ids) == [
        (0, 0, "C:maj"),
        (0, 11, "A:7min"),
        (0, 13, "D:min"),
        (1, 4, "D:min"),
        (1, 12, "D:min"),
    ]
    assert accepted(tok, ids)
    names = [tok.token_name(i) for i in ids]
    at11 = names.index("Chord_A:7min")  # a Position of its own, between the notes' positions
    assert names[at11 - 1] == "Position_11" and names[at11 + 1] == "Position_12"
    first = names.index("Chord_C:maj")  # after Position_0 and the Tempo, before the first note
    assert names[first - 2 : first] == ["Position_0", "Tempo_119.0"]
    assert names[first + 1].startswith("Pitch_")
    # the notes are exactly those of the plain encoding
    plain = tok.decode(tok.encode(constructed_score()))
    assert tok.decode(ids).tracks[0].notes == plain.tracks[0].notes


def test_two_changes_on_one_position_keep_the_later(tok):
    spans = [
        ChordSpan(0.0, 0.02, "C:maj"),
        ChordSpan(0.02, 0.5, "G:maj"),  # both on position 0
        ChordSpan(0.5, 0.53, "E:min"),
        ChordSpan(0.53, 2.0, "G:maj"),
    ]  # E:min on 4, then G
    ids = tok.encode(constructed_score(), chords=spans)
    assert timed_chords(tok, ids) == [(0, 0, "G:maj")]  # 0.53 s rounds onto position 4 too


def test_annotated_chords_follow_the_tempo_map_of_real_songs(tok):
    for song in SONGS:
        spans = read_chord_file(song.parent / "chord_midi.txt")
        score = tok.load_score(song)
        ids = tok.encode(song, chords=spans)
        assert accepted(tok, ids), song
        plain = tok.encode(song)
        assert tok.decode(ids).tracks[0].notes == tok.decode(plain).tracks[0].notes
        # every annotated change sits where its start second falls on the 16-per-bar grid
        got = timed_chords(tok, ids)
        ticks = seconds_to_ticks(score, np.array([s.start for s in spans]))
        grid = np.floor(ticks * 4 / score.ticks_per_quarter + 0.5).astype(int)
        last_bar = int(np.sum(np.asarray(ids) == tok.bar_id)) - 1
        starts = {
            (int(g) // 16, int(g) % 16)
            for g, s in zip(grid, spans, strict=True)
            if s.label != "N" and int(g) // 16 <= last_bar
        }
        assert {(b, p) for b, p, _ in got} <= starts
        assert len(got) > 5 * len(chord_names(tok, plain)), song  # many more than detection


def test_transposition_moves_annotated_chords(tok):
    song = SONGS[0]
    ids = np.asarray(tok.encode(song, chords=read_chord_file(song.parent / "chord_midi.txt")))
    moved = tok.transpose(ids, 3)
    before, after = timed_chords(tok, ids), timed_chords(tok, moved)
    pcs = ["C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B"]
    assert len(after) == len(before) > 50
    for (b, p, name), (b2, p2, name2) in zip(before, after, strict=True):
        root, quality = name.split(":")
        assert (b2, p2) == (b, p) and name2 == f"{pcs[(pcs.index(root) + 3) % 12]}:{quality}"
    assert accepted(tok, moved)


# --- prepare -------------------------------------------------------------------------------------


def copy_with_chords(dst: Path) -> None:
    for song in SONGS:
        (dst / song.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(song, dst / song.parent.name / song.name)
        shutil.copy(song.parent / "chord_midi.txt", dst / song.parent.name / "chord_midi.txt")


def prepared_songs(out: Path) -> dict[str, np.ndarray]:
    import json

    from musicgen.data.dataset import PreparedSplit

    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    songs, index = {}, {}
    for m in manifest:
        split = PreparedSplit(out, m["split"])
        k = index.get(m["split"], 0)
        songs[m["path"]] = np.asarray(split[k])
        index[m["split"]] = k + 1
    return songs


def test_prepare_pop909_writes_the_annotated_chords(tmp_path):
    inp, out = tmp_path / "in", tmp_path / "out"
    copy_with_chords(inp)
    summary = prepare("pop909", inp, out, workers=1)
    assert summary["songs"] == len(SONGS)
    tok = load_tokenizer(out)
    for rel, ids in prepared_songs(out).items():
        spans = read_chord_file(inp / rel.split("/")[0] / "chord_midi.txt")
        assert ids.tolist() == tok.encode(inp / rel, chords=spans)
        assert accepted(tok, ids)
    # another dataset kind keeps miditok's detection, even with the file present
    prepare("folder", inp, tmp_path / "folder", workers=1)
    for rel, ids in prepared_songs(tmp_path / "folder").items():
        assert ids.tolist() == tok.encode(inp / rel)
    # an edited annotation invalidates the cache entry of that song only
    ann = inp / "005" / "chord_midi.txt"
    ann.write_text(ann.read_text() + "500.0\t501.0\tC:maj\n")
    assert prepare("pop909", inp, out, workers=1)["reused"] == len(SONGS) - 1


def test_prepare_skips_a_song_whose_annotation_is_broken(tmp_path):
    inp, out = tmp_path / "in", tmp_path / "out"
    copy_with_chords(inp)
    (inp / "100" / "chord_midi.txt").write_text("0.0\t1.0\tC:maj\n1.0\t2.0\tQ:min\n")
    summary = prepare("pop909", inp, out, workers=1)
    assert summary["songs"] == len(SONGS) - 1 and summary["skipped"] == 1
    reason = (out / "skipped.csv").read_text()
    assert "100/100.mid" in reason and "chord_midi.txt: line 2: chord label 'Q:min'" in reason


@pytest.mark.slow
def test_grammar_accepts_all_of_pop909_with_annotated_chords(tok):
    shared = ROOT.parent / "shared" / "data" / "pop909"
    folders = sorted(p for p in shared.glob("[0-9]*") if (p / "chord_midi.txt").is_file())
    if len(folders) < 850:
        pytest.skip("shared POP909 data not available")
    for d in folders:
        ids = tok.encode(d / f"{d.name}.mid", chords=read_chord_file(d / "chord_midi.txt"))
        assert accepted(tok, ids), d
