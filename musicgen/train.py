"""Training loop: prepared crops -> Performer -> self-describing checkpoints, exactly resumable.

Which crops a step sees, and every random draw it makes (dropout, SPE noise), is a pure function
of (seed, step, rank), so a resumed run replays the uninterrupted one exactly: only the model,
optimiser, gradient scaler, best validation loss and step are saved. Runs alone or under
`torchrun` (DistributedDataParallel; NCCL on CUDA, gloo on CPU): ranks draw different noise and
crops, score disjoint validation songs, and agree on when to stop (time limit, Ctrl-C, SIGTERM).

`train()` reads top to bottom as its stages: `resume_state` (what RUN/last.pt holds, checked
against the config), `build_run` (model, optimiser, scaler, loader, validation songs: a `Run`),
`open_outputs` (run folder, log, progress bar), then per step `train_step`, `report_step`,
`maybe_validate`, `maybe_checkpoint`, and at the end `finish`. A `TrainState` (step, best
validation loss, tokens, start time) is what changes from step to step.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Sampler
from tqdm import tqdm

from musicgen.checkpoint import read_payload, save_checkpoint, unwrap
from musicgen.config import Config, config_from_dict, to_dict
from musicgen.data.dataset import PreparedSplit, load_songs
from musicgen.data.segments import make_train_dataset
from musicgen.device import pick_device
from musicgen.errors import MusicgenError, Terminated
from musicgen.io import atomic_write_text, remove_stale_temps
from musicgen.likelihood import SEGMENT, range_mean, seeded_nll, segment_means
from musicgen.model import build_model
from musicgen.runlog import read_log, records_text
from musicgen.tokenizers import Tokenizer, load_tokenizer

STATE_FILES = ("last.pt", "best.pt", "log.jsonl")  # what a killed writer can leave a .tmp of


@dataclass
class TrainResult:
    last: Path  # RUN_DIR/last.pt
    step: int
    model: torch.nn.Module  # the plain (unwrapped) model, in its final state


@dataclass
class Ranks:
    """This process's place among the torchrun processes (rank 0 of 1 when run alone)."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        """Rank 0 alone writes files and prints."""
        return self.rank == 0


@dataclass
class TrainState:
    """What changes from step to step; `step` and `best` are saved in last.pt with the weights."""

    step: int = 0
    best: float = math.inf  # best validation loss so far
    tokens: int = 0  # target tokens this process trained on since it started (for tokens/s)
    t0: float = 0.0  # wall time the loop started (time limit, tokens/s, log)


@dataclass
class Run:
    """What the stages share, built once by `build_run`; `log` and `bar` by `open_outputs`."""

    cfg: Config
    out: Path
    device: torch.device
    ranks: Ranks
    model: torch.nn.Module  # the plain model: what is saved, and what on_train_step redraws
    wrapped: torch.nn.Module  # the same model under DDP and/or torch.compile: what is called
    optim: torch.optim.Optimizer
    scaler: torch.amp.GradScaler  # enabled for fp16 only
    amp: AbstractContextManager  # the autocast context (a null one for fp32)
    precision: str  # fp32, bf16 or fp16 ("auto" resolved)
    tok: Tokenizer
    data: torch.utils.data.Dataset  # the training crops (pass_of(index) gives the epoch)
    loader: DataLoader
    val_songs: list
    log: IO[str] | None = None  # RUN/log.jsonl, open on the main rank only
    bar: tqdm | None = None


@dataclass
class StepDone:
    """What `train_step` tells the stages after it."""

    loss: float  # mean over the micro-batches of this rank
    lr: float
    leave: bool  # some rank ran out of time or was asked to stop: leave after this step
    overtime: bool  # this rank's time limit passed


def train(cfg: Config, out_dir: str | Path, resume: bool = False) -> TrainResult:
    """Train per `cfg`, writing RUN_DIR/{last,best,step_N}.pt and RUN_DIR/log.jsonl."""
    out = Path(out_dir)
    check_options(cfg)
    device = pick_device(cfg.train.device, int(os.environ.get("LOCAL_RANK", 0)))
    ranks = setup_distributed(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    state, payload = resume_state(cfg, out) if resume else (TrainState(), None)
    run = build_run(cfg, out, device, ranks, payload, state.step)
    del payload  # its weights and optimiser state are in the run now
    open_outputs(run, state.step)
    stop = StopRequest().install()
    try:
        run_steps(run, state, stop)
    finally:
        stop.uninstall()
        close_outputs(run)
    return finish(run, state, stop)


# ---- before the loop ---------------------------------------------------------------------------


def check_options(cfg: Config) -> None:
    """Options only the trainer reads, checked before any work."""
    if cfg.train.val_seeds < 1:
        raise MusicgenError(
            f"config: train.val_seeds must be at least 1, got {cfg.train.val_seeds}"
        )


def setup_distributed(device: torch.device) -> Ranks:
    """Join the process group when launched by torchrun (RANK is set); alone otherwise."""
    if "RANK" not in os.environ:
        return Ranks()
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend)
    return Ranks(dist.get_rank(), dist.get_world_size())


def resume_state(cfg: Config, out: Path) -> tuple[TrainState, dict]:
    """The step and best loss of out/last.pt and its payload (weights, optimiser, scaler), after
    checking that it can continue this config (same model and tokenizer, step <= max_steps)."""
    last = out / "last.pt"
    if not last.is_file():
        raise MusicgenError(f"{out}: nothing to resume (no last.pt)")
    payload = read_payload(last)
    saved = config_from_dict(payload["config"])
    if cfg.model.vocab_size == 0:
        cfg.model.vocab_size = saved.model.vocab_size
    if saved.tokenizer != cfg.tokenizer or saved.model != cfg.model:
        raise MusicgenError(
            f"{last}: checkpoint's model/tokenizer differ from this config's; "
            "resume with the config it was trained with"
        )
    saved_state = payload["train_state"]
    missing = [k for k in ("step", "optimizer") if k not in saved_state]
    if missing:
        raise MusicgenError(
            f"{last}: not a resumable training checkpoint (no {missing[0]} in its training state)"
        )
    step = int(saved_state["step"])
    if step > cfg.train.max_steps:
        raise MusicgenError(
            f"config: train.max_steps: must be >= {step} (the step of {last}) to resume, "
            f"got {cfg.train.max_steps}"
        )
    return TrainState(step=step, best=float(saved_state.get("best", math.inf))), payload


def build_run(
    cfg: Config,
    out: Path,
    device: torch.device,
    ranks: Ranks,
    payload: dict | None,
    start_step: int,
) -> Run:
    """Model, optimiser, scaler (restored from `payload` when resuming), data loader from
    `start_step` on, and validation songs."""
    split = PreparedSplit(cfg.data.path, "train")
    tok = data_tokenizer(cfg, split)
    torch.manual_seed(cfg.train.seed)  # the same initial weights on every rank
    model = build_model(cfg.model, tok).to(device)
    optim = make_optimizer(model, cfg)
    amp, precision = autocast_for(device, cfg.train.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    if payload is not None:
        if payload["tokenizer"] != tok.to_dict():
            raise MusicgenError(f"{out / 'last.pt'}: checkpoint tokenizer differs from the data's")
        model.load_state_dict(payload["model"])
        optim.load_state_dict(payload["train_state"]["optimizer"])
        if "scaler" in payload["train_state"]:
            scaler.load_state_dict(payload["train_state"]["scaler"])
    elif cfg.train.init_from:
        init_weights(model, cfg.train.init_from, tok)
    data, loader = make_loader(cfg, split, ranks, start_step)
    return Run(
        cfg=cfg,
        out=out,
        device=device,
        ranks=ranks,
        model=model,
        wrapped=wrap_model(model, cfg, device, ranks),
        optim=optim,
        scaler=scaler,
        amp=amp,
        precision=precision,
        tok=tok,
        data=data,
        loader=loader,
        val_songs=load_songs(cfg.data.path, "validation", max_songs=cfg.train.val_songs),
    )


def init_weights(model: nn.Module, src: str, tok: Tokenizer) -> list[str]:
    """Fine-tuning: load `src`'s weights into `model` (same vocabulary as the data). Modules the
    config adds keep their initialisation (returned, and logged); a block that became windowed
    softmax drops what only linear attention uses, its FAVOR+ draw and SPE gate (logged), and
    keeps its learned q, k, v and output weights; anything else that does not fit is an
    error, so a different architecture cannot start half-loaded."""
    payload = read_payload(src)
    theirs = load_tokenizer(payload["tokenizer"])
    names = [theirs.token_name(i) for i in range(theirs.vocab_size)]
    if names != [tok.token_name(i) for i in range(tok.vocab_size)]:
        raise MusicgenError(f"train.init_from: {src}: its vocabulary differs from the data's")
    weights = {k: v.float() if v.is_floating_point() else v for k, v in payload["model"].items()}
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as exc:
        first = str(exc).splitlines()[-1].strip()
        raise MusicgenError(f"train.init_from: {src}: weights do not fit ({first})") from None
    local = tuple(f"blocks.{i}.attn." for i in model.cfg.local_layers)
    dropped = [k for k in unexpected if k.startswith(local)]  # () matches nothing
    unexpected = [k for k in unexpected if k not in dropped]
    if unexpected:
        raise MusicgenError(
            f"train.init_from: {src}: has weights this model lacks ({unexpected[0]}, ...)"
        )
    if dropped:
        print(f"init_from {src}: not used by the windowed blocks: {', '.join(dropped)}", flush=True)
    if missing:
        print(f"init_from {src}: new, not loaded: {', '.join(missing)}", flush=True)
    return missing


def data_tokenizer(cfg: Config, split: PreparedSplit) -> Tokenizer:
    """The tokenizer the data was prepared with, checked against the config; fills in
    model.vocab_size when the config leaves it 0."""
    tok = split.tokenizer
    if tok.name != cfg.tokenizer:
        raise MusicgenError(
            f"{cfg.data.path}: data was prepared with tokenizer '{tok.name}' but the config "
            f"expects '{cfg.tokenizer}'"
        )
    if cfg.model.vocab_size == 0:
        cfg.model.vocab_size = tok.vocab_size
    elif cfg.model.vocab_size != tok.vocab_size:
        raise MusicgenError(
            f"{cfg.data.path}: vocabulary size {tok.vocab_size} does not match "
            f"model.vocab_size={cfg.model.vocab_size}"
        )
    return tok


def make_optimizer(model: torch.nn.Module, cfg: Config) -> torch.optim.Optimizer:
    """AdamW when optim.weight_decay > 0, Adam otherwise; the fused kernel (all parameters in one
    pass) on the devices that have it, CPU and CUDA, the default one elsewhere (MPS)."""
    opt_cls = torch.optim.AdamW if cfg.optim.weight_decay > 0 else torch.optim.Adam
    fused = next(model.parameters()).device.type in ("cpu", "cuda")
    return opt_cls(
        model.parameters(),
        lr=cfg.optim.lr,
        betas=tuple(cfg.optim.betas),
        weight_decay=cfg.optim.weight_decay,
        fused=fused or None,
    )


def autocast_for(device: torch.device, precision: str) -> tuple[AbstractContextManager, str]:
    """bf16 autocast on CUDA by default; fp32 elsewhere (CPU autocast is slower here)."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    if precision == "fp32":
        return nullcontext(), precision
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype), precision


def wrap_model(
    model: torch.nn.Module, cfg: Config, device: torch.device, ranks: Ranks
) -> torch.nn.Module:
    """DDP across ranks (gradients all-reduced in backward), then torch.compile if asked."""
    wrapped = model
    if ranks.world > 1:
        wrapped = torch.nn.parallel.DistributedDataParallel(
            wrapped, device_ids=[device.index] if device.type == "cuda" else None
        )
    if cfg.train.compile:
        wrapped = torch.compile(wrapped)
    return wrapped


class StepSampler(Sampler[int]):
    """Dataset indices for steps start..max: step s, rank r, slot j -> a unique index."""

    def __init__(self, start_step: int, max_steps: int, per_step: int, rank: int, world: int):
        self.start, self.max, self.per_step, self.rank, self.world = (
            start_step,
            max_steps,
            per_step,
            rank,
            world,
        )

    def __iter__(self):
        for step in range(self.start, self.max):
            base = (step * self.world + self.rank) * self.per_step
            yield from range(base, base + self.per_step)

    def __len__(self) -> int:
        return (self.max - self.start) * self.per_step


def crops_per_step(cfg: Config) -> int:
    """Crops one rank reads per optimiser step."""
    return cfg.train.batch_size * cfg.train.grad_accum


def make_loader(
    cfg: Config, split: PreparedSplit, ranks: Ranks, start_step: int
) -> tuple[torch.utils.data.Dataset, DataLoader]:
    """The crops of every step and rank, and a loader giving this rank's from `start_step` on."""
    per_step = crops_per_step(cfg)
    data = make_train_dataset(cfg, split, cfg.train.max_steps * per_step * ranks.world)
    sampler = StepSampler(start_step, cfg.train.max_steps, per_step, ranks.rank, ranks.world)
    loader = DataLoader(
        data, batch_size=cfg.train.batch_size, num_workers=cfg.data.workers, sampler=sampler
    )
    return data, loader


def open_outputs(run: Run, start_step: int) -> None:
    """Main rank: the run folder without stray temporaries, the log cut back to `start_step`
    and open for appending, and a header; every rank: the progress bar (shown on the main)."""
    if run.ranks.main:
        run.out.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(run.out, STATE_FILES)
        _truncate_log(run.out / "log.jsonl", start_step)
        run.log = open(run.out / "log.jsonl", "a")
        n_params = sum(p.numel() for p in run.model.parameters())
        print(
            f"musicgen train: {n_params / 1e6:.1f} M parameters, device {run.device}, "
            f"precision {run.precision}, world {run.ranks.world}, "
            f"steps {start_step}->{run.cfg.train.max_steps}"
        )
        print(json.dumps(to_dict(run.cfg), indent=None))
    run.bar = tqdm(
        total=run.cfg.train.max_steps,
        initial=start_step,
        disable=not run.ranks.main,
        desc="train",
        dynamic_ncols=True,
    )


def _truncate_log(path: Path, step: int) -> None:
    """On resume, drop log lines written after the resumed checkpoint (they are replayed), and
    a last line torn by the crash; a fresh run (step 0) starts an empty log."""
    records = read_log(path, required=False) if step > 0 else []
    if path.exists() or records:
        atomic_write_text(path, records_text([r for r in records if r.get("step", 0) <= step]))


# ---- the loop ----------------------------------------------------------------------------------


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
                    "--resume continues"
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
        epoch = run.data.pass_of((step - 1) * world * per_step)
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
            },
        )


def _due(run: Run, state: TrainState, every: int, leave: bool) -> bool:
    """Every `every` steps, at the last step, and before leaving early."""
    return state.step % every == 0 or state.step == run.cfg.train.max_steps or leave


def maybe_validate(run: Run, state: TrainState, leave: bool) -> None:
    """Validate when due (every rank: it is a collective); a new best loss is saved as best.pt."""
    if not run.val_songs or not _due(run, state, run.cfg.train.val_every, leave):
        return
    res = validate(run.wrapped, run.val_songs, run.cfg, run.device, run.ranks)
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
    model: torch.nn.Module, songs: list, cfg: Config, device: torch.device, ranks: Ranks
) -> dict:
    """Mean loss within the crop length, beyond it (extrapolation), and per 128-token segment,
    over `train.val_seeds` seeded SPE draws (the same draws every time: best.pt is not picked on
    noise). Each rank scores songs[rank::world]; the sums are all-reduced, so every rank gets the
    numbers a single process would."""
    sums, counts = seeded_nll(
        unwrap(model),
        songs[ranks.rank :: ranks.world],
        cfg.train.val_max_len,
        device,
        seeds=cfg.train.val_seeds,
        seed=cfg.train.seed,
        first_index=ranks.rank,
        step=ranks.world,
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
    train_state = {"step": state.step, "best": state.best, "optimizer": run.optim.state_dict()}
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


# ---- stopping and the end ----------------------------------------------------------------------


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
