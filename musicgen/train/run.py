"""Training: prepared crops -> Performer -> self-describing checkpoints, exactly resumable.

Which crops a step sees, and every random draw it makes (dropout, SPE noise), is a pure function
of (seed, step, rank), so a resumed run replays the uninterrupted one exactly: only the model,
optimiser, gradient scaler, best validation loss and step are saved. Runs alone or under
`torchrun` (DistributedDataParallel; NCCL on CUDA, gloo on CPU): ranks draw different noise and
crops, score disjoint validation songs, and agree on when to stop (time limit, Ctrl-C, SIGTERM).

`train()` reads top to bottom as its stages: `resume_state` (what RUN/last.pt holds, checked
against the config), `build_run` (model, optimiser, scaler, loader, validation songs: a `Run`),
`open_outputs` (run folder, log, progress bar), then the loop of `musicgen.train.loop` (per step
`train_step`, `report_step`, `maybe_validate`, `maybe_checkpoint`, and at the end `finish`). A
`TrainState` (step, best validation loss, tokens, start time) is what changes from step to step;
the shared types, the stop request and the run-folder lock are in `musicgen.train.state`.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Sampler
from tqdm import tqdm

from musicgen.checkpoint import checked_weights, payload_tokenizer, read_payload
from musicgen.config import Config, config_from_dict, to_dict
from musicgen.data.dataset import PreparedSplit, load_songs
from musicgen.data.layout import check_no_test_songs, manifest_forms
from musicgen.data.segments import make_train_dataset
from musicgen.device import pick_device, resolve_precision
from musicgen.errors import MusicgenError
from musicgen.io import atomic_write_text, ensure_dir, remove_stale_temps
from musicgen.model import build_model
from musicgen.tokenizers import Tokenizer
from musicgen.train.log import read_log, records_text
from musicgen.train.loop import close_outputs, crops_per_step, finish, run_steps, step_seed
from musicgen.train.state import (
    Ranks,
    Run,
    RunLock,
    StopRequest,
    TrainResult,
    TrainState,
    loader_worker_init,
    refuse_existing_run,
)
from musicgen.train.vocabulary import extend_vocabulary

__all__ = ["StopRequest", "TrainResult", "make_optimizer", "step_seed", "train"]

STATE_FILES = ("last.pt", "best.pt", "log.jsonl")  # what a killed writer can leave a .tmp of


def train(cfg: Config, out_dir: str | Path, resume: bool = False) -> TrainResult:
    """Train per `cfg`, writing RUN_DIR/{last,best,step_N}.pt and RUN_DIR/log.jsonl. The main
    rank holds RUN_DIR/.lock throughout (a second run on the folder is refused)."""
    out = Path(out_dir)
    check_options(cfg)
    refuse_existing_run(out, resume)
    if resume and not (out / "last.pt").is_file():
        raise MusicgenError(f"{out}: nothing to resume (no last.pt)")
    device = pick_device(cfg.train.device, int(os.environ.get("LOCAL_RANK", 0)))
    ranks = setup_distributed(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    lock = RunLock(ensure_dir(out)).acquire() if ranks.main else None
    try:
        return _train_locked(cfg, out, resume, device, ranks)
    finally:
        if lock is not None:
            lock.release()


def _train_locked(
    cfg: Config, out: Path, resume: bool, device: torch.device, ranks: Ranks
) -> TrainResult:
    state, payload = resume_state(cfg, out, ranks) if resume else (TrainState(), None)
    run = build_run(cfg, out, device, ranks, payload, state)
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


def resume_state(cfg: Config, out: Path, ranks: Ranks) -> tuple[TrainState, dict]:
    """The step, best loss and crops read of out/last.pt and its payload (weights, optimiser,
    scaler), after checking that it can continue this config (same model and tokenizer, step <=
    max_steps). A checkpoint that did not count its crops read them at this world size."""
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
    step, best = saved_state["step"], saved_state.get("best", math.inf)
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise MusicgenError(f"{last}: training state 'step' must be a count, got {step!r}")
    if not isinstance(best, (int, float)) or isinstance(best, bool):
        raise MusicgenError(f"{last}: training state 'best' must be a number, got {best!r}")
    if not isinstance(saved_state["optimizer"], dict):
        raise MusicgenError(f"{last}: training state 'optimizer' must be a mapping")
    if step > cfg.train.max_steps:
        raise MusicgenError(
            f"config: train.max_steps: must be >= {step} (the step of {last}) to resume, "
            f"got {cfg.train.max_steps}"
        )
    items = saved_state.get("items", step * ranks.world * crops_per_step(cfg))
    if not isinstance(items, int) or isinstance(items, bool) or items < 0:
        raise MusicgenError(f"{last}: training state 'items' must be a count, got {items!r}")
    return TrainState(step=step, best=float(best), items=items), payload


def build_run(
    cfg: Config,
    out: Path,
    device: torch.device,
    ranks: Ranks,
    payload: dict | None,
    state: TrainState,
) -> Run:
    """Model, optimiser, scaler (restored from `payload` when resuming), data loader from
    `state`'s step and crop on, and validation songs."""
    split = PreparedSplit(cfg.data.path, "train")
    check_no_test_songs(cfg.data.path)
    tok = data_tokenizer(cfg, split)
    torch.manual_seed(cfg.train.seed)  # the same initial weights on every rank
    model = build_model(cfg.model, tok).to(device)
    optim = make_optimizer(model, cfg)
    amp, precision, why = autocast_for(device, cfg.train.precision, cfg.model.d_model)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    if payload is not None:
        if payload["tokenizer"] != tok.to_dict():
            raise MusicgenError(f"{out / 'last.pt'}: checkpoint tokenizer differs from the data's")
        model.load_state_dict(checked_weights(model, payload["model"], str(out / "last.pt")))
        restore_training_state(optim, scaler, payload["train_state"], out / "last.pt")
    elif cfg.train.init_from:
        init_weights(model, cfg.train.init_from, tok)
    data, loader = make_loader(cfg, split, ranks, state)
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
        precision_why=why,
        tok=tok,
        data=data,
        loader=loader,
        val_songs=load_songs(cfg.data.path, "validation", max_songs=cfg.train.val_songs),
    )


def restore_training_state(
    optim: torch.optim.Optimizer, scaler: torch.amp.GradScaler, saved: dict, where: Path
) -> None:
    """The optimiser's and the gradient scaler's saved states; one that does not fit this
    model (another parameter layout, a damaged file) is an error naming the checkpoint."""
    try:
        optim.load_state_dict(saved["optimizer"])
        if "scaler" in saved:
            scaler.load_state_dict(saved["scaler"])
    except (ValueError, KeyError, TypeError, RuntimeError, IndexError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MusicgenError(
            f"{where}: its optimiser state does not fit this model ({first[:120]})"
        ) from None


def init_weights(model: nn.Module, src: str, tok: Tokenizer) -> list[str]:
    """Fine-tuning: load `src`'s weights into `model` (same vocabulary as the data). Modules the
    config adds keep their initialisation (returned, and logged); a block that became windowed
    softmax drops what only linear attention uses, its FAVOR+ draw and SPE gate (logged), and
    keeps its learned q, k, v and output weights; anything else that does not fit is an
    error, so a different architecture cannot start half-loaded."""
    payload = read_payload(src)
    theirs = payload_tokenizer(payload)
    names = [theirs.token_name(i) for i in range(theirs.vocab_size)]
    ours = [tok.token_name(i) for i in range(tok.vocab_size)]
    if names != ours[: len(names)]:
        raise MusicgenError(f"train.init_from: {src}: its vocabulary differs from the data's")
    weights = payload["model"]
    if len(names) < len(ours):
        weights = extend_vocabulary(model, weights, len(names), tok)
        print(f"init_from {src}: vocabulary {len(names)} -> {len(ours)} tokens", flush=True)
    weights = checked_weights(model, weights, f"train.init_from: {src}")
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


def autocast_for(
    device: torch.device, precision: str, d_model: int
) -> tuple[AbstractContextManager, str, str]:
    """The autocast context of `precision` on `device`, the precision it resolved to and why
    (`device.resolve_precision`): fp32 runs without autocast."""
    precision, why = resolve_precision(device, precision, d_model)
    if precision == "fp32":
        return nullcontext(), precision, why
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype), precision, why


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
    """Dataset indices for steps start..max: step s, rank r, slot j -> a unique index. The
    steps from `start` on read the crops after the first `start_item` ones, whatever the world
    size that read those: a run resumed on another number of ranks neither skips nor repeats."""

    def __init__(
        self, start: int, max_steps: int, per_step: int, rank: int, world: int, start_item: int
    ):
        self.start, self.max, self.per_step = start, max_steps, per_step
        self.rank, self.world, self.start_item = rank, world, start_item

    def __iter__(self):
        for step in range(self.start, self.max):
            base = self.start_item + ((step - self.start) * self.world + self.rank) * self.per_step
            yield from range(base, base + self.per_step)

    def __len__(self) -> int:
        return (self.max - self.start) * self.per_step


def make_loader(
    cfg: Config, split: PreparedSplit, ranks: Ranks, state: TrainState
) -> tuple[torch.utils.data.Dataset, DataLoader]:
    """The crops of every step and rank, and a loader giving this rank's from `state` on."""
    per_step, remaining = crops_per_step(cfg), cfg.train.max_steps - state.step
    data = make_train_dataset(cfg, split, state.items + remaining * per_step * ranks.world)
    sampler = StepSampler(
        state.step, cfg.train.max_steps, per_step, ranks.rank, ranks.world, state.items
    )
    loader = DataLoader(
        data,
        batch_size=cfg.train.batch_size,
        num_workers=cfg.data.workers,
        sampler=sampler,
        worker_init_fn=loader_worker_init if cfg.data.workers else None,
    )
    return data, loader


def open_outputs(run: Run, start_step: int) -> None:
    """Main rank: the run folder without stray temporaries, the log cut back to `start_step`
    and open for appending, and a header; every rank: the progress bar (shown on the main)."""
    if run.ranks.main:
        ensure_dir(run.out)
        remove_stale_temps(run.out, STATE_FILES)
        _truncate_log(run.out / "log.jsonl", start_step)
        run.log = open(run.out / "log.jsonl", "a")
        forms = manifest_forms(run.cfg.data.path)
        if forms:  # what `--form auto` draws from (generation.controls.form_plan)
            atomic_write_text(run.out / "forms.json", json.dumps(forms) + "\n")
        n_params = sum(p.numel() for p in run.model.parameters())
        print(
            f"musicgen train: {n_params / 1e6:.1f} M parameters, device {run.device}, "
            f"precision {run.precision} ({run.precision_why}), world {run.ranks.world}, "
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
