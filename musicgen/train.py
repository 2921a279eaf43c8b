"""Training loop: prepared crops -> Performer -> self-describing checkpoints, exactly resumable.

Which crops a step sees is a pure function of (seed, step, rank), so a resumed run replays the
uninterrupted one exactly: only the model, optimiser, scheduler, RNG states and step are saved.
Runs alone or under `torchrun` (DistributedDataParallel; NCCL on CUDA, gloo on CPU).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

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
from musicgen.errors import MusicgenError
from musicgen.evaluate import SEGMENT, per_position_nll, range_mean, segment_means
from musicgen.io import atomic_write_text
from musicgen.model import build_model
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


def make_optimizer(cfg: Config, model: torch.nn.Module, device: torch.device):
    """Adam(W) per cfg.optim; the fused kernel on CPU and CUDA (one pass per parameter: on CPU
    about 15x faster than the per-parameter loop, see docs/profile.md)."""
    opt_cls = torch.optim.AdamW if cfg.optim.weight_decay > 0 else torch.optim.Adam
    return opt_cls(model.parameters(), lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                   weight_decay=cfg.optim.weight_decay, fused=device.type in ("cpu", "cuda"))


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    version, _, gauss = random.getstate()
    random.setstate((version, tuple(state["python"]), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


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


def validate(model, songs, cfg: Config, device) -> dict:
    """Mean loss within the crop length, beyond it (extrapolation), and per 128-token segment."""
    sums, counts = per_position_nll(unwrap(model), songs, cfg.train.val_max_len, device)
    crop = cfg.data.crop_len
    beyond = range_mean(sums, counts, crop)
    return {"loss": range_mean(sums, counts, 0, crop),
            "loss_beyond": None if math.isnan(beyond) else beyond,
            "loss_per_segment": [None if math.isnan(v) else v for v in segment_means(sums, counts)],
            "segment": SEGMENT, "crop_len": crop}


def train(cfg: Config, out_dir: str | Path, resume: bool = False) -> TrainResult:
    """Train per `cfg`, writing RUN_DIR/{last,best,step_N}.pt and RUN_DIR/log.jsonl."""
    out = Path(out_dir)
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
        start_step = int(payload["train_state"]["step"])
        best = float(payload["train_state"].get("best", best))

    train_split = PreparedSplit(cfg.data.path, "train")
    tok = check_data(cfg, train_split)
    torch.manual_seed(cfg.train.seed)
    random.seed(cfg.train.seed)
    model = build_model(cfg.model).to(device)
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
    scaler = torch.amp.GradScaler(enabled=precision == "fp16")

    per_step = cfg.train.batch_size * cfg.train.grad_accum
    data = make_train_dataset(cfg, train_split, cfg.train.max_steps * per_step * dd.world)
    loader = DataLoader(data, batch_size=cfg.train.batch_size, num_workers=cfg.data.workers,
                        sampler=StepSampler(start_step, cfg.train.max_steps, per_step,
                                            dd.rank, dd.world))
    val_songs = load_songs(cfg.data.path, "validation", max_songs=cfg.train.val_songs)

    log = None
    if dd.main:
        out.mkdir(parents=True, exist_ok=True)
        _truncate_log(out / "log.jsonl", start_step)
        log = open(out / "log.jsonl", "a")
        n_params = sum(p.numel() for p in raw.parameters())
        print(f"musicgen train: {n_params / 1e6:.1f} M parameters, device {device}, "
              f"precision {precision}, world {dd.world}, steps {start_step}->{cfg.train.max_steps}")
        print(json.dumps(to_dict(cfg), indent=None))

    def checkpoint(step: int, name: str) -> None:
        state = {"step": step, "best": best, "optimizer": optim.state_dict(), "rng": rng_state()}
        save_checkpoint(out / name, raw, cfg, tok, state)

    step, t0, tokens, batches = start_step, time.time(), 0, iter(loader)
    if payload is not None:  # restored last: creating the loader's iterator draws from the RNG
        set_rng_state(payload["train_state"]["rng"])
    bar = tqdm(total=cfg.train.max_steps, initial=start_step, disable=not dd.main,
               desc="train", dynamic_ncols=True)
    try:
        while step < cfg.train.max_steps:
            model.train()
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
            if not math.isfinite(loss_sum):
                raise MusicgenError(
                    f"non-finite loss ({loss_sum}) at step {step}; stopped, the last good "
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
                    _log(log, {"kind": "train", "step": step, "loss": loss_sum, "lr": lr,
                               "tok_per_s": tps, "time": time.time() - t0})
            last = step == cfg.train.max_steps
            overtime = cfg.train.max_minutes and (time.time() - t0) > 60 * cfg.train.max_minutes
            if dd.main and val_songs and (step % cfg.train.val_every == 0 or last or overtime):
                model.eval()
                res = validate(model, val_songs, cfg, device)
                _log(log, {"kind": "val", "step": step, **res})
                tqdm.write(f"step {step}: val loss {res['loss']:.4f} (beyond crop: "
                           f"{res['loss_beyond']})")
                if res["loss"] < best:
                    best = res["loss"]
                    checkpoint(step, "best.pt")
            if dd.main and (step % cfg.train.ckpt_every == 0 or last or overtime):
                checkpoint(step, "last.pt")
                _rotate(out, step, cfg.train.keep_last)
            if overtime:
                tqdm.write(f"stopping after {cfg.train.max_minutes} minutes at step {step}")
                break
    except KeyboardInterrupt:
        if dd.main and step > start_step:
            checkpoint(step, "last.pt")
            tqdm.write(f"interrupted: saved {out / 'last.pt'} at step {step}; --resume continues")
        raise
    finally:
        bar.close()
        if log:
            log.close()
        if dd.world > 1:
            dist.destroy_process_group()
    return TrainResult(out / "last.pt", step, raw)


def _log(fh, record: dict) -> None:
    if fh is not None:
        fh.write(json.dumps(record) + "\n")
        fh.flush()


def _truncate_log(path: Path, step: int) -> None:
    """On resume, drop log lines written after the resumed checkpoint (they are replayed)."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= step]
    atomic_write_text(path, "".join(line + "\n" for line in keep))


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

