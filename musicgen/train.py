"""Training loop: prepared crops -> Performer -> self-describing checkpoints, exactly resumable.

Which crops a step sees, and every random draw it makes (dropout, SPE noise), is a pure function
of (seed, step, rank), so a resumed run replays the uninterrupted one exactly: only the model,
optimiser, gradient scaler, best validation loss and step are saved. Runs alone or under
`torchrun` (DistributedDataParallel; NCCL on CUDA, gloo on CPU): ranks draw different noise and
crops, score disjoint validation songs, and agree on when to stop (time limit, Ctrl-C).
"""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, Sampler
from tqdm import tqdm

from musicgen.checkpoint import read_payload, save_checkpoint, unwrap
from musicgen.config import Config, config_from_dict, to_dict
from musicgen.data.dataset import PreparedSplit, load_songs
from musicgen.data.segments import make_train_dataset
from musicgen.device import pick_device
from musicgen.errors import MusicgenError, Terminated
from musicgen.evaluate import SEGMENT, range_mean, seeded_nll, segment_means
from musicgen.io import atomic_write_text, remove_stale_temps
from musicgen.model import build_model
from musicgen.runlog import read_log, records_text
from musicgen.tokenizers import Tokenizer


@dataclass
class TrainResult:
    last: Path  # RUN_DIR/last.pt
    step: int
    model: torch.nn.Module  # the plain (unwrapped) model, in its final state


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_distributed(device: torch.device) -> Dist:
    if "RANK" not in os.environ:
        return Dist()
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend)
    return Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))


def autocast_for(device: torch.device, precision: str):
    """bf16 autocast on CUDA by default; fp32 elsewhere (CPU autocast is slower here)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return nullcontext(), precision
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype), precision


def lr_at(step: int, cfg: Config) -> float:
    """Linear warm-up, then cosine decay from lr to min_lr at max_steps (or constant)."""
    o = cfg.optim
    if step < o.warmup_steps:
        return o.lr * (step + 1) / o.warmup_steps
    if o.schedule == "constant":
        return o.lr
    span = max(1, cfg.train.max_steps - o.warmup_steps)
    progress = min(1.0, (step - o.warmup_steps) / span)
    return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1 + math.cos(math.pi * progress))


class StepSampler(Sampler[int]):
    """Dataset indices for steps start..max: step s, rank r, slot j -> a unique index."""

    def __init__(self, start_step: int, max_steps: int, per_step: int, rank: int, world: int):
        self.start, self.max, self.per_step, self.rank, self.world = (
            start_step, max_steps, per_step, rank, world)

    def __iter__(self):
        for step in range(self.start, self.max):
            base = (step * self.world + self.rank) * self.per_step
            yield from range(base, base + self.per_step)

    def __len__(self) -> int:
        return (self.max - self.start) * self.per_step


def step_seed(seed: int, rank: int, step: int) -> int:
    """torch's seed for training step `step` on `rank`: reseeding every step makes dropout and
    SPE noise a function of (seed, rank, step), so resuming needs no RNG state and ranks differ."""
    return int(np.random.SeedSequence([seed, rank, step, 7]).generate_state(1, np.uint64)[0] >> 1)


def make_optimizer(cfg: Config, model: torch.nn.Module, device: torch.device):
    """Adam(W) per cfg.optim; the fused kernel on CPU and CUDA (one pass per parameter: on CPU
    about 15x faster than the per-parameter loop, see docs/profile.md)."""
    opt_cls = torch.optim.AdamW if cfg.optim.weight_decay > 0 else torch.optim.Adam
    return opt_cls(model.parameters(), lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                   weight_decay=cfg.optim.weight_decay, fused=device.type in ("cpu", "cuda"))



def agree(flags: list[bool], dd: Dist, device: torch.device) -> list[bool]:
    """Each flag true on every rank when it is true on any (one all-reduce): ranks leave the loop
    at the same step (one leaving alone would leave the others waiting in an all-reduce)."""
    if dd.world == 1:
        return flags
    t = torch.tensor([float(f) for f in flags], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


class StopRequest:
    """Ctrl-C (SIGINT) or SIGTERM (what SLURM and Kubernetes send) asks the loop to stop at the
    next step boundary, save and leave; a second Ctrl-C interrupts at once, a second SIGTERM is
    ignored (it must not tear the save). Only the main thread can install signal handlers."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict = {}

    @property
    def asked(self) -> bool:
        return self.signum is not None

    def _handler(self, signum, frame) -> None:
        if self.asked and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if not self.asked:
            self.signum = signum

    def install(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        return self

    def uninstall(self) -> None:
        for s, old in self._previous.items():
            signal.signal(s, old)
        self._previous = {}


def _test_hook(step: int) -> None:
    """For the resume test only: MUSICGEN_TEST_KILL_AT_STEP=k makes the process SIGKILL itself
    once step k is done (logged; checkpointed if due): a kill at a known step, no log polling."""
    if os.environ.get("MUSICGEN_TEST_KILL_AT_STEP") == str(step):
        os.kill(os.getpid(), signal.SIGKILL)


def check_data(cfg: Config, split: PreparedSplit) -> Tokenizer:
    tok = split.tokenizer
    if tok.name != cfg.tokenizer:
        raise MusicgenError(
            f"{cfg.data.path}: data was prepared with tokenizer '{tok.name}' but the config "
            f"expects '{cfg.tokenizer}'")
    if cfg.model.vocab_size == 0:
        cfg.model.vocab_size = tok.vocab_size
    elif cfg.model.vocab_size != tok.vocab_size:
        raise MusicgenError(
            f"{cfg.data.path}: vocabulary size {tok.vocab_size} does not match "
            f"model.vocab_size={cfg.model.vocab_size}")
    return tok


def validate(model, songs, cfg: Config, device, dd: Dist) -> dict:
    """Mean loss within the crop length, beyond it (extrapolation), and per 128-token segment,
    over `train.val_seeds` seeded SPE draws (the same draws every time: best.pt is not picked on
    noise). Each rank scores songs[rank::world]; the sums are all-reduced, so every rank gets the
    numbers a single process would."""
    sums, counts = seeded_nll(unwrap(model), songs[dd.rank::dd.world], cfg.train.val_max_len,
                              device, seeds=cfg.train.val_seeds, seed=cfg.train.seed,
                              first_index=dd.rank, step=dd.world)
    if dd.world > 1:
        both = torch.from_numpy(np.stack([sums, counts.astype(np.float64)])).to(device)
        dist.all_reduce(both)  # (2, val_max_len) float64
        sums, counts = both[0].cpu().numpy(), both[1].cpu().numpy().round().astype(np.int64)
    crop = cfg.data.crop_len
    beyond = range_mean(sums, counts, crop)
    return {"loss": range_mean(sums, counts, 0, crop),
            "loss_beyond": None if math.isnan(beyond) else beyond,
            "loss_per_segment": [None if math.isnan(v) else v for v in segment_means(sums, counts)],
            "segment": SEGMENT, "crop_len": crop}


def train(cfg: Config, out_dir: str | Path, resume: bool = False) -> TrainResult:
    """Train per `cfg`, writing RUN_DIR/{last,best,step_N}.pt and RUN_DIR/log.jsonl."""
    out = Path(out_dir)
    if cfg.train.val_seeds < 1:
        raise MusicgenError(
            f"config: train.val_seeds must be at least 1, got {cfg.train.val_seeds}")
    device = pick_device(cfg.train.device, int(os.environ.get("LOCAL_RANK", 0)))
    dd = setup_distributed(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)

    start_step, best, payload = 0, float("inf"), None
    if resume:
        if not (out / "last.pt").is_file():
            raise MusicgenError(f"{out}: nothing to resume (no last.pt)")
        payload = read_payload(out / "last.pt")
        saved = config_from_dict(payload["config"])
        if cfg.model.vocab_size == 0:
            cfg.model.vocab_size = saved.model.vocab_size
        if saved.tokenizer != cfg.tokenizer or saved.model != cfg.model:
            raise MusicgenError(
                f"{out / 'last.pt'}: checkpoint's model/tokenizer differ from this config's; "
                "resume with the config it was trained with")
        missing = [k for k in ("step", "optimizer") if k not in payload["train_state"]]
        if missing:
            raise MusicgenError(
                f"{out / 'last.pt'}: not a resumable training checkpoint (no {missing[0]} in its "
                "training state)")
        start_step = int(payload["train_state"]["step"])
        best = float(payload["train_state"].get("best", best))
        if start_step > cfg.train.max_steps:
            raise MusicgenError(
                f"config: train.max_steps: must be >= {start_step} (the step of "
                f"{out / 'last.pt'}) to resume, got {cfg.train.max_steps}")

    train_split = PreparedSplit(cfg.data.path, "train")
    tok = check_data(cfg, train_split)
    torch.manual_seed(cfg.train.seed)  # the same initial weights on every rank
    model = build_model(cfg.model, tok).to(device)
    optim = make_optimizer(cfg, model, device)
    if payload is not None:
        if payload["tokenizer"] != tok.to_dict():
            raise MusicgenError(f"{out / 'last.pt'}: checkpoint tokenizer differs from the data's")
        model.load_state_dict(payload["model"])
        optim.load_state_dict(payload["train_state"]["optimizer"])
    raw = model
    if dd.world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.train.compile:
        model = torch.compile(model)
    amp, precision = autocast_for(device, cfg.train.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    if payload is not None and "scaler" in payload["train_state"]:
        scaler.load_state_dict(payload["train_state"]["scaler"])

    per_step = cfg.train.batch_size * cfg.train.grad_accum
    data = make_train_dataset(cfg, train_split, cfg.train.max_steps * per_step * dd.world)
    loader = DataLoader(data, batch_size=cfg.train.batch_size, num_workers=cfg.data.workers,
                        sampler=StepSampler(start_step, cfg.train.max_steps, per_step,
                                            dd.rank, dd.world))
    val_songs = load_songs(cfg.data.path, "validation", max_songs=cfg.train.val_songs)

    log = None
    if dd.main:
        out.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(out, STATE_FILES)
        _truncate_log(out / "log.jsonl", start_step)
        log = open(out / "log.jsonl", "a")
        n_params = sum(p.numel() for p in raw.parameters())
        print(f"musicgen train: {n_params / 1e6:.1f} M parameters, device {device}, "
              f"precision {precision}, world {dd.world}, steps {start_step}->{cfg.train.max_steps}")
        print(json.dumps(to_dict(cfg), indent=None))

    def checkpoint(step: int, name: str) -> None:
        state = {"step": step, "best": best, "optimizer": optim.state_dict()}
        if scaler.is_enabled():  # fp16: the loss scale and its growth counter
            state["scaler"] = scaler.state_dict()
        save_checkpoint(out / name, raw, cfg, tok, state)

    step, t0, tokens, batches = start_step, time.time(), 0, iter(loader)
    bar = tqdm(total=cfg.train.max_steps, initial=start_step, disable=not dd.main,
               desc="train", dynamic_ncols=True)
    stop = StopRequest().install()
    try:
        while step < cfg.train.max_steps:
            model.train()
            torch.manual_seed(step_seed(cfg.train.seed, dd.rank, step))
            # FAVOR+ redraws come from (seed, step) alone: every rank and a resumed run agree.
            redraw_rng = torch.Generator().manual_seed(cfg.train.seed * 1_000_003 + step)
            raw.on_train_step(step, redraw_rng)
            lr = lr_at(step, cfg)
            for group in optim.param_groups:
                group["lr"] = lr
            loss_sum = 0.0
            for micro in range(cfg.train.grad_accum):
                batch = next(batches)
                x, y = batch["input"].to(device), batch["target"].to(device)
                sync = micro == cfg.train.grad_accum - 1 or dd.world == 1
                ctx = nullcontext() if sync else model.no_sync()
                with ctx, amp:
                    logits = model(x)  # (B, L, V)
                    loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(),
                                           ignore_index=-100)
                scaler.scale(loss / cfg.train.grad_accum).backward()
                loss_sum += loss.item() / cfg.train.grad_accum
                tokens += int((y != -100).sum())
            overtime = bool(cfg.train.max_minutes) and (
                time.time() - t0 > 60 * cfg.train.max_minutes)
            # every rank, the same answers: a non-finite loss anywhere, leave after this step
            bad, leave = agree([not math.isfinite(loss_sum), overtime or stop.asked], dd, device)
            if bad:
                where = loss_sum if not math.isfinite(loss_sum) else "on another rank"
                raise MusicgenError(
                    f"non-finite loss ({where}) at step {step}; stopped, the last good "
                    f"checkpoint in {out} is left intact (try a lower optim.lr)")
            scaler.unscale_(optim)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
            scaler.step(optim)
            scaler.update()
            optim.zero_grad(set_to_none=True)
            step += 1
            if dd.main:
                tps = tokens * dd.world / max(1e-9, time.time() - t0)
                bar.update(1)
                bar.set_postfix(loss=f"{loss_sum:.3f}", lr=f"{lr:.2e}", tok_s=f"{tps:.0f}")
                if step % cfg.log.every == 0 or step == cfg.train.max_steps:
                    epoch = data.pass_of((step - 1) * dd.world * per_step)
                    _log(log, {"kind": "train", "step": step, "epoch": epoch, "loss": loss_sum,
                               "lr": lr, "tok_per_s": tps, "time": time.time() - t0})
            last = step == cfg.train.max_steps
            if val_songs and (step % cfg.train.val_every == 0 or last or leave):
                res = validate(model, val_songs, cfg, device, dd)  # all ranks: a collective
                _log(log, {"kind": "val", "step": step, **res})
                if dd.main:
                    tqdm.write(f"step {step}: val loss {res['loss']:.4f} (beyond crop: "
                               f"{res['loss_beyond']})")
                if res["loss"] < best:
                    best = res["loss"]
                    if dd.main:
                        checkpoint(step, "best.pt")
            if dd.main and (step % cfg.train.ckpt_every == 0 or last or leave):
                checkpoint(step, "last.pt")
                _rotate(out, step, cfg.train.keep_last)
            _test_hook(step)
            if leave:
                if dd.main:
                    why = (f"after {cfg.train.max_minutes} minutes" if overtime and not stop.asked
                           else "on request")
                    tqdm.write(f"stopping {why} at step {step}: saved {out / 'last.pt'}; "
                               "--resume continues")
                break
    finally:
        stop.uninstall()
        bar.close()
        if log:
            log.close()
        if dd.world > 1:
            dist.destroy_process_group()
    if dd.main and not (out / "last.pt").is_file():  # max_steps=0: the initialised model
        checkpoint(step, "last.pt")
    if stop.signum == signal.SIGTERM:
        raise Terminated(stop.signum)  # saved and left cleanly; the CLI exits 143
    if stop.asked:
        raise KeyboardInterrupt  # saved and left cleanly; the command still reports the interrupt
    return TrainResult(out / "last.pt", step, raw)


STATE_FILES = ("last.pt", "best.pt", "log.jsonl")  # what a killed writer can leave a .tmp of


def _log(fh, record: dict) -> None:
    if fh is not None:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


def _truncate_log(path: Path, step: int) -> None:
    """On resume, drop log lines written after the resumed checkpoint (they are replayed), and
    a last line torn by the crash; a fresh run (step 0) starts an empty log."""
    records = read_log(path, required=False) if step > 0 else []
    if path.exists() or records:
        atomic_write_text(path, records_text([r for r in records if r.get("step", 0) <= step]))


def _rotate(out: Path, step: int, keep: int) -> None:
    """Keep the last `keep` numbered checkpoints (hard links of last.pt; no extra disk)."""
    if keep <= 0:
        return
    target = out / f"step_{step:07d}.pt"
    if not target.exists():
        try:
            os.link(out / "last.pt", target)
        except OSError:
            import shutil

            shutil.copyfile(out / "last.pt", target)
    numbered = sorted(out.glob("step_*.pt"))
    for old in numbered[:-keep]:
        old.unlink()

