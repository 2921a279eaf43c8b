"""The audit of hostile and careless inputs outside the studio: each case named after what it
sends. Bad input ends in exit code 1 (never 3, an internal error) and one line that names the
input, before any work; what was silently wrong is now right (a chord lands in its bar, a prompt
without a tempo is written at 120 bpm); a run folder is never replaced silently."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import symusic
import torch
from conftest import make_checkpoint
from hostile import midi_bytes, notes, raw_midi, scale
from paths import DATA, ROOT

import musicgen
from musicgen.checkpoint import load_checkpoint, read_payload
from musicgen.cli import main
from musicgen.config import load_config, validate
from musicgen.errors import MusicgenError
from musicgen.generation.api.options import RANGES as SAMPLING_RANGES
from musicgen.generation.api.options import check_sample
from musicgen.generation.api.request import GenerationRequest
from musicgen.generation.controls.chord_plan import chord_events, parse_progression

SONG = DATA / "pop909" / "005" / "005.mid"
TINY = ROOT / "configs" / "pop909" / "tiny.yaml"
EXPRESSIVE = ROOT / "configs" / "tokenizer" / "remi_expressive.yaml"


def run_cli(capsys, *argv) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def one_line_error(err: str) -> str:
    """The single `error: ...` line a failing command prints last; no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    return errors[0]


def refused(capsys, *argv, names: str = "") -> str:
    """Run the CLI; assert exit 1 with one error line that contains `names`."""
    rc, err = run_cli(capsys, *argv)
    line = one_line_error(err)
    assert rc == 1 and names in line, err
    return line


@pytest.fixture(scope="module")
def remi(tiny_checkpoints) -> Path:
    return tiny_checkpoints["remi"]


@pytest.fixture(scope="module")
def model(remi) -> musicgen.Model:
    return musicgen.load(remi)


def gen(remi, out, *extra) -> list:
    return ["generate", "--checkpoint", remi, "--out", out, "--num", "1", *extra]


# ---- limits checked before any work ------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["C x10000000", "C x300000000", "C x99999999999999999999"], ids=lambda t: t[3:]
)
def test_chord_repeat_cap_refuses_x10000000(text, capsys, tmp_path, monkeypatch):
    loads = []
    monkeypatch.setattr("musicgen.commands.generate.load", lambda *a, **k: loads.append(a))
    line = refused(capsys, *gen("missing.pt", tmp_path / "o", "--chords", text), names="--chords")
    assert "limit of 4,096" in line and text.split()[1] in line
    assert not loads and not (tmp_path / "o").exists()  # refused before the model is loaded


def test_progression_length_cap_refuses_more_bars_than_a_piece(model):
    assert len(parse_progression("C G x2048").bars) == 4096
    with pytest.raises(MusicgenError, match="^chords: the progression would have 4,098 bars"):
        model.generate(bars=4, seed=0, chords="C G x2049")
    with pytest.raises(MusicgenError, match="^chords: 5,000 bars, over the limit of 4,096"):
        model.generate(bars=4, seed=0, chords=["C"] * 5000)


def _song_folder(tmp_path: Path, chord_text: bytes) -> Path:
    folder = tmp_path / "song"
    folder.mkdir()
    (folder / "song.mid").write_bytes(SONG.read_bytes())
    (folder / "chord_midi.txt").write_bytes(chord_text)
    return folder / "chord_midi.txt"


def test_chord_file_over_1_mb_is_refused(remi, tmp_path, capsys):
    line_ = b"0.0 2.0 C:maj\n"
    path = _song_folder(tmp_path, line_ * ((1 << 20) // len(line_) + 1))
    line = refused(capsys, *gen(remi, tmp_path / "o", "--chords", path), names=str(path))
    assert "over the size limit" in line and "1 MB" in line


@pytest.mark.parametrize("start", ["1e9", "1e300"])
def test_chord_file_start_at_1e9_is_refused(start, remi, tmp_path, capsys):
    path = _song_folder(tmp_path, f"0.0 2.0 C:maj\n{start} {start} G:maj\n".encode())
    line = refused(capsys, *gen(remi, tmp_path / "o", "--chords", path), names=str(path))
    assert "line 2" in line and "past the limit of 5400 s" in line


def test_prompt_tempo_ff_ff_ff_is_refused(remi, tmp_path, capsys):
    slow = tmp_path / "slow.mid"  # 16.7 s a beat: 4 bars continued by 4 would last 9 minutes
    slow.write_bytes(midi_bytes([(0, b"\xff\x51\x03\xff\xff\xff"), *notes([60, 62] * 8, 0, 480)]))
    argv = ["continue", "--prompt", slow, "--checkpoint", remi, "--out", tmp_path / "o"]
    line = refused(capsys, *argv, "--new-bars", "4", names=str(slow))
    assert "tempo 3.576 bpm" in line and "outside 20..500 bpm" in line and "refused" in line


# ---- silently wrong, now right -----------------------------------------------------------------


@pytest.mark.parametrize(
    "given, labels",
    [
        ("C | | G | Am", ["C", "-", "G", "Am"]),
        ("C || G", ["C", "-", "G"]),
        (["C", "", "G", "Am"], ["C", "-", "G", "Am"]),
        ("| C | G |", ["C", "G"]),  # a frame of '|' is no empty bar
    ],
    ids=["spaced", "double_pipe", "list", "framed"],
)
def test_empty_bar_keeps_its_place(given, labels):
    assert parse_progression(given).labels() == labels


def test_empty_bar_keeps_later_chords_in_their_bars(model):
    piece = model.generate(bars=4, seed=3, chords="C | | G | Am", max_tokens=2000, min_tokens=2000)
    tok = model.tokenizer
    got = [(bar, tok.token_name(t)) for bar, _, t in chord_events(tok, piece.ids)]
    assert piece.errors == 0 and len(tok.bar_starts(np.asarray(piece.ids))) == 4
    assert got == [(0, "Chord_C:maj"), (2, "Chord_G:maj"), (3, "Chord_A:min")]


@pytest.mark.parametrize(
    "text, labels",
    [
        ("Am F C G x2", ["Am", "F", "C", "G"] * 2),
        ("C x2 G x2", ["C", "C", "G", "G"]),
        ("Am F x2 C x3", ["Am", "F", "Am", "F", "C", "C", "C"]),
        ("C | G D | x2", ["C", "G D", "C", "G D"]),
        ("C | G | Am x2", ["C", "G", "Am"] * 2),  # at the line's end: the line, as a chart's
        ("C | G | Am x2 |", ["C", "G", "Am", "Am"]),  # closed by '|': that bar
        ("C | Am x2 | G", ["C", "Am", "Am", "G"]),  # inside a line: that bar
    ],
)
def test_line_repeat_x2_repeats_the_whole_line(text, labels):
    assert parse_progression(text).labels() == labels


def test_chord_tones_without_chords_is_refused(remi, model, tmp_path, capsys):
    line = refused(capsys, *gen(remi, tmp_path / "o", "--chord-tones", "3"), names="--chord-tones")
    assert "only with chords" in line and not (tmp_path / "o").exists()
    with pytest.raises(MusicgenError, match="^chord_tones: has an effect only with chords"):
        model.generate(bars=1, seed=0, chord_tones=3)


def test_prompt_without_tempo_is_written_at_120_bpm(remi, tmp_path, capsys):
    prompt = tmp_path / "plain.mid"
    prompt.write_bytes(scale())  # no tempo event: MIDI's 120 bpm
    assert len(symusic.Score(str(prompt)).tempos) == 0
    argv = ["continue", "--prompt", prompt, "--checkpoint", remi, "--out", tmp_path / "o"]
    rc, err = run_cli(capsys, *argv, "--num", "1", "--new-bars", "1", "--seed", "1")
    assert rc == 0, err
    (written,) = (tmp_path / "o").glob("*.mid")
    assert symusic.Score(str(written)).tempos[0].qpm == 120.0


def test_type_2_midi_prompt_is_refused(remi, tmp_path, capsys):
    note = b"\x00\x90\x3c\x50\x83\x60\x80\x3c\x00\x00\xff\x2f\x00"
    path = tmp_path / "format2.mid"
    path.write_bytes(raw_midi([note, note], fmt=2))
    argv = ["continue", "--prompt", path, "--checkpoint", remi, "--out", tmp_path / "o"]
    line = refused(capsys, *argv, names=str(path))
    assert "type-2 MIDI file" in line and "independent sequences" in line


def test_maestro_model_refuses_chords(tmp_path, capsys):
    expressive = make_checkpoint(tmp_path, str(EXPRESSIVE))
    line = refused(capsys, *gen(expressive, tmp_path / "o", "--chords", "C G"), names="--chords")
    assert "reads performances" in line and "pop models" in line
    with pytest.raises(MusicgenError, match="^chords: this model reads performances"):
        musicgen.load(expressive).generate(bars=1, seed=0, chords="C")


# ---- no internal errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--temperature", "1e-300"),
        ("--top-p", "1e-300"),
        ("--chord-tones", "1e308"),
        ("--repeat", "1e39"),
        ("--temperature", "1e39"),  # above float32's maximum
        ("--top-p", "nan"),
        ("--repeat", "inf"),
    ],
)
def test_sampling_extremes_are_one_line_errors(flag, value, remi, tmp_path, capsys):
    argv = gen(remi, tmp_path / "o", flag, value, "--chords", "C", "--bars", "1")
    refused(capsys, *argv, names=f"{flag}: must be")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "option, value", [("repeat", 1e39), ("temperature", 1e-300), ("top_p", 1e-300)]
)
def test_api_repeat_1e39_is_refused(option, value, model):
    with pytest.raises(MusicgenError, match=f"^{option}: must be"):
        model.generate(bars=1, seed=0, **{option: value})


def test_one_range_table_decides_cli_api_and_config():
    """The API and a model's config refuse the same values with the same words (a config's
    `sample:` is checked against the options where a model loads it, `check_sample`)."""
    for name, value in (("temperature", "1.0e-300"), ("top_p", "1.0e-300"), ("repeat", "1.0e+39")):
        with pytest.raises(MusicgenError) as api:
            GenerationRequest(**{name: float(value)})
        with pytest.raises(MusicgenError) as config:
            check_sample(validate(load_config(TINY, [f"sample.{name}={value}"])).sample)
        assert str(config.value).endswith(f"config: sample.{api.value}")
    assert set(SAMPLING_RANGES) >= {"temperature", "top_p", "repeat", "chord_tones"}
    assert GenerationRequest(temperature=0).temperature == 0  # greedy stays


@pytest.mark.parametrize("path", [b"x.mid", None, 3])
def test_continue_midi_with_bytes_or_none_path_is_one_line(path, model):
    with pytest.raises(MusicgenError, match="^path: must be a MIDI file's path"):
        model.continue_midi(path, new_bars=1, seed=0)


# ---- unclear messages, now clear ---------------------------------------------------------------


def _odd_chord_paths(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    folder = tmp_path / "dir_chord_midi.txt"
    folder.mkdir()
    fifo = tmp_path / "fifo_chord_midi.txt"
    os.mkfifo(fifo)
    zero = tmp_path / "zero_chord_midi.txt"
    zero.symlink_to("/dev/zero")
    loop = tmp_path / "loop_chord_midi.txt"
    loop.symlink_to(loop)
    return {
        "directory": (folder, "is a directory, not a chord file"),
        "fifo": (fifo, "a FIFO (named pipe), not a regular file"),
        "dev_zero_link": (zero, "a character device, not a regular file"),
        "symlink_loop": (loop, "is a symbolic link loop"),
        "missing": (tmp_path / "missing.txt", "file not found"),
    }


def test_chords_path_kinds_are_named(tmp_path, capsys, monkeypatch):
    loads = []
    monkeypatch.setattr("musicgen.commands.generate.load", lambda *a, **k: loads.append(a))
    for case, (path, what) in _odd_chord_paths(tmp_path).items():
        argv = gen("missing.pt", tmp_path / "o", "--chords", path)
        line = refused(capsys, *argv, names=f"--chords: {path}: ")
        assert what in line, (case, line)
        if case != "missing":
            assert "not found" not in line, case
    assert not loads  # each refused before the model is loaded


def test_prompt_bars_negative_is_one_line(remi, tmp_path, capsys):
    argv = ["continue", "--prompt", SONG, "--checkpoint", remi, "--out", tmp_path / "o"]
    rc, err = run_cli(capsys, *argv, "--prompt-bars", "-2:1")
    assert (
        rc == 1 and one_line_error(err) == "error: --prompt-bars: need 0 <= START < END, got -2:1"
    )
    assert "usage:" not in err


def test_weights_mismatch_names_the_key(remi, tmp_path):
    payload = torch.load(remi, weights_only=True)
    first = next(iter(payload["model"]))
    del payload["model"][first]
    torch.save(payload, tmp_path / "missing.pt")
    with pytest.raises(MusicgenError, match=f"tensor {first} is missing"):
        load_checkpoint(tmp_path / "missing.pt")
    payload["model"][first] = torch.zeros(1)
    payload["model"]["stray.weight"] = torch.zeros(2)
    torch.save(payload, tmp_path / "extra.pt")
    with pytest.raises(MusicgenError) as info:
        load_checkpoint(tmp_path / "extra.pt")
    assert "\n" not in str(info.value)
    assert f"tensor {first} has shape [1]" in str(info.value)  # the shape check comes first
    payload["model"][first] = torch.load(remi, weights_only=True)["model"][first]
    torch.save(payload, tmp_path / "extra.pt")
    with pytest.raises(MusicgenError, match="tensor stray.weight is not a tensor of the saved"):
        load_checkpoint(tmp_path / "extra.pt")


def test_truncated_last_pt_message_is_not_cut_mid_word(remi, tmp_path):
    data = remi.read_bytes()
    (tmp_path / "last.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(MusicgenError) as info:
        read_payload(tmp_path / "last.pt")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'last.pt'}: not a readable checkpoint (")
    assert "\n" not in message and "If yo)" not in message
    assert message.endswith(" ...)") and message.removesuffix(" ...)")[-1].isalpha()


def test_raw_pickle_pt_prints_no_torch_warning(tmp_path, capfd):
    import pickle

    path = tmp_path / "raw.pt"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rc = main(["plot", "kernels", "--checkpoint", str(path), "--out", str(tmp_path / "o")])
    err = capfd.readouterr().err
    assert rc == 1 and one_line_error(err).startswith(f"error: {path}: not a musicgen checkpoint")
    assert not seen and "Warning" not in err


# ---- train --out ---------------------------------------------------------------------------------


def _train(prepared, out, *extra) -> list:
    return [
        "train", "--config", TINY, "--data", prepared, "--out", out,
        "--train.max_steps=2", "--train.val_every=100", *extra,
    ]  # fmt: skip


def test_train_out_into_a_run_refuses_without_resume(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    rc, err = run_cli(capsys, *_train(prepared, run))
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    line = refused(capsys, *_train(prepared, run, "--train.max_steps=1"), names=str(run))
    assert "already holds a run" in line and "--resume" in line and "--force" in line
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert after == before  # best.pt, last.pt and log.jsonl untouched


def test_train_force_moves_the_old_run_aside(prepared, tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, *_train(prepared, run))[0] == 0
    old_log = (run / "log.jsonl").read_text()
    old_best = (run / "best.pt").read_bytes()
    rc = main([str(a) for a in _train(prepared, run, "--force", "--train.max_steps=1")])
    out = capsys.readouterr().out
    assert rc == 0 and f"moved the run in {run} to {tmp_path / 'run.old-1'}" in out
    aside = tmp_path / "run.old-1"
    assert (aside / "log.jsonl").read_text() == old_log
    assert (aside / "best.pt").read_bytes() == old_best
    steps = [json.loads(x)["step"] for x in (run / "log.jsonl").read_text().splitlines()]
    assert max(steps) == 1  # the new run alone
    line = refused(capsys, *_train(prepared, run, "--force", "--resume"), names="--force")
    assert "give one of them" in line
