"""The training loop: per step `train_step`, `report_step`, `maybe_validate`, `maybe_checkpoint`,
until max_steps or a stop (time limit, Ctrl-C, SIGTERM), then `finish`. Every random draw of a
step is seeded from (seed, rank, step) (`step_seed`), so a resumed run replays the same steps.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import IO

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from musicgen.checkpoint import save_checkpoint, unwrap
from musicgen.config import Config
from musicgen.errors import MusicgenError, Terminated
from musicgen.measures.likelihood import SEGMENT, range_mean, seeded_nll, segment_means
from musicgen.tokenizers.recall import Context, recall_context
from musicgen.train.state import Ranks, Run, StepDone, StopRequest, TrainResult, TrainState


def crops_per_step(cfg: Config) -> int:
    """Crops one rank reads per optimiser step."""
    return cfg.train.batch_size * cfg.train.grad_accum


def run_steps(run: Run, state: TrainState, stop: StopRequest) -> None:
    """Steps until max_steps, or until some rank must stop (time limit, signal): the step in
    progress is then finished, validated and saved on every rank, and all leave together."""
    batches = iter(run.loader)
    state.t0 = time.time()
    while state.step < run.cfg.train.max_steps:
        done = train_step(run, state, batches, stop)
        report_step(run, state, done)
        maybe_validate(run, state, done.leave)
        maybe_checkpoint(run, state, done.leave)
        _test_hook(state.step)
        if done.leave:
            if run.ranks.main:
                t = run.cfg.train
                why = (
                    f"after {t.max_minutes} minutes"
                    if done.overtime and not stop.asked
                    else "on request"
                )
                tqdm.write(
                    f"stopping {why} at step {state.step}: saved {run.out / 'last.pt'}; "
                    "resume continues it (`musicgen train --resume`)"
                )
            return


def train_step(run: Run, state: TrainState, batches: Iterator[dict], stop: StopRequest) -> StepDone:
    """One optimiser step: seeded randomness, gradients over grad_accum micro-batches, one
    all-reduced decision (non-finite loss anywhere: raise; stop wanted anywhere: leave after this
    step), then the clipped update (through the GradScaler: fp16 skips steps with inf grads)."""
    cfg, step = run.cfg, state.step
    run.wrapped.train()
    torch.manual_seed(step_seed(cfg.train.seed, run.ranks.rank, step))
    # FAVOR+ redraws come from (seed, step) alone: every rank and a resumed run agree.
    run.model.on_train_step(step, torch.Generator().manual_seed(cfg.train.seed * 1_000_003 + step))
    lr = lr_at(step, cfg)
    for group in run.optim.param_groups:
        group["lr"] = lr
    loss = accumulate_gradients(run, state, batches)
    overtime = bool(cfg.train.max_minutes) and (time.time() - state.t0 > 60 * cfg.train.max_minutes)
    bad, leave = any_rank([not math.isfinite(loss), overtime or stop.asked], run.ranks, run.device)
    if bad:
        where = loss if not math.isfinite(loss) else "on another rank"
        raise MusicgenError(
            f"non-finite loss ({where}) at step {step}; stopped, the last good "
            f"checkpoint in {run.out} is left intact (try a lower optim.lr)"
        )
    run.scaler.unscale_(run.optim)
    torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.optim.grad_clip)
    run.scaler.step(run.optim)
    run.scaler.update()
    run.optim.zero_grad(set_to_none=True)
    state.step += 1
    state.items += crops_per_step(cfg) * run.ranks.world
    return StepDone(loss, lr, leave, overtime)


def accumulate_gradients(run: Run, state: TrainState, batches: Iterator[dict]) -> float:
    """Forward and backward over grad_accum micro-batches; returns their mean loss. Under DDP the
    gradients are all-reduced on the last micro-batch only (no_sync before it)."""
    accum = run.cfg.train.grad_accum
    loss_sum = 0.0
    for micro in range(accum):
        batch = next(batches)
        x, y = batch["input"].to(run.device), batch["target"].to(run.device)  # (B, L) each
        sync = micro == accum - 1 or run.ranks.world == 1
        with nullcontext() if sync else run.wrapped.no_sync(), run.amp:
            logits = run.wrapped(x)  # (B, L, V)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=-100)
        run.scaler.scale(loss / accum).backward()
        loss_sum += loss.item() / accum
        state.tokens += int((y != -100).sum())
    return loss_sum


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


def step_seed(seed: int, rank: int, step: int) -> int:
    """torch's seed for training step `step` on `rank`: reseeding every step makes dropout and
    SPE noise a function of (seed, rank, step), so resuming needs no RNG state and ranks differ."""
    return int(np.random.SeedSequence([seed, rank, step, 7]).generate_state(1, np.uint64)[0] >> 1)


def any_rank(flags: list[bool], ranks: Ranks, device: torch.device) -> list[bool]:
    """Each flag true on every rank when it is true on any (one all-reduce): ranks leave the loop
    at the same step (one leaving alone would leave the others waiting in an all-reduce)."""
    if ranks.world == 1:
        return flags
    t = torch.tensor([float(f) for f in flags], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


def report_step(run: Run, state: TrainState, done: StepDone) -> None:
    """Main rank: the progress bar, and a log record every log.every steps and at the last."""
    if not run.ranks.main:
        return
    step, per_step, world = state.step, crops_per_step(run.cfg), run.ranks.world
    tps = state.tokens * world / max(1e-9, time.time() - state.t0)
    run.bar.update(1)
    run.bar.set_postfix(loss=f"{done.loss:.3f}", lr=f"{done.lr:.2e}", tok_s=f"{tps:.0f}")
    if step % run.cfg.log.every == 0 or step == run.cfg.train.max_steps:
        epoch = run.data.pass_of(state.items - world * per_step)
        _log(
            run.log,
            {
                "kind": "train",
                "step": step,
                "epoch": epoch,
                "loss": done.loss,
                "lr": done.lr,
                "tok_per_s": tps,
                "time": time.time() - state.t0,
                "precision": run.precision,
            },
        )


def _due(run: Run, state: TrainState, every: int, leave: bool) -> bool:
    """Every `every` steps, at the last step, and before leaving early."""
    return state.step % every == 0 or state.step == run.cfg.train.max_steps or leave


def maybe_validate(run: Run, state: TrainState, leave: bool) -> None:
    """Validate when due (every rank: it is a collective); a new best loss is saved as best.pt."""
    if not run.val_songs or not _due(run, state, run.cfg.train.val_every, leave):
        return
    res = validate(
        run.wrapped, run.val_songs, run.cfg, run.device, run.ranks, recall_context(run.tok)
    )
    _log(run.log, {"kind": "val", "step": state.step, **res})
    if run.ranks.main:
        tqdm.write(
            f"step {state.step}: val loss {res['loss']:.4f} (beyond crop: {res['loss_beyond']})"
        )
    if res["loss"] < state.best:
        state.best = res["loss"]
        if run.ranks.main:
            save_state(run, state, "best.pt")


def validate(
    model: torch.nn.Module,
    songs: list,
    cfg: Config,
    device: torch.device,
    ranks: Ranks,
    context: Context | None = None,
) -> dict:
    """Mean loss within the crop length, beyond it (extrapolation), and per 128-token segment,
    over `train.val_seeds` seeded SPE draws (the same draws every time: best.pt is not picked on
    noise). Each rank scores songs[rank::world]; the sums are all-reduced, so every rank gets the
    numbers a single process would. `context`: recalled phrases in place (`tokenizers.recall`);
    positions are the songs' own."""
    sums, counts = seeded_nll(
        unwrap(model),
        songs[ranks.rank :: ranks.world],
        cfg.train.val_max_len,
        device,
        seeds=cfg.train.val_seeds,
        seed=cfg.train.seed,
        first_index=ranks.rank,
        step=ranks.world,
        context=context,
    )
    if ranks.world > 1:
        both = torch.from_numpy(np.stack([sums, counts.astype(np.float64)])).to(device)
        dist.all_reduce(both)  # (2, val_max_len) float64
        sums, counts = both[0].cpu().numpy(), both[1].cpu().numpy().round().astype(np.int64)
    crop = cfg.data.crop_len
    beyond = range_mean(sums, counts, crop)
    return {
        "loss": range_mean(sums, counts, 0, crop),
        "loss_beyond": None if math.isnan(beyond) else beyond,
        "loss_per_segment": [None if math.isnan(v) else v for v in segment_means(sums, counts)],
        "segment": SEGMENT,
        "crop_len": crop,
    }


def maybe_checkpoint(run: Run, state: TrainState, leave: bool) -> None:
    """Main rank, when due: last.pt, and a numbered hard link of it (the last train.keep_last)."""
    if run.ranks.main and _due(run, state, run.cfg.train.ckpt_every, leave):
        save_state(run, state, "last.pt")
        _rotate(run.out, state.step, run.cfg.train.keep_last)


def save_state(run: Run, state: TrainState, name: str) -> None:
    """RUN/name: the weights plus what an exact resume needs (step, best, optimiser, scaler)."""
    train_state = {
        "step": state.step,
        "best": state.best,
        "optimizer": run.optim.state_dict(),
        "precision": run.precision,
        "items": state.items,
    }
    if run.scaler.is_enabled():  # fp16: the loss scale and its growth counter
        train_state["scaler"] = run.scaler.state_dict()
    save_checkpoint(run.out / name, run.model, run.cfg, run.tok, train_state)


def _rotate(out: Path, step: int, keep: int) -> None:
    """Keep the last `keep` numbered checkpoints (hard links of last.pt; no extra disk)."""
    if keep <= 0:
        return
    target = out / f"step_{step:07d}.pt"
    if not target.exists():
        try:
            os.link(out / "last.pt", target)
        except OSError:  # a file system without hard links
            shutil.copyfile(out / "last.pt", target)
    for old in sorted(out.glob("step_*.pt"))[:-keep]:
        old.unlink()


def _log(fh: IO[str] | None, record: dict) -> None:
    """One JSON line, flushed (a kill loses at most the line being written); no-op off rank 0."""
    if fh is not None:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


def _test_hook(step: int) -> None:
    """For the resume test only: MUSICGEN_TEST_KILL_AT_STEP=k makes the process SIGKILL itself
    once step k is done (logged; checkpointed if due): a kill at a known step, no log polling."""
    if os.environ.get("MUSICGEN_TEST_KILL_AT_STEP") == str(step):
        os.kill(os.getpid(), signal.SIGKILL)


def close_outputs(run: Run) -> None:
    """Progress bar, log, and the process group (every rank has left the loop at the same step)."""
    if run.bar is not None:
        run.bar.close()
    if run.log is not None:
        run.log.close()
    if run.ranks.world > 1:
        dist.destroy_process_group()


def finish(run: Run, state: TrainState, stop: StopRequest) -> TrainResult:
    """The result; max_steps=0 still writes last.pt (the initialised model). A stop asked by a
    signal leaves, after the save, as the signal would: Terminated (SIGTERM, exit 143) or
    KeyboardInterrupt (Ctrl-C: the command still reports the interrupt)."""
    if run.ranks.main and not (run.out / "last.pt").is_file():
        save_state(run, state, "last.pt")
    if stop.signum == signal.SIGTERM:
        raise Terminated(stop.signum)
    if stop.asked:
        raise KeyboardInterrupt
    return TrainResult(run.out / "last.pt", state.step, run.model)
