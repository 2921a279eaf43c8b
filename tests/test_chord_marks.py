"""The chords of a written piece as MIDI markers ("Chord Am"), one per chord change, moved with
a transposition, kept when a piece is extended, never read as phrases."""

from __future__ import annotations

import warnings

import mido
import pretty_midi
import pytest
from paths import ROOT

import musicgen
from musicgen.generation.api.chord_marks import CHORD_MARK, chord_symbol, phrase_marks
from musicgen.tokenizers.form import read_markers

SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"


@pytest.fixture(scope="module")
def song_model(tmp_path_factory):
    from conftest import make_checkpoint

    return musicgen.load(make_checkpoint(tmp_path_factory.mktemp("marks"), str(SONG_TOKENS)))


@pytest.mark.parametrize(
    ("label", "moved", "symbol"),
    [("A:min", 0, "Am"), ("C#:7dom", 0, "C#7"), ("D#:7min", 0, "Ebm7"), ("A:7halfdim", 0, "Am7b5"),
     ("B:7dim", 0, "Bdim7"), ("G:maj", 3, "Bb"), ("A#:sus4", 2, "Csus4"), ("N", 0, "N")],
)  # fmt: skip
def test_chord_symbols_are_spelled_one_way(label, moved, symbol):
    assert chord_symbol(label, moved) == symbol


def chord_marks(score) -> list[tuple[int, str]]:
    bar = 4 * score.ticks_per_quarter
    return [(m.time // bar, m.text) for m in score.markers if m.text.startswith(CHORD_MARK)]


def test_forced_chords_are_written_one_marker_per_change(song_model, tmp_path):
    piece = song_model.generate(bars=4, seed=1, chords="C C G7 Am")
    assert chord_marks(piece.score) == [(0, "Chord C"), (2, "Chord G7"), (3, "Chord Am")]
    path = piece.save(tmp_path / "c.mid")
    texts = [m.text for t in mido.MidiFile(path).tracks for m in t if m.type == "marker"]
    assert [t for t in texts if t.startswith(CHORD_MARK)] == ["Chord C", "Chord G7", "Chord Am"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pretty_midi.PrettyMIDI(str(path))
    phrases = [f"{s.label}{s.bars}" for s in read_markers(piece.score)]
    assert phrases == phrase_marks(piece.score)  # "Chord G7" is no 7-bar phrase G
    assert song_model.prompt(path, prompt_bars=(0, 4)).bars == 4  # our own reader reads it


def test_transposed_chords_move_with_the_notes(song_model):
    piece = song_model.generate(bars=4, seed=1, chords="C G7 Am F", transpose=-2)
    names = [t for _, t in chord_marks(piece.score)]
    assert names == ["Chord Bb", "Chord F7", "Chord Gm", "Chord Eb"]


def test_extending_keeps_the_chord_and_phrase_markers(song_model, tmp_path):
    made = song_model.generate(form="A2B2", chords="A: C G; B: Am F", seed=2)
    path = made.save(tmp_path / "song.mid")
    longer = song_model.continue_midi(path, extend=True, new_bars=2, seed=3)
    before = [(m.time, m.text) for m in made.score.markers]
    assert [(m.time, m.text) for m in longer.score.markers][: len(before)] == before
    assert phrase_marks(longer.score)[:2] == ["A2", "B2"]


def test_a_continuation_keeps_its_prompt_files_chord_markers(song_model, tmp_path):
    made = song_model.generate(bars=4, seed=4, chords="Bb Gm7 Ebmaj7 F")
    path = made.save(tmp_path / "song.mid")
    for prompt in ({"bars": 1}, {"prompt_bars": (0, 2)}):
        longer = song_model.continue_midi(path, **prompt, new_bars=2, seed=5)
        held = song_model.prompt(path, **prompt).bars
        kept = [(b, t) for b, t in chord_marks(longer.score) if b < held]
        assert kept == [(b, t) for b, t in chord_marks(made.score) if b < held]
    moved = song_model.continue_midi(path, prompt_bars=(1, 3), new_bars=1, seed=5)
    assert chord_marks(moved.score)[:2] == [(0, "Chord Gm7"), (1, "Chord Ebmaj7")]


def test_the_new_parts_first_chord_is_marked_where_it_goes_on(song_model, tmp_path):
    made = song_model.generate(bars=2, seed=6, chords="C")
    assert [t for _, t in chord_marks(made.score)] == ["Chord C"]  # held over both bars: one
    path = made.save(tmp_path / "c.mid")
    longer = song_model.continue_midi(path, extend=True, new_bars=1, chords="C", seed=1)
    marks = chord_marks(longer.score)
    assert [t for _, t in marks] == ["Chord C", "Chord C"] and marks[1][0] > 0
