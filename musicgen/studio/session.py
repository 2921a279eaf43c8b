"""One page's results: its own folder under the studio's root, the pieces it made (with their
files), its running jobs' stop flags, and the disk budgets of a page and of the whole studio."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.studio.inputs import SERVER_MB, SESSION_MB
from musicgen.studio.player import Roll

MAX_SESSION_PIECES = 40  # older pieces of a page are forgotten (and their files deleted)
SESSIONS = "sessions"  # the folder under the studio's root that holds every page's results


@dataclass
class Piece:
    """One result as the page shows it: files in the session folder and what made it."""

    label: str
    midi: Path
    png: Path
    audio: Path | None
    seed: int | None
    info: dict = field(default_factory=dict)
    roll: Roll | None = None  # what the player draws
    bars: int | None = None  # whole bars the piece holds (prompt included)
    stopped_at: int | None = None  # new bars written when Stop ended the job (None: finished)

    @property
    def id(self) -> str:
        """The piece's name on its page ('ext_003'), which its label begins with."""
        return self.label.split(":", 1)[0]

    def files(self) -> list[Path]:
        return [p for p in (self.midi, self.audio) if p is not None]


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files under `folder` (0 when it is gone)."""
    total = 0
    for top, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


class Session:
    """One open page: its own folder, its pieces and its stop flag. `gr.State` deep-copies its
    initial value for every page, so a copy is a fresh, empty session under the same root.
    The folder's name is an unguessable token: its files' addresses are that page's alone."""

    def __init__(self, root: str | Path | None = None, budget_mb: float = SESSION_MB):
        self.root = Path(root) if root is not None else None
        self.budget_mb = budget_mb
        self.folder: Path | None = None
        self.pieces: list[Piece] = []
        self.running: set[threading.Event] = set()  # one stop flag per running job
        self.shown: list[Piece] = []  # the variations the page shows side by side
        self.made = 0
        self.history: list[str] = []  # ids of the pieces an extend or rewrite started from
        self.kept = False  # kept for its browser across reloads (`keep.Kept`)
        self.used = time.monotonic()  # when a page last used it (`keep.Kept` expires it)

    def __deepcopy__(self, memo) -> Session:
        return Session(self.root, self.budget_mb)

    def dir(self) -> Path:
        if self.folder is None:
            base = (self.root or Path.cwd()) / SESSIONS
            base.mkdir(parents=True, exist_ok=True, mode=0o700)
            folder = base / secrets.token_urlsafe(24)
            folder.mkdir(mode=0o700)
            self.folder = folder
        return self.folder

    def start_job(self, flag: threading.Event | None = None) -> threading.Event:
        """A stop flag for a new job (a Stop pressed earlier does not stop this one); `flag`:
        the page's own (set when Gradio cancels the job)."""
        flag = threading.Event() if flag is None else flag
        self.running.add(flag)
        return flag

    def end_job(self, flag: threading.Event) -> None:
        self.running.discard(flag)

    def stop(self) -> int:
        """Set the stop flag of every running job of this page; returns how many."""
        for flag in list(self.running):
            flag.set()
        return len(self.running)

    def next_stem(self, kind: str) -> str:
        self.made += 1
        return f"{kind}_{self.made:03d}"

    def add(self, piece: Piece) -> Piece:
        """Keep `piece`; the oldest pieces go (files deleted) past the count or disk budget."""
        self.used = time.monotonic()
        self.pieces.append(piece)
        while len(self.pieces) > MAX_SESSION_PIECES or (
            len(self.pieces) > 1 and self.bytes() > self.budget_mb * 1e6
        ):
            old = self.pieces.pop(0)
            for p in (old.midi, old.png, old.audio):
                if p is not None:
                    p.unlink(missing_ok=True)
            self.shown = [p for p in self.shown if p is not old]
        return piece

    def bytes(self) -> int:
        return 0 if self.folder is None else folder_bytes(self.folder)

    def find(self, label: str | None) -> Piece | None:
        return next((p for p in self.pieces if p.label == label), None)

    def by_id(self, piece_id: str) -> Piece | None:
        return next((p for p in self.pieces if p.id == piece_id), None)

    def close(self) -> None:
        """Stop its jobs and delete its files (the page was closed or its session expired)."""
        self.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None  # a page still holding it writes to a new folder
        self.pieces.clear()
        self.shown.clear()
        self.history.clear()


def check_disk(session: Session, server_mb: float = SERVER_MB) -> None:
    """Refuse a job while the studio's folder (every page's files and uploads) is over its
    budget: pages that close or expire free it."""
    if session.root is None:
        return
    used = folder_bytes(session.root)
    if used > server_mb * 1e6:
        raise MusicgenError(
            f"studio: the server's disk budget ({server_mb:g} MB) is full "
            f"({used / 1e6:.0f} MB in use); try again later"
        )
