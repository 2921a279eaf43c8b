"""Groove tokenizer, the note side: reading a score, quantising a track to 12 ticks per beat,
resolving overlaps of one pitch, recognising bass tracks (used by `groove.py` and the trio data).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.limits import check_score
from musicgen.tokenizers.groove_grammar import TICKS_PER_BEAT

NoteArray = np.ndarray  # int64 (n, 3): onset, offset, pitch in 12-tick units


def _where(src: str | Path | symusic.Score) -> str:
    return "score" if isinstance(src, symusic.Score) else str(src)


def load_score(src: str | Path | symusic.Score) -> symusic.Score:
    """A tick-time score, or MusicgenError naming the file (missing, empty, corrupt)."""
    if isinstance(src, symusic.Score) or hasattr(src, "tracks"):
        score = src
        if "Tick" not in str(getattr(score, "ttype", "Tick")):
            score = score.to("tick")
        return score
    path = Path(src)
    if not path.is_file():
        raise MusicgenError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise MusicgenError(f"{path}: empty file (not a MIDI file)")
    try:
        score = symusic.Score(str(path))
    except (RuntimeError, ValueError, IndexError, OSError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MusicgenError(f"{path}: cannot read MIDI (corrupt or not MIDI: {msg})") from None
    check_score(score, str(path))  # before time shifts are emitted per bar
    return score


def _quantise(track: Any, tpq: int) -> NoteArray:
    """(onset, offset, pitch) at 12 ticks per beat; every note lasts at least one tick."""
    a = track.notes.numpy()
    t = a["time"].astype(np.float64) * TICKS_PER_BEAT / tpq
    e = (a["time"].astype(np.float64) + a["duration"]) * TICKS_PER_BEAT / tpq
    on = np.floor(t + 0.5).astype(np.int64)
    off = np.maximum(np.floor(e + 0.5).astype(np.int64), on + 1)
    return np.stack([on, off, a["pitch"].astype(np.int64) & 127], axis=1)


def resolve_overlaps(notes: NoteArray) -> NoteArray:
    """One pitch sounds at most once: same-onset duplicates keep the longest, and a note is cut
    where the next note of its pitch starts. Sorted by (pitch, onset)."""
    if len(notes) == 0:
        return notes.reshape(0, 3)
    on, off, pitch = notes[:, 0], notes[:, 1], notes[:, 2]
    order = np.lexsort((-off, on, pitch))
    n = notes[order]
    first = np.ones(len(n), dtype=bool)
    first[1:] = (n[1:, 2] != n[:-1, 2]) | (n[1:, 0] != n[:-1, 0])
    n = n[first].copy()
    same_next = np.zeros(len(n), dtype=bool)
    same_next[:-1] = n[1:, 2] == n[:-1, 2]
    nxt = np.roll(n[:, 0], -1)
    n[:, 1] = np.where(same_next, np.minimum(n[:, 1], nxt), n[:, 1])
    return n


_BASS_NAME = re.compile(r"bass(?!oon)", re.IGNORECASE)  # "Bass", "E.Bass", not "Bassoon"


def is_bass(track: Any) -> bool:
    return not track.is_drum and (32 <= track.program <= 39 or bool(_BASS_NAME.search(track.name)))
