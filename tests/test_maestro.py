"""Maestro-style performances end to end: `continue` on a real performance excerpt with
the expressive REMI, its prompt given in seconds or bars (CLI and API), and `prepare --dataset
maestro`'s default tokenizer. The excerpt is the first 12 s of an ASAP/MAESTRO performance
(tests/data/asap_maestro/README.md): one tempo, 120 bpm, so a bar of the grid is 2 s and the
tokenizer's 16 positions per beat are 32 per second."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import symusic
from conftest import make_checkpoint
from paths import DATA, ROOT

from musicgen.cli import main
from musicgen.errors import MusicgenError
from musicgen.generation.api import load
from musicgen.generation.api.prompt import load_prompt, prompt_from_seconds
from musicgen.io import write_score
from musicgen.tokenizers import build_tokenizer, load_tokenizer
from musicgen.tokenizers.pedal import fold_pedal

EXCERPT = DATA / "asap_maestro" / "Kleisen11M_first12s.mid"
EXPRESSIVE = ROOT / "configs" / "tokenizer" / "remi_expressive.yaml"
PER_SECOND = 32  # grid positions per second at 120 bpm (16 per beat)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(str(EXPRESSIVE))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    """A tiny untrained model with the expressive REMI."""
    return make_checkpoint(tmp_path_factory.mktemp("expressive"), str(EXPRESSIVE))


def note_set(score: symusic.Score, keep=lambda n: True) -> list[tuple]:
    return sorted(
        (n.time, n.duration, n.pitch, n.velocity) for t in score.tracks for n in t.notes if keep(n)
    )


def run_module(*argv) -> subprocess.CompletedProcess:
    """`python -m musicgen.cli ...` in a fresh process, importing this checkout's code."""
    return subprocess.run(
        [sys.executable, "-m", "musicgen.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )


def assert_written_keeps_prompt(tok, midi: Path, ids: list[int], prompt) -> None:
    """The file holds the prompt's notes exactly, then notes from the cut on only; the sampled
    ids themselves start no note before the cut."""
    cut = prompt.end_tick
    score = symusic.Score(str(midi))
    assert score.ticks_per_quarter == prompt.notes.ticks_per_quarter
    assert abs(score.tempos[0].qpm - 120) < 0.01
    assert note_set(score, lambda n: n.time < cut) == note_set(prompt.notes)
    assert len(note_set(score)) > len(note_set(prompt.notes))  # the model wrote something
    decoded = tok.decode(ids)  # what the model wrote, before the merge drops anything
    assert {n.time for t in decoded.tracks for n in t.notes if n.time < cut} <= {
        n.time for t in prompt.notes.tracks for n in t.notes
    }
    assert len(note_set(decoded, lambda n: n.time < cut)) == len(note_set(prompt.notes))


# ---------------------------------------------------------------------------------------------
# the rule


@pytest.mark.parametrize(("seconds", "cut"), [(4.3, 138), (5.0, 160), (8.0, 256)])
def test_seconds_cut_is_the_first_grid_position_at_or_after_them(tok, seconds, cut):
    prompt = prompt_from_seconds(tok, EXCERPT, seconds)
    assert math.ceil(seconds * PER_SECOND) == cut  # 4.3 s: position 137.6 -> 138 (4.3125 s)
    assert prompt.end_tick == cut and prompt.notes.ticks_per_quarter == 16  # 1 tick = 1 step
    # the prompt is what the tokenizer reads of the whole file before the cut
    song = tok.decode(tok.encode(EXCERPT))
    assert note_set(prompt.notes) == note_set(song, lambda n: n.time < cut)
    # ... which is the performance at the grid's resolution, sustain pedal folded in
    raw = fold_pedal(symusic.Score(str(EXCERPT))).to("second").tracks[0].notes
    kept = [n for n in raw if round(n.time * PER_SECOND) < cut]
    assert len(kept) == prompt.notes.note_num()
    for n in prompt.notes.tracks[0].notes:
        onset, end = n.time / PER_SECOND, (n.time + n.duration) / PER_SECOND
        match = min((r for r in kept if r.pitch == n.pitch), key=lambda r: abs(r.time - onset))
        assert abs(match.time - onset) <= 0.5 / PER_SECOND + 1e-6
        assert abs(min(match.end, match.time + 4.0) - end) <= 1 / PER_SECOND + 1e-6
    inside = cut % 64 != 0
    assert (prompt.first_allowed is not None) == inside and prompt.ids[-1] != tok.eos_id


def test_seconds_are_read_through_the_prompt_tempo_map(tok, tmp_path):
    """120 bpm for 4 quarters (2 s), then 60 bpm: 5 s = 4 + 3 quarters = position 112; 117 bpm
    (MIDI's 117.000117): 10 s = 19.5 quarters = position 312, not 313."""
    score = symusic.Score(str(EXCERPT))
    score.tempos.clear()
    score.tempos.append(symusic.Tempo(0, 120.0))
    score.tempos.append(symusic.Tempo(4 * score.ticks_per_quarter, 60.0))
    changed = write_score(score, tmp_path / "changed.mid")
    prompt = prompt_from_seconds(tok, changed, 5.0)
    assert prompt.end_tick == 112 and prompt.tempo == 120.0
    song = tok.decode(tok.encode(changed))
    assert note_set(prompt.notes) == note_set(song, lambda n: n.time < 112)
    score.tempos.clear()
    score.tempos.append(symusic.Tempo(0, 60e6 / 512_820))  # as ASAP's 117-bpm files store it
    slower = write_score(score, tmp_path / "slower.mid")
    assert symusic.Score(str(slower)).tempos[0].mspq == 512_820
    assert prompt_from_seconds(tok, slower, 10.0).end_tick == 312


def test_pedal_held_notes_cross_the_cut(tok):
    """At 8 s the pedal is down (7.45..8.55 s): notes released before 8 s sound on past it."""
    prompt = prompt_from_seconds(tok, EXCERPT, 8.0)
    raw = symusic.Score(str(EXCERPT)).to("second").tracks[0].notes
    released = {(round(n.time * PER_SECOND), n.pitch) for n in raw if n.end < 8.0}
    held = [
        n
        for n in prompt.notes.tracks[0].notes
        if (n.time, n.pitch) in released and n.time + n.duration > prompt.end_tick
    ]
    assert len(held) >= 3


def test_a_cut_on_a_bar_line_is_the_prompt_of_bars(tok):
    """120 bpm: 8 s are 4 bars of 2 s; the same ids, notes and lead-in."""
    by_seconds = prompt_from_seconds(tok, EXCERPT, 8.0)
    by_bars = load_prompt(tok, EXCERPT, prompt_bars=(0, 4))
    assert by_seconds.ids == by_bars.ids and by_seconds.lead_in == [tok.bar_id]
    assert by_seconds.end_tick == by_bars.end_tick == 4 * 64
    assert note_set(by_seconds.notes) == note_set(by_bars.notes)


def test_a_cut_inside_a_bar_allows_only_later_positions(tok):
    prompt = prompt_from_seconds(tok, EXCERPT, 5.0)  # bar 2, position 32
    allowed = np.flatnonzero(prompt.first_allowed)
    names = {tok.token_name(int(i)) for i in allowed}
    assert names == {f"Position_{p}" for p in range(32, 64)} | {"Bar_None", "EOS_None"}
    assert len(tok.bar_starts(np.asarray(prompt.ids))) == 3  # bars 0, 1 and the open bar 2


def test_a_cut_past_the_last_note_opens_the_bars_up_to_it(tok, ckpt, tmp_path):
    """Notes in the first 3 s, the pedal down until 9 s: a 7-s prompt holds every note and
    opens bars 2 and 3 itself (the song's ids stop in bar 1), then the model writes from 7 s."""
    score = symusic.Score(str(EXCERPT))
    tpq = score.ticks_per_quarter
    track = score.tracks[0]
    kept = [n for n in track.notes if n.time < 6 * tpq]
    track.notes.clear()
    track.notes.extend(kept)
    track.controls.clear()
    track.controls.append(symusic.ControlChange(0, 64, 127))
    track.controls.append(symusic.ControlChange(18 * tpq, 64, 0))  # 9 s
    short = write_score(score, tmp_path / "short.mid")
    prompt = prompt_from_seconds(tok, short, 7.0)
    assert prompt.end_tick == 224 and prompt.lead_in == [tok.bar_id, tok.bar_id]
    assert note_set(prompt.notes) == note_set(tok.decode(tok.encode(short)))
    music = load(ckpt).continue_midi(short, seconds=7.0, seed=0, max_tokens=40)
    assert_written_keeps_prompt(tok, music.save(tmp_path / "out.mid"), music.ids, prompt)


# ---------------------------------------------------------------------------------------------
# the command line (a fresh process) and the API


def test_continue_by_seconds_cli(tok, ckpt, tmp_path):
    out = tmp_path / "out"
    args = ["continue", "--checkpoint", ckpt, "--prompt", EXCERPT, "--seconds", 5, "--out", out]
    done = run_module(*args, "--num", 2, "--max-tokens", 48, "--seed", 3, "--save-tokens")
    assert done.returncode == 0, done.stderr
    assert "the first 5 s of Kleisen11M_first12s.mid" in done.stdout
    prompt = prompt_from_seconds(tok, EXCERPT, 5.0)
    for i in range(2):
        stem = out / f"tiny_remi_expressive_{EXCERPT.stem}_3_{i}"
        record = json.loads(stem.with_suffix(".json").read_text())
        assert record["ids"][: len(prompt.ids)] == prompt.ids
        assert prompt.first_allowed[record["ids"][len(prompt.ids)]]
        assert_written_keeps_prompt(tok, stem.with_suffix(".mid"), record["ids"], prompt)


def test_continue_by_bars_cli(tok, ckpt, tmp_path):
    out = tmp_path / "out"
    args = ["continue", "--checkpoint", ckpt, "--prompt", EXCERPT, "--bars", 2, "--out", out]
    done = run_module(*args, "--num", 1, "--max-tokens", 48, "--seed", 5, "--save-tokens")
    assert done.returncode == 0, done.stderr
    prompt = load_prompt(tok, EXCERPT, prompt_bars=(0, 2))
    assert prompt.end_tick == 128  # 2 bars = 4 s = 128 steps
    stem = out / f"tiny_remi_expressive_{EXCERPT.stem}_5_0"
    record = json.loads(stem.with_suffix(".json").read_text())
    assert_written_keeps_prompt(tok, stem.with_suffix(".mid"), record["ids"], prompt)


@pytest.mark.parametrize("seconds", [4.3, 8.0])
def test_continue_midi_by_seconds_api(tok, ckpt, tmp_path, seconds):
    model = load(ckpt)
    prompt = model.prompt(EXCERPT, seconds=seconds)
    for seed in range(3):
        music = model.continue_midi(EXCERPT, seconds=seconds, seed=seed, max_tokens=40)
        assert music.ids[: len(prompt.ids)] == prompt.ids
        midi = music.save(tmp_path / f"{seed}.mid")
        assert_written_keeps_prompt(tok, midi, music.ids, prompt)
    alone = model.continue_midi(
        EXCERPT, seconds=seconds, seed=0, max_tokens=40, only_continuation=True
    )
    merged = model.continue_midi(EXCERPT, seconds=seconds, seed=0, max_tokens=40)
    shift = prompt.bar_line_tick  # the bar holding the cut becomes bar 0
    later = note_set(merged.score, lambda n: n.time >= prompt.end_tick)
    assert note_set(alone.score) == [(t - shift, d, p, v) for t, d, p, v in later]


def test_continuation_only_token_file_matches_the_midi(tok, ckpt, tmp_path, capsys):
    out = tmp_path / "alone"
    rc = main(
        [
            *("continue", "--checkpoint", str(ckpt), "--prompt", str(EXCERPT)),
            *("--seconds", "4.3", "--out", str(out), "--num", "1", "--max-tokens", "40"),
            *("--seed", "2", "--save-tokens", "--continuation-only"),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    record = json.loads(next(out.glob("*.json")).read_text())
    score = symusic.Score(str(next(out.glob("*.mid"))))
    # the same time base (the cut's bar is bar 0); the MIDI lacks only the notes the overlap
    # rule dropped (they start while a prompt note of their pitch still sounds)
    written, decoded = note_set(score), note_set(tok.decode(record["ids"]))
    assert written and set(written) <= set(decoded)


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seconds", "0"], "--seconds: must be > 0, got 0.0"),
        (["--seconds", "-2"], "--seconds: must be > 0, got -2.0"),
        (["--seconds", "nan"], "--seconds: must be a finite number of seconds"),
        (["--seconds", "30"], "--seconds: 30 s is longer than"),
        (["--seconds", "0.5"], "--seconds: no note starts in the first 0.5 s"),
        (["--seconds", "4", "--bars", "2"], "--bars and --seconds: give one of them, not both"),
        (["--seconds", "4", "--prompt-bars", "0:2"], "--prompt-bars and --seconds: give one"),
    ],
)
def test_bad_seconds_are_one_line_errors(ckpt, tmp_path, capsys, extra, message):
    argv = ["continue", "--checkpoint", str(ckpt), "--prompt", str(EXCERPT), "--out"]
    rc = main([*argv, str(tmp_path), *extra])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not list(tmp_path.glob("*.mid"))


def test_bad_seconds_in_a_fresh_process_and_the_api(ckpt, tmp_path, tiny_checkpoints):
    argv = ["continue", "--checkpoint", ckpt, "--prompt", EXCERPT, "--out", tmp_path]
    done = run_module(*argv, "--seconds", 4, "--bars", 2)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == "error: --bars and --seconds: give one of them, not both\n"
    model = load(ckpt)
    with pytest.raises(MusicgenError, match="^bars and seconds: give one of them, not both$"):
        model.continue_midi(EXCERPT, bars=2, seconds=4)
    with pytest.raises(MusicgenError, match=r"^seconds: 12\.5 s is longer than .*\(12\.00 s\)$"):
        model.continue_midi(EXCERPT, seconds=12.5)
    with pytest.raises(MusicgenError, match="^seconds: must be > 0"):
        model.prompt(EXCERPT, seconds=-1)
    groove = load(tiny_checkpoints["groove"])
    with pytest.raises(MusicgenError, match="needs a REMI tokenizer"):
        groove.prompt(EXCERPT, seconds=4)


# ---------------------------------------------------------------------------------------------
# prepare


def test_prepare_maestro_defaults_to_the_expressive_tokenizer(tmp_path):
    from musicgen.data.prepare import prepare

    folder = tmp_path / "maestro"
    (folder / "2018").mkdir(parents=True)
    shutil.copy(EXCERPT, folder / "2018" / EXCERPT.name)
    header = "canonical_composer,canonical_title,split,year,midi_filename,audio_filename,duration"
    row = f"Debussy,Reflets dans l'eau,train,2018,2018/{EXCERPT.name},,12.0"
    (folder / "maestro-v3.0.0.csv").write_text(f"{header}\n{row}\n")
    prepare("maestro", folder, tmp_path / "default", workers=1)
    default = load_tokenizer(tmp_path / "default" / "tokenizer.json")
    assert default.to_dict() == build_tokenizer(str(EXPRESSIVE)).to_dict()
    assert default.options["positions_per_beat"] == 16 and default.options["fold_pedal"]
    pop = ROOT / "configs" / "tokenizer" / "remi.yaml"
    prepare("maestro", folder, tmp_path / "pop", tokenizer=str(pop), workers=1)
    explicit = load_tokenizer(tmp_path / "pop" / "tokenizer.json")
    assert explicit.options["positions_per_beat"] == 4 and not explicit.options["fold_pedal"]
