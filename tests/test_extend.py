"""Extending a piece from its end (issue 65): the whole file, then N new bars, through the API
and `musicgen continue --extend`; what extending refuses, in one line."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pretty_midi
import pytest
import symusic
from paths import ROOT

import musicgen
from musicgen.cli import main
from musicgen.errors import MusicgenError
from musicgen.generation.api.prompt import encode_song

SONG = ROOT / "data" / "demo" / "pop909_005.mid"
SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"


@pytest.fixture(scope="module")
def song_model(tmp_path_factory):
    """A tiny untrained REMI model with a melody voice and section tokens."""
    from conftest import make_checkpoint

    return musicgen.load(make_checkpoint(tmp_path_factory.mktemp("ext"), str(SONG_TOKENS)))


def notes(track) -> list[tuple[int, int, int, int]]:
    return [(n.time, n.duration, n.pitch, n.velocity) for n in track.notes]


def bar_count(model, path: Path) -> int:
    """The bars our own reader finds in a file."""
    ids = encode_song(model.tokenizer, path)
    return len(model.tokenizer.bar_starts(np.asarray(ids)))


def check_whole(model, path: Path, new_bars: int) -> symusic.Score:
    """The written file: the original's notes, tracks and markers unchanged, new notes only in
    the new bars, the bar count the original's plus `new_bars`; read by pretty_midi too."""
    before, after = symusic.Score(str(SONG)), symusic.Score(str(path))
    old_bars = bar_count(model, SONG)
    assert [t.name for t in after.tracks] == [t.name for t in before.tracks]
    bar = 4 * after.ticks_per_quarter
    assert after.ticks_per_quarter == before.ticks_per_quarter
    for old, new in zip(before.tracks, after.tracks, strict=True):
        kept = notes(new)[: len(old.notes)]
        assert kept == notes(old)
        added = notes(new)[len(old.notes) :]
        assert all(old_bars <= t // bar < old_bars + new_bars for t, *_ in added)
    assert bar_count(model, path) == old_bars + new_bars
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pretty_midi.PrettyMIDI(str(path))
    return after


def test_extend_writes_the_whole_piece_then_the_new_bars(song_model, tmp_path):
    music = song_model.continue_midi(SONG, extend=True, new_bars=4, seed=1)
    after = check_whole(song_model, music.save(tmp_path / "x.mid"), 4)
    before = symusic.Score(str(SONG))
    assert len(after.tempos) == len(before.tempos)  # the file's own tempo map, kept
    again = song_model.continue_midi(tmp_path / "x.mid", extend=True, new_bars=2, seed=2)
    assert len(again.score.tracks) == len(before.tracks)  # extended again: no track added


def test_extend_with_a_form_names_the_new_sections(song_model, tmp_path):
    music = song_model.continue_midi(SONG, extend=True, form="A2B2", seed=3)
    after = check_whole(song_model, music.save(tmp_path / "f.mid"), 4)
    bar = 4 * after.ticks_per_quarter
    old = bar_count(song_model, SONG)
    phrases = [(m.time // bar, m.text) for m in after.markers if not m.text.startswith("Chord ")]
    assert phrases == [(old, "A2"), (old + 2, "B2")]
    again = song_model.continue_midi(tmp_path / "f.mid", extend=True, new_bars=1, seed=4)
    assert [(m.time, m.text) for m in again.score.markers][: len(after.markers)] == [
        (m.time, m.text) for m in after.markers
    ]  # the file's markers, phrases and chords, kept


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"bars": 2}, "bars: not with extend"),
        ({"prompt_bars": (0, 2)}, "prompt_bars: not with extend"),
        ({"seconds": 2.0}, "seconds: not with extend"),
        ({"only_continuation": True}, "only_continuation: not with extend"),
        ({"new_bars": None}, "new_bars: extend needs"),
        ({"extend": "yes"}, "extend: must be True or False"),
    ],
)
def test_extend_refuses_in_one_line(song_model, given, message):
    fields = {"extend": True, "new_bars": 2, "seed": 1} | given
    with pytest.raises(MusicgenError, match=message) as err:
        song_model.continue_midi(SONG, **fields)
    assert "\n" not in str(err.value)


def test_extend_needs_a_remi_model(tiny_checkpoints):
    groove = musicgen.load(tiny_checkpoints["groove"])
    with pytest.raises(MusicgenError, match="extend: needs a REMI model"):
        groove.continue_midi(SONG, extend=True, new_bars=2, seed=1)


def test_cli_extend(song_model, tmp_path, capsys):
    base = ["continue", "--checkpoint", str(song_model.source), "--prompt", str(SONG), "--out",
            str(tmp_path), "--seed", "1", "--num", "1", "--device", "cpu", "--extend"]  # fmt: skip
    assert main([*base, "--new-bars", "2"]) == 0
    (written,) = tmp_path.glob("*.mid")
    check_whole(song_model, written, 2)
    assert main([*base, "--new-bars", "2", "--prompt-bars", "0:2"]) == 1
    err = capsys.readouterr().err
    assert "--prompt-bars: not with extend" in err and "Traceback" not in err
