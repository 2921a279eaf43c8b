"""What the training stages share: the run (`Run`), its step-to-step state (`TrainState`), this
process's rank, the stop request that signals set, and the lock that keeps a run folder to one
writer. `musicgen.train` builds them, `musicgen.train.loop` advances them.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from musicgen.config import Config
from musicgen.errors import MusicgenError
from musicgen.io import FolderLock
from musicgen.tokenizers import Tokenizer


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
    items: int = 0  # crops all ranks read before this step: the next step's first is this one
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
    precision_why: str  # how it was chosen ("auto: this CPU has amx_bf16", "as configured")
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


class RunLock(FolderLock):
    """An exclusive lock on RUN/.lock for the whole run (`io.FolderLock`): a second `train` on
    the same folder fails at once with one line instead of mixing its files with the first's."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, "train")


RUN_FILES = ("log.jsonl", "last.pt", "best.pt", "step_*.pt")  # what makes a folder a run


def run_files(out: Path) -> list[Path]:
    """The files of a run in `out` (none if it is no folder)."""
    if not out.is_dir():
        return []
    return [f for pattern in RUN_FILES for f in sorted(out.glob(pattern))]


def refuse_existing_run(out: Path, resume: bool) -> None:
    """A new run (no `resume`) into a folder holding a run is refused before any work: it
    would replace best.pt with a worse one, cut log.jsonl and leave old step_*.pt beside the
    new run. `musicgen train --force` moves the old run aside first (`move_run_aside`). A run
    that another `train` is writing gets that process's lock message instead."""
    files = [] if resume else run_files(out)
    if files:
        with RunLock(out):  # a run still being written is named as such first
            pass
        names = ", ".join(f.name for f in files[:3]) + (", ..." if len(files) > 3 else "")
        raise MusicgenError(
            f"{out}: already holds a run ({names}); give --resume to continue it, --force to "
            f"move it aside to {aside_name(out)} and start anew, or another --out"
        )


def aside_name(out: Path) -> Path:
    """The first free `OUT.old-N` (N = 1, 2, ...) beside `out`."""
    n = 1
    while (target := out.with_name(f"{out.name}.old-{n}")).exists() or target.is_symlink():
        n += 1
    return target


def move_run_aside(out: Path) -> Path | None:
    """`--force`: the whole folder `out`, if it holds a run, renamed to `OUT.old-N` (the run
    stays complete and loadable there; nothing is deleted or replaced); None if it holds none.
    Refused while another `train` writes it (its lock)."""
    if not run_files(out):
        return None
    with RunLock(out):
        target = aside_name(out)
        try:
            os.rename(out, target)
        except OSError as exc:
            raise MusicgenError(
                f"{out}: cannot move the old run to {target} ({exc.strerror})"
            ) from None
    return target


def loader_worker_init(worker_id: int) -> None:
    """DataLoader workers ignore SIGINT and SIGTERM: a signal sent to the whole process group
    (Ctrl-C, `kill -- -PGID`, SLURM) must reach the main process alone, which finishes the step,
    saves last.pt and ends the workers; a worker killed mid-step would lose that step's save."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
