"""Nothing lost, no traceback: hostile files, CLI misuse, full and read-only disks,
killed workers, SIGTERM, torn logs, incomplete checkpoints.

The full-disk tests mount a small tmpfs (root with mount rights, as on the project machine) and
are skipped elsewhere; the simulated tests below them make the same writes fail by
monkeypatching (ENOSPC from the writer, EROFS from the temporary's creation, a MIDI writer that
silently writes nothing) and run everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import symusic
import torch
from conftest import make_checkpoint
from hostile import GOOD, build_corpus, odd_corpus, scale

from musicgen.checkpoint import convert_to_folder, read_payload, save_checkpoint
from musicgen.cli import main
from musicgen.config import load_config
from musicgen.data.prepare import prepare
from musicgen.errors import MusicgenError
from musicgen.generation.api.render import MAX_BAR_LINES, bar_lines, render_midi
from musicgen.io import atomic_write_bytes, atomic_write_text, write_score
from musicgen.limits import Limits, check_score, score_bars
from musicgen.tokenizers import build_tokenizer
from musicgen.train.log import read_log
from musicgen.train.run import train

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "pop909" / "tiny.yaml"
SONGS = sorted((ROOT / "tests" / "data" / "pop909").glob("*/*.mid"))


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line_error(err: str) -> str:
    """The single `error: ...` line a failing command prints last (progress bars may come
    before it; a traceback never)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    return errors[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return build_corpus(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ckpt")
    return {name: make_checkpoint(folder, name) for name in ("remi", "groove")}


# ---------------------------------------------------------------------------------------------
# hostile MIDI files

REASONS = {
    "huge_delta_tpb1.mid": "67,108,864 bars > the limit of 4,096",
    "huge_delta_tpb480.mid": "139,810 bars > the limit of 4,096",
    "empty.mid": "empty file",
    "truncated_header.mid": "corrupt MIDI",
    "truncated_track.mid": "corrupt MIDI",
    "text.mid": "not a MIDI file",
    "header_only.mid": "no notes",
    "zero_tpb.mid": "0 ticks per beat",
    "no_notes.mid": "no notes",
    "drums_only.mid": "no notes",
    "random_bytes.mid": "not a MIDI file",
    "folder.mid": "is a directory",
}


@pytest.mark.parametrize("workers", [1, 2])
def test_prepare_skips_every_hostile_file_with_its_reason(corpus, tmp_path, workers):
    folder = next(iter(corpus.values())).parent
    summary = prepare("folder", folder, tmp_path, tokenizer="remi", workers=workers)
    rows = (tmp_path / "skipped.csv").read_text().splitlines()[1:]
    skipped = {row.split(",", 1)[0]: row.split(",", 1)[1] for row in rows}
    assert set(skipped) == set(REASONS)
    for name, reason in REASONS.items():
        assert reason in skipped[name], (name, skipped[name])
    kept = [json.loads(line)["path"] for line in (tmp_path / "manifest.jsonl").open()]
    assert sorted(kept) == sorted(GOOD) and summary["songs"] == len(GOOD)


ODD_REASONS = {
    "smpte_division.mid": "Division type is not ticks per quarter",
    "chunk_length_lies.mid": "corrupt MIDI",
    "meta_length_lies.mid": "corrupt MIDI",
    "huge_duration.mid": "139,810 bars > the limit",
    "velocity_zero_only.mid": "no notes",
    "running_status_garbage.mid": "corrupt MIDI",
    "data_byte_high_bit.mid": "corrupt MIDI",
    "sysex_unterminated.mid": "corrupt MIDI",
}


def test_odd_files_are_tokenized_or_skipped_and_the_rest_render(tmp_path):
    files = build_corpus(tmp_path / "in", odd_corpus())
    prepare("folder", tmp_path / "in", tmp_path / "out", tokenizer="remi", workers=2)
    rows = (tmp_path / "out" / "skipped.csv").read_text().splitlines()[1:]
    skipped = {row.split(",", 1)[0]: row.split(",", 1)[1] for row in rows}
    assert set(skipped) == set(ODD_REASONS)
    for name, reason in ODD_REASONS.items():
        assert reason in skipped[name], (name, skipped[name])
    for name in set(files) - set(ODD_REASONS):  # the readable ones: a piano roll each
        assert render_midi(files[name], tmp_path / "png", png=True)[0].stat().st_size > 0


def test_limits_are_read_from_the_end_tick_before_tokenizing(corpus):
    score = symusic.Score(str(corpus["huge_delta_tpb1.mid"]))
    assert score_bars(score) == pytest.approx(2**28 / 4, rel=1e-6)
    with pytest.raises(MusicgenError, match="too long"):
        check_score(score, "x")
    ok = symusic.Score.from_midi(scale(bars=8))
    check_score(ok, "x")  # 8 bars pass
    with pytest.raises(MusicgenError, match="8 bars > the limit of 4"):
        check_score(ok, "x", Limits(max_bars=4))
    with pytest.raises(MusicgenError, match="minutes > the limit"):
        check_score(ok, "x", Limits(max_minutes=0.1))  # 32 beats at 120 qpm = 0.27 min
    with pytest.raises(MusicgenError, match="too many notes"):
        check_score(ok, "x", Limits(max_tokens=10))


def test_prepare_token_and_bar_limits_are_options(corpus, tmp_path, capsys):
    folder = corpus["good_scale.mid"].parent
    rc, out, _ = run_cli(
        capsys,
        "prepare",
        "--dataset",
        "folder",
        "--input",
        folder,
        "--output",
        tmp_path / "a",
        "--tokenizer",
        "remi",
        "--workers",
        1,
        "--max-bars",
        5,
    )
    assert rc == 0 and "prepared 1 songs" in out  # 4 bars kept, 6 bars skipped
    assert "6 bars > the limit of 5" in (tmp_path / "a" / "skipped.csv").read_text()
    rc, _, err = run_cli(
        capsys,
        "prepare",
        "--dataset",
        "folder",
        "--input",
        folder,
        "--output",
        tmp_path / "b",
        "--tokenizer",
        "remi",
        "--workers",
        1,
        "--max-song-tokens",
        20,
    )
    assert rc == 1 and "none of the" in one_line_error(err)
    assert "tokens" in (tmp_path / "b" / "skipped.csv").read_text()


@pytest.mark.parametrize("name", ["remi", "groove"])
def test_tokenizers_refuse_hostile_files_with_one_line(corpus, name):
    tok = build_tokenizer(name)
    for file in set(REASONS) - ({"drums_only.mid"} if name == "groove" else set()):
        with pytest.raises(MusicgenError) as info:
            tok.encode(corpus[file])
        assert "\n" not in str(info.value)


def test_render_refuses_a_huge_piece_and_long_pieces_draw_few_bar_lines(corpus, tmp_path, capsys):
    rc, _, err = run_cli(
        capsys, "render", corpus["huge_delta_tpb1.mid"], "--png", "--out", tmp_path
    )
    assert rc == 1 and "too long" in one_line_error(err)
    assert len(bar_lines(4.0 * 2**26)) <= MAX_BAR_LINES
    assert bar_lines(16.0) == [0.0, 4.0, 8.0, 12.0, 16.0]
    rc, out, _ = run_cli(capsys, "render", corpus["good_scale.mid"], "--png", "--out", tmp_path)
    assert rc == 0 and (tmp_path / "good_scale.png").stat().st_size > 0


def test_continue_refuses_a_huge_prompt(corpus, ckpts, tmp_path, capsys):
    rc, _, err = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["remi"],
        "--prompt",
        corpus["huge_delta_tpb1.mid"],
        "--out",
        tmp_path,
        "--device",
        "cpu",
    )
    assert rc == 1 and "too long" in one_line_error(err)


def test_evaluate_music_skips_hostile_files_and_goes_on(corpus, tmp_path, capsys):
    folder = corpus["good_scale.mid"].parent
    rc, _, _ = run_cli(
        capsys, "evaluate", "music", folder, "--out", tmp_path, "--tokenizer", "remi"
    )
    assert rc == 0
    skipped = {
        Path(s["path"]).name: s["reason"]
        for s in json.loads((tmp_path / "music.json").read_text())["skipped"]
    }
    assert set(skipped) == set(REASONS)
    assert "too long" in skipped["huge_delta_tpb1.mid"]


# ---------------------------------------------------------------------------------------------
# batch jobs: duplicates, a worker that dies


def _song_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    for s in SONGS:
        shutil.copy(s, root / s.name)
    return root


def test_byte_identical_files_are_dropped_before_the_split(tmp_path):
    src = _song_folder(tmp_path / "in")
    (src / "validation").mkdir()
    shutil.copy(SONGS[0], src / "validation" / "copy.mid")  # identical bytes, another split
    shutil.copy(SONGS[0], src / "zz_copy.mid")
    summary = prepare("folder", src, tmp_path / "out", tokenizer="remi", workers=1)
    rows = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").open()]
    hashes = [r["hash"] for r in rows]
    assert len(hashes) == len(set(hashes)) == len(SONGS)
    assert summary["duplicates"] == 2
    skipped = (tmp_path / "out" / "skipped.csv").read_text()
    assert skipped.count(f"duplicate of {SONGS[0].name}") == 2


def test_prepare_survives_a_worker_killed_mid_run(tmp_path, monkeypatch):
    """A worker SIGKILLed (as by the OOM killer) while it holds one song: the run neither hangs
    nor loses the other songs; that song is skipped with the reason."""
    import musicgen.data.prepare as prep

    src = _song_folder(tmp_path / "in")
    victim = SONGS[1].name
    real = prep.process_song

    def deadly(job, tok=None):
        if job.rel == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(job, tok)

    monkeypatch.setattr(prep, "process_song", deadly)  # forked workers inherit the patch
    summary = prepare("folder", src, tmp_path / "out", tokenizer="remi", workers=2)
    assert summary["songs"] == len(SONGS) - 1
    skipped = (tmp_path / "out" / "skipped.csv").read_text()
    assert f"{victim},the worker process died on this file (killed by signal 9" in skipped


def test_prepare_stops_in_one_line_when_a_worker_cannot_write(tmp_path, monkeypatch):
    import musicgen.data.prepare as prep

    def full(path, arr):
        raise MusicgenError(f"{path}: cannot write (No space left on device)")

    monkeypatch.setattr(prep, "_save_npy", full)
    with pytest.raises(MusicgenError, match="cannot write .No space left on device"):
        prepare("folder", _song_folder(tmp_path / "in"), tmp_path / "out", "remi", workers=2)


# ---------------------------------------------------------------------------------------------
# full and read-only disks


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs, or skip where this process may not mount one."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root; the simulated ENOSPC/EROFS tests cover it")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip("cannot mount a tmpfs here; the simulated ENOSPC/EROFS tests cover it")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(mnt: Path) -> None:
    """Write zeros (into a new filler file) until the file system is full."""
    with open(mnt / f"filler{len(list(mnt.glob('filler*')))}", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def song_bytes() -> bytes:
    return SONGS[0].read_bytes()


def test_generate_on_a_full_disk_fails_in_one_line_and_keeps_the_old_file(ckpts, small_fs, capsys):
    args = [
        "generate",
        "--checkpoint",
        ckpts["remi"],
        "--out",
        small_fs,
        "--num",
        1,
        "--max-tokens",
        16,
        "--seed",
        3,
        "--device",
        "cpu",
    ]
    old = small_fs / "tiny_remi_3_0.mid"
    old.write_bytes(song_bytes())
    fill(small_fs)
    rc, out, err = run_cli(capsys, *args, "--overwrite")
    assert rc == 1 and "cannot write" in one_line_error(err) and "wrote" not in out
    assert old.read_bytes() == song_bytes()  # the good file was not replaced
    old.unlink()
    fill(small_fs)
    rc, out, err = run_cli(capsys, *args)
    assert rc == 1 and "cannot write" in one_line_error(err)
    assert all(p.name.startswith("filler") for p in small_fs.iterdir())  # no empty .mid, .tmp


def test_export_on_a_full_disk_keeps_the_file_it_would_overwrite(ckpts, small_fs, tmp_path, capsys):
    tok = build_tokenizer("remi")
    tokens = tmp_path / "t.json"
    tokens.write_text(json.dumps({"tokenizer": "remi", "ids": tok.encode(SONGS[0])[:200]}))
    target = small_fs / "song.mid"
    target.write_bytes(song_bytes())
    fill(small_fs)
    rc, out, err = run_cli(
        capsys, "export", tokens, "--checkpoint", ckpts["remi"], "-o", target, "--overwrite"
    )
    assert rc == 1 and f"{target}: cannot write" in one_line_error(err)
    assert target.read_bytes() == song_bytes()


def test_prepare_and_train_on_a_full_disk_are_one_line_errors(prepared, small_fs, capsys):
    fill(small_fs)
    rc, _, err = run_cli(
        capsys,
        "prepare",
        "--dataset",
        "folder",
        "--input",
        SONGS[0].parent,
        "--output",
        small_fs / "p",
        "--workers",
        1,
        "--tokenizer",
        "remi",
    )
    assert rc == 1 and "No space left on device" in one_line_error(err)
    (small_fs / "filler0").unlink()
    (small_fs / "filler1").write_bytes(b"\0" * 200_000)  # room for the log, not a checkpoint
    rc, _, err = run_cli(
        capsys,
        "train",
        "--config",
        TINY,
        "--data",
        prepared,
        "--out",
        small_fs / "run",
        "--train.max_steps=2",
    )
    assert rc == 1 and "cannot write" in one_line_error(err)
    assert not list((small_fs / "run").glob("*.pt"))


def test_read_only_disk(small_fs, capsys):
    (small_fs / "keep.txt").write_text("old")
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    with pytest.raises(MusicgenError, match="keep.txt: cannot write .Read-only file system"):
        atomic_write_text(small_fs / "keep.txt", "new")
    assert (small_fs / "keep.txt").read_text() == "old"
    rc, _, err = run_cli(capsys, "render", SONGS[0], "--png", "--out", small_fs / "sub")
    assert rc == 1 and "Read-only file system" in one_line_error(err)


# the same failures, simulated


@pytest.mark.parametrize("keep", [0, 100], ids=["nothing", "torn"])
def test_simulated_silent_short_write_replaces_nothing(tmp_path, monkeypatch, keep):
    """A writer that reports success but leaves 0 or 100 bytes (what symusic's own file writer
    does on a full disk) is caught by the size and read-back checks."""
    target = tmp_path / "a.mid"
    target.write_bytes(song_bytes())
    score = symusic.Score.from_midi(song_bytes())
    real = Path.write_bytes
    with monkeypatch.context() as m:
        m.setattr(Path, "write_bytes", lambda self, data: real(self, data[:keep]))
        with pytest.raises(MusicgenError, match="a.mid: cannot write"):
            write_score(score, target)
    assert target.read_bytes() == song_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["a.mid"]
    write_score(score, tmp_path / "b.mid")  # the real writer passes the same checks
    assert symusic.Score(str(tmp_path / "b.mid")).note_num() == score.note_num()


def test_simulated_enospc_and_erofs(tmp_path, monkeypatch):
    target = tmp_path / "x.bin"
    target.write_bytes(b"old")

    def enospc(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(Path, "write_bytes", enospc)
        with pytest.raises(MusicgenError, match="x.bin: cannot write .No space left on device"):
            atomic_write_bytes(target, b"new")

    def erofs(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    with monkeypatch.context() as m:
        m.setattr(tempfile, "mkstemp", erofs)
        with pytest.raises(MusicgenError, match="cannot write .Read-only file system"):
            atomic_write_bytes(target, b"new")

    def eacces(src, dst):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    with monkeypatch.context() as m:
        m.setattr(os, "replace", eacces)
        with pytest.raises(MusicgenError, match="x.bin: cannot write .Permission denied"):
            atomic_write_bytes(target, b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]
    assert target.read_bytes() == b"old"


def test_simulated_full_disk_under_torch_save(tmp_path, monkeypatch, ckpts):
    payload = read_payload(ckpts["remi"])

    def torn(obj, f, *a, **k):
        Path(f).write_bytes(b"PK")
        raise RuntimeError("[enforce fail at inline_container.cc] . unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", torn)
    from musicgen.config import config_from_dict
    from musicgen.model import build_model

    cfg = config_from_dict(payload["config"])
    with pytest.raises(MusicgenError, match="cannot write .*is the disk full"):
        save_checkpoint(tmp_path / "last.pt", build_model(cfg.model), cfg, build_tokenizer("remi"))
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# command-line misuse: argv -> (exit code, what the one error line says)


def _incomplete(folder: Path, ckpt: Path, drop: str) -> Path:
    payload = torch.load(ckpt, weights_only=True)
    del payload[drop]
    path = folder / f"no_{drop}.pt"
    torch.save(payload, path)
    return path


@pytest.fixture(scope="module")
def misuse_files(tmp_path_factory, ckpts, corpus) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("misuse")
    (d / "a_file").write_text("x")
    (d / "cycle_a.yaml").write_text("base: cycle_b.yaml\nname: a\n")
    (d / "cycle_b.yaml").write_text("base: cycle_a.yaml\n")
    (d / "self.yaml").write_text("base: self.yaml\n")
    (d / "garbage.pt").write_bytes(b"not a checkpoint at all")
    (d / "run_binary").mkdir()
    (d / "run_binary" / "log.jsonl").write_bytes(bytes(range(256)) * 4)
    (d / "run_torn").mkdir()
    (d / "run_torn" / "log.jsonl").write_text('{"kind": "train", "step": 1}\n{"ki\n{"step": 3}\n')
    (d / "run_badstep").mkdir()
    (d / "run_badstep" / "log.jsonl").write_text('{"kind": "train", "step": "x"}\n')
    (d / "tokens.json").write_text('{"tokenizer": "remi", "ids": [1, 2]}')
    (d / "tok_huge.yaml").write_text("name: remi\nnum_tempos: 100000000\n")
    (d / "tok_null.yaml").write_text("name: groove\nbeats_per_bar: null\n")
    (d / "tok_null.json").write_text('{"name": "remi", "options": {"num_velocities": null}}')
    folder = convert_to_folder(ckpts["remi"], d / "model_huge")
    meta = json.loads((folder / "config.json").read_text())
    meta["config"]["model"]["n_layers"] = 10**6
    (folder / "config.json").write_text(json.dumps(meta))
    folder = convert_to_folder(ckpts["remi"], d / "model_nan")
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    weights["embed.weight"] = torch.full_like(weights["embed.weight"], float("nan"))
    save_file(weights, folder / "model.safetensors")
    files = {
        "no_config": _incomplete(d, ckpts["remi"], "config"),
        "no_version": _incomplete(d, ckpts["remi"], "version"),
    }
    return {**files, **{p.name: p for p in d.iterdir()}, **corpus, **ckpts}


MISUSE = [
    # (argv, exit code, substring of the error); {name} is a file of `misuse_files`
    ("train --config {cycle_a.yaml}", 1, "'base:' presets form a cycle"),
    ("train --config {self.yaml}", 1, "form a cycle (self.yaml -> self.yaml)"),
    ("train --config {a_file}.missing", 1, "config file not found"),
    ("train --config TINY --train.batch_size=0", 1, "train.batch_size: must be >= 1, got 0"),
    ("train --config TINY --train.batch_size=-3", 1, "train.batch_size: must be >= 1"),
    ("train --config TINY --train.val_every=0", 1, "train.val_every: must be >= 1"),
    ("train --config TINY --train.ckpt_every=-1", 1, "train.ckpt_every: must be >= 1"),
    ("train --config TINY --log.every=0", 1, "log.every: must be >= 1"),
    ("train --config TINY --data.workers=-1", 1, "data.workers: must be >= 0"),
    (
        "train --config TINY --data=PREPARED --data.drop_instrument_p=0.5",
        1,
        "data.drop_instrument_p: 0.5 needs a multi-track tokenizer (groove)",
    ),
    ("train --config TINY --data.workers=100000", 1, "data.workers: must be >= 0 and <= 256"),
    ("train --config TINY --model.n_layers=1000000", 1, "model.n_layers: must be >= 1 and <= 256"),
    (
        "prepare --dataset folder --input IN --output OUT --workers 1000000",
        1,
        "--workers: must be >= 1 and <= 256, got 1000000",
    ),
    ("train --config TINY --optim.lr=0", 1, "optim.lr: must be > 0, got 0"),
    ("train --config TINY --optim.lr=-1e-3", 1, "optim.lr: must be > 0"),
    ("train --config TINY --optim.betas=[0.9]", 1, "optim.betas: must be two values in [0, 1)"),
    ("train --config TINY --optim.betas=[1.5,0.9]", 1, "optim.betas: must be two values"),
    ("train --config TINY --data.transpose=[3]", 1, "data.transpose: must be two semitone"),
    ("train --config TINY --data.transpose=[6,-6]", 1, "with low <= high"),
    ("train --config TINY --train.grad_accum=0", 1, "train.grad_accum: must be >= 1"),
    ("train --config TINY --train.max_steps=-1", 1, "train.max_steps: must be >= 0"),
    (
        "train --config TINY --train.precision=fp64",
        1,
        "train.precision: unknown value 'fp64'; choose one of: auto, fp32, bf16, fp16",
    ),
    ("train --config TINY --optim.schedule=linear", 1, "optim.schedule: unknown value 'linear'"),
    (f"train --config TINY --train.seed={2**70}", 1, "train.seed: must be >= 0 and <= 4294967295"),
    ("train --config TINY --train.seed=-1", 1, "train.seed: must be >= 0"),
    ("train --config TINY --data.drop_instrument_p=2", 1, "must be >= 0 and <= 1"),
    ("train --config TINY --train.device=mps --data={a_file}", 1, "MPS (Apple GPU) was asked"),
    ("train --config TINY --train.device=tpu --data={a_file}", 1, "unknown device 'tpu'"),
    ("train --config TINY --data={a_file} --out={a_file}.run --resume", 1, "nothing to resume"),
    (
        f"generate --checkpoint {{remi}} --out OUT --seed {2**70}",
        1,
        "--seed: must be >= 0 and <= 4294967295",
    ),
    ("generate --checkpoint {remi} --out OUT --seed -5", 1, "--seed: must be >= 0"),
    ("generate --checkpoint {remi} --out OUT --device mps", 1, "MPS (Apple GPU) was asked"),
    ("generate --checkpoint {remi} --out OUT --device cuda:7", 1, "--device"),
    ("generate --checkpoint {remi} --out {a_file}", 1, "is a file, not a folder"),
    ("generate --checkpoint {remi} --out OUT --num 0", 1, "--num: must be >= 1, got 0"),
    ("generate --checkpoint {remi} --out OUT --batch-size -1", 1, "--batch-size: must be >= 1"),
    ("generate --checkpoint {remi} --out OUT --temperature -1", 1, "temperature"),
    ("generate --checkpoint {remi} --out OUT --num many", 2, "invalid int value: 'many'"),
    ("generate --checkpoint {no_config} --out OUT", 1, "incomplete checkpoint (no valid 'config'"),
    ("generate --checkpoint {no_version} --out OUT", 1, "incomplete checkpoint (no valid 'versi"),
    ("generate --checkpoint {garbage.pt} --out OUT", 1, "not a musicgen checkpoint"),
    ("generate --checkpoint {a_file}.none --out OUT", 1, "checkpoint not found"),
    ("continue --checkpoint {remi} --prompt {text.mid} --out OUT", 1, "cannot read MIDI"),
    ("continue --checkpoint {remi} --prompt {empty.mid} --out OUT", 1, "empty file"),
    ("continue --checkpoint {remi} --prompt {huge_delta_tpb480.mid} --out OUT", 1, "too long"),
    ("continue --checkpoint {remi} --prompt {folder.mid} --out OUT", 1, "is a directory"),
    (
        "evaluate nll --checkpoint {remi} --data {a_file} --batch-size 0",
        1,
        "--batch-size: must be >= 1, got 0",
    ),
    ("evaluate nll --checkpoint {remi} --data {a_file} --max-len 1", 1, "--max-len: must be >="),
    ("evaluate nll --checkpoint {remi} --data {a_file} --seed -1", 1, "--seed: must be >= 0"),
    ("evaluate style --checkpoint {remi} --prompts {a_file} --samples 0", 1, "--samples"),
    ("plot log {run_binary}", 1, "not a training log (binary data"),
    ("plot log {run_torn}", 1, "line 2 is not JSON"),
    ("plot log {run_badstep}", 1, "line 1: 'step' must be a count, got 'x'"),
    ("plot log {a_file}.nothing", 1, "training log not found"),
    ("render {huge_delta_tpb1.mid} --png --out OUT", 1, "too long (67,108,864 bars"),
    ("render {text.mid} --png --out OUT", 1, "not a readable MIDI file"),
    ("render {good_scale.mid} --png --out {a_file}", 1, "is a file, not a folder"),
    ("export {tokens.json} --checkpoint {remi} -o OUT", 1, "is a directory"),
    ("export {tokens.json} --checkpoint {remi} -o {a_file}/x.mid", 1, "is a file, not a folder"),
    ("export {tokens.json} --checkpoint {no_config} -o OUT/x.mid", 1, "incomplete checkpoint"),
    ("prepare --dataset folder --input {a_file} --output OUT", 1, "input folder not found"),
    (
        "prepare --dataset folder --input IN --output OUT --workers 0",
        1,
        "--workers: must be >= 1 and <= 256, got 0",
    ),
    ("prepare --dataset folder --input IN --output OUT --max-bars 0", 1, "--max-bars: must be"),
    ("prepare --dataset folder --input IN --output {a_file}", 1, "is a file, not a folder"),
    ("prepare --dataset jazz --input IN --output OUT", 2, "invalid choice: 'jazz'"),
    ("prepare --dataset folder --input IN --output OUT --max-size-mb 0", 1, "--max-size-mb"),
    ("prepare --dataset folder --input IN --output OUT --max-size-mb nan", 1, "must be a finite"),
    ("prepare --dataset folder --input IN --output OUT --max-minutes inf", 1, "must be a finite"),
    ("prepare --dataset folder --input IN --output OUT --max-minutes -1", 1, "--max-minutes"),
    (
        "prepare --dataset folder --input IN --output OUT --max-song-tokens 0",
        1,
        "--max-song-tokens",
    ),
    ("prepare --dataset folder --input IN --output OUT --tokenizer bpe", 1, "unknown tokenizer"),
    ("prepare --dataset folder --input OUT --output OUT", 1, "no MIDI files"),
    ("prepare --dataset folder --input IN --output OUT --workers two", 2, "invalid int value"),
    ("generate --checkpoint {remi} --out OUT --top-p 1.5", 1, "--top-p: must be >= 0.001 and <= 1"),
    ("generate --checkpoint {remi} --out OUT --top-k -1", 1, "--top-k: must be >= 0"),
    ("generate --checkpoint {remi} --out OUT --max-tokens 0", 1, "--max-tokens: must be >= 1"),
    ("generate --checkpoint {remi} --out OUT --bars 0", 1, "--bars: must be >= 1"),
    ("generate --checkpoint {remi} --out OUT --bars 2 --max-tokens 9", 2, "not allowed with"),
    ("generate --checkpoint {remi}", 2, "the following arguments are required: --out"),
    (
        "continue --checkpoint {remi} --prompt {good_scale.mid} --out OUT --prompt-bars 3:1",
        1,
        "need 0 <= START < END",
    ),
    (
        "continue --checkpoint {remi} --prompt {good_scale.mid} --out OUT --prompt-bars x",
        1,
        "expected START:END",
    ),
    (
        "continue --checkpoint {remi} --prompt {good_scale.mid} --out OUT --bars 9",
        1,
        "has 4 bars, fewer than the 9",
    ),
    ("continue --checkpoint {remi} --prompt {a_file}.mid --out OUT", 1, "prompt file not found"),
    ("train --config TINY --model.nlayers=2", 1, "unknown key 'model.nlayers'"),
    ("train --config TINY --train.batch_size=abc", 1, "'train.batch_size' must be int"),
    ("train --config TINY --optim.lr=fast", 1, "'optim.lr' must be float"),
    ("train --config TINY --train.precision", 1, "must look like --section.key=value"),
    ("train --config TINY --data.transpose=5", 1, "'data.transpose' must be a list"),
    ("train --config {a_file}", 1, "a config file must be a mapping"),
    ("evaluate music {a_file}.none --out OUT", 1, "not a folder"),
    ("evaluate music OUT --tokenizer bpe --out OUT", 1, "bpe"),
    ("export {a_file}.json --checkpoint {remi} -o OUT/x.mid", 1, "token file not found"),
    ("export {random_bytes.mid} --checkpoint {remi} -o OUT/x.mid", 1, "not a text or JSON"),
    ("export {tokens.json} --checkpoint {groove} -o OUT/x.mid", 1, "not 'groove'"),
    ("plot kernels --checkpoint {garbage.pt} --out OUT", 1, "not a musicgen checkpoint"),
    (
        "plot attention --checkpoint {remi} --midi {good_scale.mid} --tokens 1 --out OUT",
        1,
        "--tokens: must be >= 2",
    ),
    (
        "plot attention --checkpoint {remi} --midi {good_scale.mid} --seed -1 --out OUT",
        1,
        "--seed: must be >= 0",
    ),
    ("plot attention --checkpoint {remi} --midi {huge_delta_tpb1.mid} --out OUT", 1, "too long"),
    ("render {a_file}.mid --png --out OUT", 1, "MIDI file not found"),
    ("render {folder.mid} --png --out OUT", 1, "MIDI file not found"),
    ("frobnicate", 2, "invalid choice: 'frobnicate'"),
    # hostile tokenizer files and model folders
    (
        "prepare --dataset folder --input IN --output OUT --tokenizer {tok_huge.yaml}",
        1,
        "tok_huge.yaml: tokenizer: num_tempos: must be >= 1 and <= 1024, got 100000000",
    ),
    (
        "prepare --dataset folder --input IN --output OUT --tokenizer {tok_null.yaml}",
        1,
        "tok_null.yaml: tokenizer: 'beats_per_bar' must be int, got None",
    ),
    (
        "export {tokens.json} --tokenizer {tok_null.json} -o OUT/x.mid",
        1,
        "tok_null.json: tokenizer: 'num_velocities' must be int, got None",
    ),
    (
        "generate --checkpoint {model_huge} --out OUT",
        1,
        "config.json: config: model.n_layers: must be >= 1 and <= 256, got 1000000",
    ),
    ("plot kernels --checkpoint {model_huge} --out OUT", 1, "model.n_layers: must be >= 1"),
    (
        "generate --checkpoint {model_nan} --out OUT",
        1,
        "model.safetensors: tensor embed.weight holds NaN or infinite values",
    ),
]


@pytest.mark.parametrize("argv,code,message", MISUSE, ids=[m[0][:60] for m in MISUSE])
def test_cli_misuse_is_one_line_and_a_nonzero_exit(
    argv, code, message, misuse_files, tmp_path, capsys, request
):
    (tmp_path / "out").mkdir()
    if "PREPARED" in argv:
        argv = argv.replace("PREPARED", str(request.getfixturevalue("prepared")))
    subs = {"TINY": str(TINY), "OUT": str(tmp_path / "out"), "IN": str(SONGS[0].parent)}
    words = [
        re.sub(r"\{([^}]+)\}", lambda m: str(misuse_files[m.group(1)]), w) for w in argv.split()
    ]
    words = [subs.get(w, w.replace("OUT/", f"{tmp_path / 'out'}/")) for w in words]
    if code == 2:  # argparse's own usage errors
        with pytest.raises(SystemExit) as info:
            main(words)
        assert info.value.code == 2 and message in capsys.readouterr().err
        return
    rc, _, err = run_cli(capsys, *words)
    assert rc == code
    assert message in one_line_error(err)


def test_a_bug_is_one_line_unless_debugging(monkeypatch, tmp_path, capsys):
    import musicgen.commands.render as render

    def broken(args):
        raise KeyError("min_tokens")

    monkeypatch.setattr(render, "run", broken)
    rc, _, err = run_cli(capsys, "render", str(SONGS[0]), "--png", "--out", str(tmp_path))
    assert rc == 3
    line = one_line_error(err)
    assert "error: internal error in musicgen render (KeyError: 'min_tokens')" in line
    monkeypatch.setenv("MUSICGEN_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["render", str(SONGS[0]), "--png", "--out", str(tmp_path)])


def test_every_shipped_preset_passes_validation():
    presets = [p for p in (ROOT / "configs").glob("*/*.yaml") if p.parent.name != "tokenizer"]
    assert len(presets) > 5
    for p in presets:
        load_config(p)


def test_checkpoint_load_errors_are_one_line(misuse_files):
    from musicgen.checkpoint import load_checkpoint

    for name in ("no_config", "no_version", "garbage.pt"):
        with pytest.raises(MusicgenError):
            load_checkpoint(misuse_files[name])


# ---------------------------------------------------------------------------------------------
# training: max_steps=0, stray temporaries, torn and binary logs, SIGTERM


def tiny(prepared: Path, *overrides: str):
    cfg = load_config(TINY, list(overrides))
    cfg.data.path = str(prepared)
    return cfg


def test_max_steps_zero_writes_the_initialised_model(prepared, tmp_path, capsys):
    rc, out, _ = run_cli(
        capsys,
        "train",
        "--config",
        TINY,
        "--data",
        prepared,
        "--out",
        tmp_path,
        "--train.max_steps=0",
    )
    assert rc == 0 and f"wrote {tmp_path / 'last.pt'} (step 0)" in out
    assert read_payload(tmp_path / "last.pt")["train_state"]["step"] == 0


def test_resume_below_the_checkpoint_step_and_without_training_state(prepared, tmp_path):
    train(tiny(prepared, "train.max_steps=2", "train.val_every=100"), tmp_path)
    with pytest.raises(MusicgenError, match="train.max_steps: must be >= 2 .*got 1"):
        train(tiny(prepared, "train.max_steps=1"), tmp_path, resume=True)
    payload = torch.load(tmp_path / "last.pt", weights_only=True)
    payload["train_state"] = {}
    torch.save(payload, tmp_path / "last.pt")
    with pytest.raises(MusicgenError, match="not a resumable training checkpoint"):
        train(tiny(prepared, "train.max_steps=4"), tmp_path, resume=True)


def test_stray_temporaries_are_removed_and_a_torn_log_resumes(prepared, tmp_path):
    args = ["train.max_steps=4", "train.ckpt_every=2", "train.val_every=100"]
    train(tiny(prepared, *args), tmp_path)
    stray = [tmp_path / ".last.pt.k2j3h4.tmp", tmp_path / ".log.jsonl.x1.tmp"]
    for s in stray:
        s.write_bytes(b"half a checkpoint")
    with open(tmp_path / "log.jsonl", "a") as fh:
        fh.write('{"kind": "train", "st')  # torn by a crash mid-write
    train(tiny(prepared, "train.max_steps=6", *args[1:]), tmp_path, resume=True)
    assert not any(s.exists() for s in stray)
    steps = [r["step"] for r in read_log(tmp_path) if r["kind"] == "train"]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_resume_with_a_binary_log_is_one_line(prepared, tmp_path):
    train(tiny(prepared, "train.max_steps=2", "train.val_every=100"), tmp_path)
    (tmp_path / "log.jsonl").write_bytes(b"\x00\xff\xfe" * 100)
    with pytest.raises(MusicgenError, match="not a training log"):
        train(tiny(prepared, "train.max_steps=4"), tmp_path, resume=True)


def test_sigterm_saves_like_ctrl_c(prepared, tmp_path):
    run = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "musicgen.cli",
        "train",
        "--config",
        str(TINY),
        "--data",
        str(prepared),
        "--out",
        str(run),
        "--train.max_steps=100000",
        "--train.ckpt_every=100000",
        "--train.val_every=100000",
        "--log.every=1",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if len(read_log(run, required=False)) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "terminated"
    saved = read_payload(run / "last.pt")["train_state"]["step"]
    logged = max(r["step"] for r in read_log(run))
    assert saved >= logged >= 3
    assert not list(run.glob(".*.tmp"))


def _train_subprocess(prepared: Path, run: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "musicgen.cli", "train", "--config", str(TINY)]
    cmd += ["--data", str(prepared), "--out", str(run), "--train.max_steps=100000"]
    cmd += ["--train.ckpt_every=100000", "--train.val_every=100000", "--log.every=1", *extra]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job or a SLURM step
    )


def _processes_naming(path: Path) -> list[int]:
    """Live (non-zombie) processes whose command line holds `path` (forked workers do)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(path).encode() in cmd and state not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def _wait_for_steps(proc: subprocess.Popen, run: Path, steps: int) -> None:
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if len(read_log(run, required=False)) >= steps:
            return
        time.sleep(0.05)


@pytest.mark.parametrize(
    "signum,last", [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")]
)
def test_a_signal_to_the_group_with_loader_workers_saves_and_resumes(
    prepared, tmp_path, capsys, signum, last
):
    """SIGTERM or Ctrl-C to the whole process group (DataLoader workers included) of a run with
    data.workers=2: the step finishes, last.pt is saved, exit 143 / 130, no traceback, and the
    run resumes. Meanwhile a second train on the same folder is refused at once (RUN/.lock)."""
    run = tmp_path / "run"
    proc = _train_subprocess(prepared, run, "--data.workers=2")
    try:
        _wait_for_steps(proc, run, 3)
        rc, _, err = run_cli(capsys, "train", "--config", TINY, "--data", prepared, "--out", run)
        assert rc == 1
        line = one_line_error(err)
        assert f"{run}: another musicgen train (pid {proc.pid}) is writing this folder" in line
    finally:  # a failed check must not leave the run training
        os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == last
    deadline = time.time() + 60  # the loader's workers leave with it: none outlives the run
    while _processes_naming(run) and time.time() < deadline:
        time.sleep(0.1)
    assert not _processes_naming(run)
    saved = read_payload(run / "last.pt")["train_state"]["step"]
    assert saved >= max(r["step"] for r in read_log(run)) >= 3
    result = train(tiny(prepared, f"train.max_steps={saved + 2}", "data.workers=2"), run, True)
    assert result.step == saved + 2


def test_prepared_arrays_survive_the_verified_writer(prepared):
    """The prepared layout is still readable after the writes went through the checks."""
    tokens = np.load(prepared / "train" / "tokens.npy")
    offsets = np.load(prepared / "train" / "offsets.npy")
    assert offsets[-1] == len(tokens) > 0


# ---------------------------------------------------------------------------------------------
# hostile model folders, checkpoints, tokenizer files and prepared datasets

from hostile import CONFIG_CASES, GROOVE_CASES, TOKENIZER_CASES, set_dotted  # noqa: E402

from musicgen.checkpoint import load_checkpoint  # noqa: E402
from musicgen.data.dataset import PreparedSplit  # noqa: E402
from musicgen.tokenizers import load_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def model_folder(ckpts, tmp_path_factory) -> Path:
    return convert_to_folder(ckpts["remi"], tmp_path_factory.mktemp("folder") / "remi")


def _copy_folder(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_json(path: Path, dotted: str, value) -> None:
    path.write_text(json.dumps(set_dotted(json.loads(path.read_text()), dotted, value)))


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "internal error" not in text
    return text


@pytest.mark.parametrize("case", CONFIG_CASES, ids=list(CONFIG_CASES))
def test_a_model_folder_with_a_hostile_config_is_refused_before_allocating(
    case, model_folder, tmp_path
):
    dotted, value, message = CONFIG_CASES[case]
    folder = _copy_folder(model_folder, tmp_path / "m")
    _edit_json(folder / "config.json", f"config.{dotted}", value)
    with pytest.raises(MusicgenError) as info:
        load_checkpoint(folder)
    text = one_line(info)
    assert text.startswith(f"{folder / 'config.json'}: ") and message in text


@pytest.mark.parametrize("case", ["layers_1e6", "layers_null", "params_too_many"])
def test_a_pt_with_a_hostile_config_is_refused(case, ckpts, tmp_path):
    dotted, value, message = CONFIG_CASES[case]
    payload = torch.load(ckpts["remi"], weights_only=True)
    path = tmp_path / "hostile.pt"
    torch.save(set_dotted(payload, f"config.{dotted}", value), path)
    with pytest.raises(MusicgenError) as info:
        read_payload(path)
    assert one_line(info).startswith(f"{path}: ") and message in str(info.value)


@pytest.mark.parametrize("case", TOKENIZER_CASES, ids=list(TOKENIZER_CASES))
def test_a_hostile_remi_tokenizer_file_is_one_line_naming_file_and_field(
    case, model_folder, tmp_path
):
    dotted, value, message = TOKENIZER_CASES[case]
    path = tmp_path / "tokenizer.json"
    shutil.copy(model_folder / "tokenizer.json", path)
    _edit_json(path, dotted, value)
    with pytest.raises(MusicgenError) as info:
        load_tokenizer(path)
    assert one_line(info).startswith(f"{path}: ") and message in str(info.value)
    folder = _copy_folder(model_folder, tmp_path / "m")  # the same file inside a model folder
    shutil.copy(path, folder / "tokenizer.json")
    with pytest.raises(MusicgenError) as info:
        load_checkpoint(folder)
    assert one_line(info).startswith(f"{folder / 'tokenizer.json'}: ")


@pytest.mark.parametrize("case", GROOVE_CASES, ids=list(GROOVE_CASES))
def test_a_hostile_groove_tokenizer_file_is_one_line(case, tmp_path):
    key, value, message = GROOVE_CASES[case]
    path = tmp_path / "tokenizer.json"
    data = build_tokenizer("groove").to_dict()
    path.write_text(json.dumps({**data, key: value}))
    with pytest.raises(MusicgenError) as info:
        load_tokenizer(path)
    assert one_line(info).startswith(f"{path}: ") and message in str(info.value)
    yaml_path = tmp_path / "groove.yaml"  # a YAML config: the same checks
    yaml_path.write_text(f"name: groove\n{key}: {json.dumps(value)}\n")
    if case != "tempo_nan":  # JSON's NaN is not YAML's .nan
        with pytest.raises(MusicgenError) as info:
            build_tokenizer(yaml_path)
        assert one_line(info).startswith(f"{yaml_path}: ")


def _bad_weights(payload_model: dict, case: str) -> dict:
    weights = dict(payload_model)
    name = next(k for k, v in weights.items() if v.ndim == 2)
    w = weights[name]
    weights[name] = {
        "nan": w.clone().fill_(float("nan")),
        "inf": torch.where(torch.rand_like(w) < 0.5, w, torch.tensor(float("inf"))),
        "bool": w > 0,
        "int": w.to(torch.int64),
        "shape": w[:-1].clone(),
    }[case]
    return weights, name


WEIGHT_CASES = {
    "nan": "holds NaN or infinite values",
    "inf": "holds NaN or infinite values",
    "bool": "is bool, not floating point",
    "int": "is int64, not floating point",
    "shape": "weights do not fit: tensor",
}


@pytest.mark.parametrize("case", WEIGHT_CASES, ids=list(WEIGHT_CASES))
def test_bad_weights_are_refused_naming_file_and_tensor(case, ckpts, model_folder, tmp_path):
    from safetensors.torch import save_file

    payload = torch.load(ckpts["remi"], weights_only=True)
    payload["model"], name = _bad_weights(payload["model"], case)
    pt = tmp_path / "bad.pt"
    torch.save(payload, pt)
    with pytest.raises(MusicgenError) as info:
        load_checkpoint(pt)
    assert one_line(info).startswith(f"{pt}: ") and f"tensor {name} " in str(info.value)
    assert WEIGHT_CASES[case] in str(info.value)
    folder = _copy_folder(model_folder, tmp_path / "m")
    save_file(
        {k: v.contiguous() for k, v in payload["model"].items()}, folder / "model.safetensors"
    )
    with pytest.raises(MusicgenError) as info:
        load_checkpoint(folder)
    assert one_line(info).startswith(f"{folder / 'model.safetensors'}: ")
    assert f"tensor {name} " in str(info.value)


@pytest.mark.parametrize(
    "case,message",
    [
        ("header_garbage", "model.safetensors: not readable"),
        ("header_huge", "model.safetensors: not readable"),
        ("truncated", "model.safetensors: not readable"),
        ("config_not_json", "config.json: not JSON"),
        ("config_huge", "config.json: 64 MB is too large"),
        ("config_list", "not a musicgen model folder"),
        ("train_state_list", "'train_state' must be a mapping"),
        ("tokenizer_list", "tokenizer.json: must be a JSON object"),
    ],
)
def test_damaged_model_folders_are_one_line(case, message, model_folder, tmp_path, capsys):
    folder = _copy_folder(model_folder, tmp_path / "m")
    st = folder / "model.safetensors"
    if case == "header_garbage":
        st.write_bytes((40).to_bytes(8, "little") + b"{not json at all, just bytes...}" + b" " * 8)
    elif case == "header_huge":
        st.write_bytes((2**62).to_bytes(8, "little") + b"{}")
    elif case == "truncated":
        st.write_bytes(st.read_bytes()[:-100])
    elif case == "config_not_json":
        (folder / "config.json").write_bytes(b"\xff\xfe{")
    elif case == "config_huge":
        with open(folder / "config.json", "r+b") as fh:
            fh.truncate(64 << 20)
    elif case == "config_list":
        (folder / "config.json").write_text("[1, 2]")
    elif case == "train_state_list":
        _edit_json(folder / "config.json", "train_state", [1])
    elif case == "tokenizer_list":
        (folder / "tokenizer.json").write_text("[]")
    with pytest.raises(MusicgenError) as info:
        load_checkpoint(folder)
    assert message in one_line(info)
    rc, _, err = run_cli(capsys, "plot", "kernels", "--checkpoint", folder, "--out", tmp_path)
    assert rc == 1 and message in one_line_error(err)


def test_a_pt_that_is_not_a_checkpoint_is_one_line(tmp_path):
    cases = {
        "tensor.pt": torch.zeros(3),
        "list.pt": [1, 2, 3],
        "model_list.pt": {
            "format": "musicgen-checkpoint/1",
            "version": "0",
            "config": {},
            "tokenizer": {"name": "remi"},
            "model": {"w": [1.0]},
        },
    }
    for name, obj in cases.items():
        torch.save(obj, tmp_path / name)
        with pytest.raises(MusicgenError) as info:
            load_checkpoint(tmp_path / name)
        assert one_line(info).startswith(str(tmp_path / name))


def _damaged_split(prepared: Path, tmp_path: Path, case: str) -> Path:
    data = _copy_folder(prepared, tmp_path / "data")
    (data / "prepared.json").unlink()  # a hand-made folder: the array checks alone
    split = data / "train"
    tokens, offsets = np.load(split / "tokens.npy"), np.load(split / "offsets.npy")
    if case == "tokens_float":
        np.save(split / "tokens.npy", tokens.astype(np.float64))
    elif case == "tokens_2d":
        np.save(split / "tokens.npy", tokens[: len(tokens) // 2 * 2].reshape(2, -1))
    elif case == "offsets_decreasing":
        offsets[1], offsets[2] = offsets[2], offsets[1]
        np.save(split / "offsets.npy", offsets)
    elif case == "offsets_from_one":
        np.save(split / "offsets.npy", offsets + 1)
    elif case == "offsets_float":
        np.save(split / "offsets.npy", offsets.astype(np.float32))
    elif case == "tokens_pickle":
        np.save(split / "tokens.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif case == "tokens_truncated":
        (split / "tokens.npy").write_bytes((split / "tokens.npy").read_bytes()[:100])
    elif case == "ids_outside_vocab":
        tokens[5] = 65535
        np.save(split / "tokens.npy", tokens)
    return data


SPLIT_CASES = {
    "tokens_float": "tokens.npy: must be a 1-D uint16 array, got 1-D float64",
    "tokens_2d": "tokens.npy: must be a 1-D uint16 array, got 2-D uint16",
    "offsets_decreasing": "offsets.npy: offsets must rise from 0",
    "offsets_from_one": "offsets.npy: offsets must rise from 0",
    "offsets_float": "offsets.npy: must be a non-empty 1-D int64 array",
    "tokens_pickle": "damaged token arrays",
    "tokens_truncated": "damaged token arrays",
    "ids_outside_vocab": "tokens.npy: holds id 65535, outside the",
}


@pytest.mark.parametrize("case", SPLIT_CASES, ids=list(SPLIT_CASES))
def test_damaged_prepared_arrays_are_one_line_errors(case, prepared, tmp_path, capsys):
    data = _damaged_split(prepared, tmp_path, case)
    with pytest.raises(MusicgenError) as info:
        PreparedSplit(data, "train").tokenizer  # noqa: B018
    assert SPLIT_CASES[case] in one_line(info)
    rc, _, err = run_cli(
        capsys, "train", "--config", TINY, "--data", data, "--out", tmp_path / "run"
    )
    assert rc == 1 and SPLIT_CASES[case] in one_line_error(err)


def test_a_stamped_folder_with_changed_tokens_is_refused(prepared, tmp_path):
    data = _copy_folder(prepared, tmp_path / "data")
    tokens = np.load(data / "train" / "tokens.npy")
    tokens[0] = 1 if tokens[0] != 1 else 2
    np.save(data / "train" / "tokens.npy", tokens)
    with pytest.raises(MusicgenError, match="train/tokens.npy: does not match .*prepared.json"):
        PreparedSplit(data, "train")
    (data / "prepared.json").write_text("{not json")
    with pytest.raises(MusicgenError, match="prepared.json: damaged"):
        PreparedSplit(data, "train")


def test_saving_over_a_symlink_writes_through_and_a_device_is_refused(tmp_path):
    """musicgen.io's choice (module docstring): a link is written through (it stays a link to
    the new content), a device node or FIFO is never replaced by a regular file."""
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "later.txt")
    atomic_write_bytes(dangling, b"made")
    assert dangling.is_symlink() and (tmp_path / "later.txt").read_bytes() == b"made"
    to_null = tmp_path / "null.mid"
    to_null.symlink_to("/dev/null")
    fifo = tmp_path / "fifo.mid"
    os.mkfifo(fifo)
    score = symusic.Score.from_midi(song_bytes())
    for path, kind in ((to_null, "a character device"), (fifo, "a FIFO (named pipe)")):
        with pytest.raises(MusicgenError, match=f"is {re.escape(kind)}, not a regular file"):
            write_score(score, path)
    assert to_null.is_symlink() and Path("/dev/null").is_char_device()
    assert fifo.is_fifo()
    assert not list(tmp_path.glob(".*.tmp"))


def test_resume_from_a_hostile_last_pt_is_one_line(prepared, tmp_path):
    train(tiny(prepared, "train.max_steps=1", "train.val_every=100"), tmp_path)
    good = torch.load(tmp_path / "last.pt", weights_only=True)
    cases = {
        "config.model.n_layers": (10**6, "config: model.n_layers: must be >= 1 and <= 256"),
        "train_state.step": ("x", "training state 'step' must be a count, got 'x'"),
        "train_state.best": (None, "training state 'best' must be a number"),
        "train_state.optimizer": ({"state": {}, "param_groups": []}, "optimiser state does not"),
    }
    for dotted, (value, message) in cases.items():
        torch.save(set_dotted(good, dotted, value), tmp_path / "last.pt")
        with pytest.raises(MusicgenError) as info:
            train(tiny(prepared, "train.max_steps=3"), tmp_path, resume=True)
        assert one_line(info).startswith(f"{tmp_path / 'last.pt'}: ") and message in str(info.value)
    nan = dict(good, model={k: v.clone().fill_(float("nan")) for k, v in good["model"].items()})
    torch.save(nan, tmp_path / "last.pt")
    with pytest.raises(MusicgenError, match="holds NaN or infinite values"):
        train(tiny(prepared, "train.max_steps=3"), tmp_path, resume=True)
