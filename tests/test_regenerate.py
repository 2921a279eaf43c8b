"""Regenerating bars or a section of a piece: the bars before as the prompt, the bars after kept,
the piece written whole; refusals in one line."""

from __future__ import annotations

import warnings

import pretty_midi
import pytest
import symusic
from paths import ROOT

import musicgen
from musicgen.cli import main
from musicgen.errors import MusicgenError
from musicgen.generation.api.chord_marks import CHORD_MARK, phrase_marks

SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"


@pytest.fixture(scope="module")
def song(tmp_path_factory):
    """A tiny untrained song model and a 6-bar song it wrote in the form A2B2A2."""
    from conftest import make_checkpoint

    folder = tmp_path_factory.mktemp("regen")
    model = musicgen.load(make_checkpoint(folder, str(SONG_TOKENS)))
    made = model.generate(form="A2B2A2", chords="A: C G; B: Am F", seed=2)
    return model, made.save(folder / "song.mid")


def outside(score: symusic.Score, a: int, b: int) -> list[set]:
    """Each track's notes that start outside bars a..b-1 (durations aside: a note sounding
    into the section is cut at its first bar)."""
    bar = 4 * score.ticks_per_quarter
    return [{(n.time, n.pitch, n.velocity) for n in t.notes if not a * bar <= n.time < b * bar}
            for t in score.tracks]  # fmt: skip


def check_section(path, music, a: int, b: int) -> None:
    before = symusic.Score(str(path))
    after = music.score
    bar = 4 * after.ticks_per_quarter
    assert [t.name for t in after.tracks] == [t.name for t in before.tracks]
    assert outside(after, a, b) == outside(before, a, b)
    assert all(n.time + n.duration <= a * bar for t in after.tracks for n in t.notes
               if n.time < a * bar)  # fmt: skip
    assert phrase_marks(after) == phrase_marks(before)
    chords = [(m.time, m.text) for m in after.markers if m.text.startswith(CHORD_MARK)]
    old = [(m.time, m.text) for m in before.markers if m.text.startswith(CHORD_MARK)]
    assert [c for c in chords if not a * bar <= c[0] < b * bar] == [
        c for c in old if not a * bar <= c[0] < b * bar
    ]


def test_a_section_is_written_again_the_rest_kept(song, tmp_path):
    model, path = song
    music = model.regenerate(path, section="B", seed=9)
    check_section(path, music, 2, 4)
    written = music.save(tmp_path / "r.mid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pretty_midi.PrettyMIDI(str(written))
    assert model.prompt(written, prompt_bars=(0, 6)).bars == 6  # our own reader reads it


def test_bars_from_the_start_are_written_from_scratch(song):
    model, path = song
    check_section(path, model.regenerate(path, bars=(0, 2), seed=3, tempo=90), 0, 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"bars": (3, 1)}, "bars: need 0 <= START < END <= 6"),
        ({"bars": (0, 9)}, "bars: need 0 <= START < END <= 6"),
        ({"section": "Z"}, "section: no phrase 'Z'"),
        ({}, "bars: give the bars"),
        ({"bars": (0, 2), "section": "B"}, "bars: give the bars"),
        ({"bars": (0, 2), "bars_name": "x"}, "bars_name: unknown option"),
        ({"bars": (0, 2), "num": 2}, "num: Model.regenerate writes one piece"),
    ],
)
def test_regenerate_refuses_in_one_line(song, args, message):
    model, path = song
    with pytest.raises(MusicgenError, match=message) as err:
        model.regenerate(path, seed=1, **args)
    assert "\n" not in str(err.value)


def test_cli_regenerate(song, tmp_path, capsys):
    model, path = song
    base = ["regenerate", str(path), "--checkpoint", str(model.source), "--out", str(tmp_path),
            "--seed", "1", "--num", "1", "--device", "cpu"]  # fmt: skip
    assert main([*base, "--bars", "4:6"]) == 0
    (written,) = tmp_path.glob("*.mid")
    before, after = symusic.Score(str(path)), symusic.Score(str(written))
    assert outside(after, 4, 6) == outside(before, 4, 6)
    assert main([*base, "--bars", "4:6", "--new-bars", "2"]) == 1
    err = capsys.readouterr().err
    assert "--new-bars: regenerate writes" in err and "Traceback" not in err
    assert main([*base, "--section", "Q"]) == 1
    assert "--section: no phrase 'Q'" in capsys.readouterr().err
