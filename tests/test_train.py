"""Training on real POP909 crops: learning, exact resume after a kill, checkpoints, errors, DDP."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import make_checkpoint

from musicgen.checkpoint import FORMAT, load_checkpoint, read_payload, save_checkpoint
from musicgen.config import config_from_dict, load_config
from musicgen.data.dataset import load_songs
from musicgen.data.prepare import prepare
from musicgen.errors import MusicgenError
from musicgen.evaluate import range_mean, seeded_nll
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer
from musicgen.train.run import train

ROOT = Path(__file__).resolve().parents[1]
SONGS = ROOT / "tests" / "data" / "pop909"
TINY = ROOT / "configs" / "pop909" / "tiny.yaml"
DEVICE = os.environ.get("MUSICGEN_TEST_DEVICE", "cpu")  # scripts/bench/gpu_check.sh sets cuda


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """The bundled POP909 songs laid out as train/ (3 songs) and validation/ (1 song)."""
    src = tmp_path_factory.mktemp("songs")
    songs = sorted(SONGS.glob("*/*.mid"))
    for i, f in enumerate(songs):
        split = "validation" if i == len(songs) - 1 else "train"
        (src / split).mkdir(exist_ok=True)
        shutil.copy(f, src / split / f.name)
    out = tmp_path_factory.mktemp("prepared")
    prepare("folder", src, out, tokenizer="remi", workers=1)
    return out


def tiny(prepared: Path, *overrides: str):
    cfg = load_config(TINY, [f"train.device={DEVICE}", *overrides])
    cfg.data.path = str(prepared)
    return cfg


def losses(run: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if r["kind"] == "train"}


def test_tiny_training_lowers_the_loss(prepared, tmp_path):
    result = train(tiny(prepared, "train.max_steps=30", "train.val_every=30"), tmp_path)
    got = losses(tmp_path)
    first = sum(got[s] for s in (1, 2, 3)) / 3
    last = sum(got[s] for s in (28, 29, 30)) / 3
    assert last < first - 0.3, (first, last)
    assert result.step == 30 and (tmp_path / "best.pt").is_file()
    rows = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    val = [r for r in rows if r["kind"] == "val"][-1]
    # validation reaches past the 64-token crop (the extrapolation curve)
    assert val["loss_beyond"] is not None and len(val["loss_per_segment"]) == 1


def test_checkpoint_round_trip_reproduces_outputs(prepared, tmp_path):
    result = train(tiny(prepared, "train.max_steps=3"), tmp_path)
    loaded = load_checkpoint(result.last)
    result.model.eval()
    ids = torch.tensor([[1, 5, 9, 12, 40, 7, 3, 2]])
    torch.manual_seed(0)
    want = result.model(ids)
    torch.manual_seed(0)
    got = loaded.model(ids)
    assert torch.equal(want, got)
    assert loaded.config.model.vocab_size == loaded.tokenizer.vocab_size
    assert loaded.train_state["step"] == 3 and loaded.meta["format"] == FORMAT
    # weights_only: a plain torch.load with the safe unpickler reads it
    payload = torch.load(result.last, weights_only=True)
    assert payload["version"] and payload["config"]["name"] == "pop909_tiny"
    # half-precision shipping keeps the architecture loadable
    save_checkpoint(tmp_path / "half.pt", loaded.model, loaded.config, loaded.tokenizer, half=True)
    half = load_checkpoint(tmp_path / "half.pt")
    torch.manual_seed(0)
    assert torch.allclose(half.model(ids), got, atol=5e-2)


def _phase_error(a, b, lag: int) -> float:
    """Largest kernel phase difference |2 pi (f_a - f_b) lag + theta_a - theta_b| (radians)."""
    fa, fb = (m.spe[0].frequencies().detach().double() for m in (a, b))
    pa, pb = (m.spe[0].phase.detach().double() for m in (a, b))
    d = 2 * math.pi * (fa - fb) * lag + (pa - pb)
    return float(torch.remainder(d + math.pi, 2 * math.pi).sub(math.pi).abs().max())


@pytest.mark.parametrize("pe", ["sine_spe", "conv_spe"])
def test_half_checkpoints_keep_spe_and_gates_in_float32(prepared, tmp_path, pe):
    cfg = tiny(prepared, f"model.pe={pe}", "model.vocab_size=345")
    tok = build_tokenizer("remi")
    model = build_model(cfg.model, tok)
    with torch.no_grad():  # trained-looking frequencies: high ones round worst in float16
        for p in model.spe.parameters():
            p.add_(0.3 * torch.randn_like(p))
    save_checkpoint(tmp_path / "half.pt", model, cfg, tok, half=True)
    stored = torch.load(tmp_path / "half.pt", weights_only=True)["model"]
    assert stored["blocks.0.attn.gate"].dtype == torch.float32
    assert stored["blocks.0.attn.qkv.weight"].dtype == torch.float16
    spe = {k: v for k, v in stored.items() if k.startswith("spe.")}
    assert spe and all(v.dtype == torch.float32 for v in spe.values())
    half = load_checkpoint(tmp_path / "half.pt").model
    assert all(
        torch.equal(p, model.state_dict()[k])
        for k, p in half.state_dict().items()
        if k in spe or k.endswith(".gate")
    )
    if pe == "sine_spe":
        for lag in (2048, 8192):
            assert _phase_error(model, half, lag) < 1e-9, lag
        rounded = build_model(cfg.model, tok)  # what the old all-float16 policy shipped
        rounded.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
        assert _phase_error(model, rounded, 8192) > 0.1  # the error this policy removes
    lags = torch.tensor([0, 1, 15, 2048, 8192])
    assert torch.equal(half.spe[0].kernel(lags), model.spe[0].kernel(lags))


def test_float16_checkpoints_from_before_the_policy_still_load(tmp_path):
    """Files written before the float32 policy (every tensor float16, SPE's too) load as before."""
    path = make_checkpoint(tmp_path, "groove")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    payload["model"] = {
        k: v.half() if v.is_floating_point() else v for k, v in payload["model"].items()
    }
    torch.save(payload, path)
    stored = read_payload(path)["model"]
    loaded = load_checkpoint(path)
    assert stored["spe.0.freq"].dtype == torch.float16
    assert loaded.model.spe[0].freq.dtype == torch.float32
    assert torch.equal(loaded.model.spe[0].freq, stored["spe.0.freq"].float())


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_exact_resume_after_kill(prepared, tmp_path, precision):
    """SIGKILLed at a known step (the training process kills itself after step 7 through a
    test-only hook; last.pt is from step 6), then resumed: the same losses as an uninterrupted
    run, in fp32 and in fp16 (whose GradScaler state is part of the checkpoint)."""
    steps, kill_at = 12, 7
    args = [
        f"train.max_steps={steps}",
        "train.ckpt_every=3",
        "train.val_every=1000",
        f"train.precision={precision}",
    ]
    train(tiny(prepared, *args), tmp_path / "whole")
    reference = losses(tmp_path / "whole")

    run = tmp_path / "killed"
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
        *(f"--{a}" for a in args),
        f"--train.device={DEVICE}",
    ]
    # one thread, as in this process: fp16 sums differ in the last bits between thread counts
    env = {**os.environ, "MUSICGEN_TEST_KILL_AT_STEP": str(kill_at), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert sorted(losses(run)) == list(range(1, kill_at + 1))  # step 7 logged, not saved
    state = read_payload(run / "last.pt")["train_state"]
    assert state["step"] == 6 and ("scaler" in state) == (precision == "fp16")
    train(tiny(prepared, *args), run, resume=True)
    got = losses(run)
    assert sorted(got) == list(range(1, steps + 1))  # the replayed step 7 is logged once
    for step in range(1, steps + 1):
        assert got[step] == pytest.approx(reference[step], abs=1e-6), step


def test_fp16_scaler_state_is_saved_and_restored(prepared, tmp_path):
    args = ["train.ckpt_every=1", "train.val_every=1000", "train.precision=fp16"]
    train(tiny(prepared, "train.max_steps=3", *args), tmp_path)
    payload = read_payload(tmp_path / "last.pt")
    scaler = payload["train_state"]["scaler"]
    assert scaler["scale"] > 0 and scaler["_growth_tracker"] in range(4)  # <= 3 finite steps
    scaler.update(scale=1024.0, _growth_tracker=5)  # as if it had backed off earlier
    save_checkpoint(
        tmp_path / "last.pt",
        load_checkpoint(tmp_path / "last.pt").model,
        config_from_dict(payload["config"]),
        build_tokenizer("remi"),
        payload["train_state"],
    )
    train(tiny(prepared, "train.max_steps=5", *args), tmp_path, resume=True)
    after = read_payload(tmp_path / "last.pt")["train_state"]["scaler"]
    assert after["scale"] == 1024.0 and after["_growth_tracker"] == 7  # restored, then 2 steps


def test_ctrl_c_stops_at_a_step_boundary_and_resumes_exactly(prepared, tmp_path, monkeypatch):
    """A SIGINT that lands after step 4 (sent by the hook) lets the loop finish the step in
    progress (5), save last.pt there and leave with KeyboardInterrupt; resuming matches a whole
    run."""
    import musicgen.train.loop as train_mod

    args = ["train.max_steps=8", "train.ckpt_every=100", "train.val_every=1000"]
    train(tiny(prepared, *args), tmp_path / "whole")
    reference = losses(tmp_path / "whole")

    def interrupt(step: int) -> None:
        if step == 4:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(train_mod, "_test_hook", interrupt)
    with pytest.raises(KeyboardInterrupt):
        train(tiny(prepared, *args), tmp_path / "run")
    monkeypatch.undo()
    assert read_payload(tmp_path / "run" / "last.pt")["train_state"]["step"] == 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler removed
    train(tiny(prepared, *args), tmp_path / "run", resume=True)
    got = losses(tmp_path / "run")
    assert all(got[s] == pytest.approx(reference[s], abs=1e-6) for s in range(1, 9))


def test_resume_needs_matching_config(prepared, tmp_path):
    train(tiny(prepared, "train.max_steps=2"), tmp_path)
    with pytest.raises(MusicgenError, match="differ from this config"):
        train(tiny(prepared, "train.max_steps=4", "model.n_layers=3"), tmp_path, resume=True)
    with pytest.raises(MusicgenError, match="nothing to resume"):
        train(tiny(prepared), tmp_path / "empty", resume=True)


def test_data_and_tokenizer_mismatches_are_one_line_errors(prepared, tmp_path):
    with pytest.raises(MusicgenError, match="prepared with tokenizer 'remi'.*expects 'groove'"):
        train(tiny(prepared, "tokenizer=groove"), tmp_path)
    with pytest.raises(MusicgenError, match="does not match model.vocab_size=100"):
        train(tiny(prepared, "model.vocab_size=100"), tmp_path)
    with pytest.raises(MusicgenError, match="train.val_seeds must be at least 1, got 0"):
        train(tiny(prepared, "train.val_seeds=0"), tmp_path)
    cfg = tiny(prepared)
    cfg.data.path = str(tmp_path / "missing")
    with pytest.raises(MusicgenError, match="missing"):
        train(cfg, tmp_path / "run")


def test_non_finite_loss_stops_and_keeps_the_checkpoint(prepared, tmp_path):
    cfg = tiny(
        prepared,
        "train.max_steps=10",
        "train.ckpt_every=1",
        "optim.lr=1.0e+30",
        "optim.warmup_steps=1",
        "optim.grad_clip=1.0e+30",
        "model.pe=ape",
    )
    with pytest.raises(MusicgenError, match="non-finite loss"):
        train(cfg, tmp_path)
    assert (tmp_path / "last.pt").is_file()
    load_checkpoint(tmp_path / "last.pt")  # intact and loadable


def test_cli_train_runs_and_reports(prepared, tmp_path, capsys):
    from musicgen.cli import main

    code = main(
        [
            "train",
            "--config",
            str(TINY),
            "--data",
            str(prepared),
            "--out",
            str(tmp_path),
            "--train.max_steps=2",
        ]
    )
    assert code == 0 and "step 2" in capsys.readouterr().out
    assert main(["train", "--config", str(TINY), "--model.nlayers=2"]) == 1
    assert "unknown key 'model.nlayers'" in capsys.readouterr().err


GLOO_WORKER = """
import json, os, signal, sys, time
import torch
import musicgen.train.run as T
import musicgen.train.loop as L
from musicgen.checkpoint import model_state
from musicgen.config import load_config
from musicgen.data.dataset import CropDataset
from musicgen.model.transformer import Performer

tiny, data, run, out, scenario = sys.argv[1:6]
rank = int(os.environ["RANK"])
seeds, items = [], []
new_noise, getitem = Performer.new_noise, CropDataset.__getitem__

def spy_noise(self, device, seed=None):  # the SPE noise seed of every training forward
    noise = new_noise(self, device, seed)
    if self.training:
        seeds.append(noise.seed)
    return noise

def spy_item(self, index):  # the dataset items this rank reads
    items.append(int(index))
    return getitem(self, index)

Performer.new_noise, CropDataset.__getitem__ = spy_noise, spy_item

class FastClock:  # rank 1's clock gains 20 s per reading: alone, it would leave early
    calls = 0

    def time(self):
        FastClock.calls += 1
        return time.time() + 20 * FastClock.calls

if rank == 1 and scenario == "clock":
    L.time = FastClock()
if rank == 1 and scenario == "sigint":  # Ctrl-C reaches rank 1 only, after its step 2
    L._test_hook = lambda step: step == 2 and os.kill(os.getpid(), signal.SIGINT)
cfg = load_config(tiny, ["train.max_steps=50", "train.val_every=2", "train.device=cpu",
                         "train.max_minutes=1", "log.every=1"])
cfg.data.path = data
info = {"interrupted": False}
try:
    res = T.train(cfg, run)
    info["step"] = res.step
    torch.save(model_state(res.model), f"{out}{rank}.pt")
except KeyboardInterrupt:
    info["interrupted"] = True
info.update(seeds=seeds, items=items)
with open(f"{out}{rank}.json", "w") as fh:
    json.dump(info, fh)
"""


@pytest.mark.parametrize("scenario", ["clock", "sigint"])
def test_two_gloo_processes_stop_together_with_their_own_seeds(prepared, tmp_path, scenario):
    """Two DDP ranks on gloo. Only rank 1 wants to stop (its clock passes max_minutes, or it
    alone gets Ctrl-C), yet both leave at the same step with the same weights, without a
    hang. Ranks draw different SPE noise and read disjoint crops; the validation they share
    equals a single process's seeded validation of the saved weights."""
    worker = tmp_path / "worker.py"
    worker.write_text(GLOO_WORKER)
    run, out = tmp_path / "run", tmp_path / "rank"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MUSICGEN_TEST_KILL_AT_STEP", None)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(worker),
        str(TINY),
        str(prepared),
        str(run),
        str(out),
        scenario,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    saved = read_payload(run / "last.pt")  # written by rank 0 only
    step = saved["train_state"]["step"]
    assert 2 < step < 10  # rank 1 decided (rank 0 alone would run all 50 steps)
    assert r0["step"] == step and not r0["interrupted"]
    assert r1["interrupted"] == (scenario == "sigint")
    if scenario == "clock":
        a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        assert all(torch.equal(a[k], v.float()) for k, v in saved["model"].items())
    assert len(r0["seeds"]) == len(r1["seeds"]) == step
    assert all(x != y for x, y in zip(r0["seeds"], r1["seeds"], strict=True))  # per-rank noise
    assert not set(r0["items"]) & set(r1["items"])  # each rank its own crops
    assert sorted(r0["items"] + r1["items"]) == list(range(2 * 4 * step))
    rows = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == list(range(1, step + 1))
    val = [r for r in rows if r["kind"] == "val"][-1]
    assert val["step"] == step
    cfg = tiny(prepared)
    ckpt = load_checkpoint(run / "last.pt")
    sums, counts = seeded_nll(
        ckpt.model,
        load_songs(prepared, "validation", 2),
        128,
        "cpu",
        seeds=cfg.train.val_seeds,
        seed=cfg.train.seed,
    )
    assert val["loss"] == pytest.approx(range_mean(sums, counts, 0, 64), abs=1e-6)


def test_convert_checkpoint_script_on_a_trained_run(prepared, tmp_path):
    """The README's workflow: a last.pt with optimiser state -> a model folder whose weights are
    bit-identical, with the JSON-able part of the training state (step, best loss)."""
    train(tiny(prepared, "train.max_steps=2", "train.val_every=1"), tmp_path / "run")
    src = tmp_path / "run" / "last.pt"
    assert "optimizer" in read_payload(src)["train_state"]
    script = ROOT / "scripts" / "convert_checkpoint.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(src), str(tmp_path / "folder")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {tmp_path / 'folder' / 'model.safetensors'}" in proc.stdout
    meta = json.loads((tmp_path / "folder" / "config.json").read_text())
    assert meta["train_state"]["step"] == 2 and "optimizer" not in meta["train_state"]
    a, b = load_checkpoint(src).model.state_dict(), load_checkpoint(tmp_path / "folder")
    assert all(torch.equal(a[k], v) for k, v in b.model.state_dict().items())
    bad = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "none.pt"), str(tmp_path / "f2")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and bad.stderr.strip().startswith("error: ")
    assert "Traceback" not in bad.stderr
