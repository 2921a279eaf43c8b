"""Nothing lost on a reload: a browser's pieces kept on the server under a key the browser holds
(a `gr.BrowserState`, in its localStorage), so that a reloaded or reopened page gets its
session back, pieces, files, numbering and undo history included.

Undo (`push_undo`, `undo`): each extend or rewrite of a piece of the page pushes that piece's
id on the session's history; Undo pops it and shows that piece again. Nothing is deleted: the
newer piece stays in the page's list. An id whose piece has gone (the page's budget) is passed
over.

A page's own `gr.State` is deleted when the page closes; a kept session outlives it and is
closed (its files deleted) only once no page has used it for `SESSION_IDLE_S`. Its files stay
within the page's disk budget (`Session.add`) and count toward the server's (`check_disk`);
the key is unguessable, and a key the server does not know (another server, an expired one)
gets a fresh session.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

from musicgen.studio.inputs import SESSION_IDLE_S
from musicgen.studio.session import Piece, Session

MAX_UNDO = 40  # the history's length (as many as a page's pieces)


class Kept:
    """The sessions kept for the browsers that made them, by key."""

    def __init__(self, idle_s: float = SESSION_IDLE_S, clock: Callable[[], float] = time.monotonic):
        self.idle_s, self.clock = idle_s, clock
        self._by_key: dict[str, Session] = {}
        self._lock = threading.Lock()

    def restore(self, key, fresh: Session) -> tuple[str, Session]:
        """The session kept under the browser's `key`, or `fresh` kept under a new key (a key
        this server does not know, or none); sessions idle too long are closed first."""
        with self._lock:
            self._expire()
            session = self._by_key.get(key) if isinstance(key, str) else None
            if session is None:
                key, session = secrets.token_urlsafe(24), fresh
                self._by_key[key] = session
            session.kept = True
            session.used = self.clock()
        return key, session

    def sweep(self) -> None:
        """Close the sessions idle too long (also before each job: a full disk frees)."""
        with self._lock:
            self._expire()

    def _expire(self) -> None:
        now = self.clock()
        for key, session in list(self._by_key.items()):
            if now - session.used > self.idle_s and not session.running:
                del self._by_key[key]
                session.close()

    def __len__(self) -> int:
        return len(self._by_key)


def release(session: Session) -> None:
    """A page's state deleted (the page closed or expired): its files go unless the session is
    kept for its browser (`Kept` closes it once idle)."""
    if not getattr(session, "kept", False):
        session.close()


def push_undo(session: Session, path, made: list[Piece]) -> None:
    """`made` came from the file at `path`: where that is a piece of the page (not an upload)
    and something was made, its id goes on the undo history."""
    source = next((p for p in session.pieces if Path(p.midi) == Path(path)), None)
    if source is not None and made:
        session.history.append(source.id)
        del session.history[:-MAX_UNDO]


def undo(session: Session) -> Piece | None:
    """The piece before the last extend or rewrite (popped from the history), None when there
    is none left."""
    while session.history:
        piece = session.by_id(session.history.pop())
        if piece is not None:
            return piece
    return None
