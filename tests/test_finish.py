"""Tempo, transposition and instruments as request fields (issue 65): a set tempo held through
the piece, pitched notes moved (drums not, nothing out of 0..127), the melody on a lead."""

from __future__ import annotations

import numpy as np
import pytest
import symusic
from paths import ROOT

import musicgen
from musicgen.cli import main
from musicgen.errors import MusicgenError
from musicgen.generation.api.finish import LEAD_PROGRAM, hold_tempo, set_programs, transpose
from musicgen.generation.api.prompt import encode_song

SONG = ROOT / "data" / "demo" / "pop909_005.mid"  # 8 tempo events
SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"


@pytest.fixture(scope="module")
def models(tiny_checkpoints, tmp_path_factory):
    from conftest import make_checkpoint

    song = make_checkpoint(tmp_path_factory.mktemp("finish"), str(SONG_TOKENS))
    return {
        "song": musicgen.load(song),
        "remi": musicgen.load(tiny_checkpoints["remi"]),
        "groove": musicgen.load(tiny_checkpoints["groove"]),
    }


def score_with(*tracks: tuple[str, bool, list[int]]) -> symusic.Score:
    score = symusic.Score(480)
    for name, drum, pitches in tracks:
        track = symusic.Track(name, 0, drum)
        track.notes.extend([symusic.Note(i * 480, 240, p, 80) for i, p in enumerate(pitches)])
        score.tracks.append(track)
    score.tempos.extend([symusic.Tempo(0, 116.0), symusic.Tempo(1920, 68.0)])
    return score


def test_hold_tempo_writes_one_tempo():
    score = hold_tempo(score_with(("Piano", False, [60])), 100)
    assert [(t.time, round(t.qpm)) for t in score.tempos] == [(0, 100)]
    assert len(hold_tempo(score_with(("Piano", False, [60])), None).tempos) == 2


def test_transpose_moves_pitched_notes_only_and_refuses_out_of_range():
    score = transpose(score_with(("Piano", False, [60, 64]), ("Drums", True, [36])), -5)
    assert [n.pitch for n in score.tracks[0].notes] == [55, 59]
    assert [n.pitch for n in score.tracks[1].notes] == [36]
    high = score_with(("Piano", False, [60, 120]))
    with pytest.raises(MusicgenError, match=r"transpose: \+8 semitones .*60\.\.120"):
        transpose(high, 8)
    assert [n.pitch for n in high.tracks[0].notes] == [60, 120]  # nothing moved


def test_programs_melody_lead_piano_zero_extended_file_kept():
    score = score_with(("Melody", False, [72]), ("Piano", False, [48]))
    score.tracks[1].program = 5
    set_programs(score, None)
    assert [t.program for t in score.tracks] == [LEAD_PROGRAM, 0]
    set_programs(score, 81)
    assert score.tracks[0].program == 81
    score.tracks[0].program = 40
    set_programs(score, None, keep=True)  # a file extended as it was: its own instruments
    assert score.tracks[0].program == 40


def test_generate_and_continue_apply_the_fields(models, tmp_path):
    song = models["song"]
    piece = song.generate(bars=2, seed=1, tempo=100, melody_program=81)
    by_name = {t.name: t.program for t in piece.score.tracks}
    assert by_name.get("Melody", 81) == 81 and by_name.get("Piano", 0) == 0
    assert len(piece.score.tempos) == 1
    plain = song.continue_midi(SONG, bars=2, new_bars=2, seed=1)
    held = song.continue_midi(SONG, bars=2, new_bars=2, seed=1, tempo=100, transpose=2)
    assert [round(t.qpm) for t in held.score.tempos] == [100]
    before = [n.pitch for t in plain.score.tracks for n in t.notes]
    assert [n.pitch for t in held.score.tracks for n in t.notes] == [p + 2 for p in before]
    melody = {t.name: t.program for t in plain.score.tracks}["Melody"]
    assert melody == LEAD_PROGRAM
    # the file, its melody on the lead, reads back with its melody (found by the track's name)
    path = plain.save(tmp_path / "lead.mid")
    ids = encode_song(song.tokenizer, path)
    assert np.any(song.tokenizer.tables.melody[np.asarray(ids)])
    again = song.continue_midi(path, bars=2, new_bars=1, seed=2)
    assert "Melody" in [t.name for t in again.score.tracks]


@pytest.mark.parametrize(
    ("model", "fields", "message"),
    [
        ("remi", {"melody_program": 73}, "melody_program: this model has no melody voice"),
        ("groove", {"transpose": 3}, "transpose: this model has no pitched notes"),
        ("song", {"tempo": 400}, "tempo: must be >= 20 and <= 300"),
        ("song", {"melody_program": -1}, "melody_program: must be >= 0"),
        ("song", {"transpose": 0.5}, "transpose: must be a whole number"),
    ],
)
def test_refusals_are_one_line(models, model, fields, message):
    with pytest.raises(MusicgenError, match=message) as err:
        models[model].generate(bars=1, seed=1, **fields)
    assert "\n" not in str(err.value)


def test_cli_tempo_writes_one_tempo(models, tmp_path, capsys):
    args = ["continue", "--checkpoint", str(models["song"].source), "--prompt", str(SONG),
            "--out", str(tmp_path), "--seed", "1", "--num", "1", "--device", "cpu",
            "--new-bars", "2", "--tempo", "100", "--melody-program", "0"]  # fmt: skip
    assert main(args) == 0
    (written,) = tmp_path.glob("*.mid")
    score = symusic.Score(str(written))
    assert [round(t.qpm) for t in score.tempos] == [100]
    assert {t.name: t.program for t in score.tracks}["Melody"] == 0
    assert main([*args[:-2], "--transpose", "99"]) == 1
    assert "--transpose: must be" in capsys.readouterr().err
