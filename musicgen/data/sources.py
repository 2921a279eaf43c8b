"""Input side of `musicgen prepare`: finding MIDI files, reading them safely, assigning splits.

Only regular files are read: a FIFO named `x.mid` would block `open` forever and a link to
/dev/zero would read without end, so the file type is checked on the opened descriptor (opened
non-blocking) and at most `max_bytes + 1` bytes are read.
"""

from __future__ import annotations

import csv
import hashlib
import os
import stat
from pathlib import Path

from musicgen.errors import MusicgenError

DATASETS = ("pop909", "maestro", "groove", "folder")
SPLITS = ("train", "validation", "test")
SPLIT_FOLDERS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}
VALIDATION_PER_MILLE = 50  # ~5 % of songs held out when the data has no official split
MIDI_SUFFIXES = (".mid", ".midi")

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class Unreadable(Exception):
    """Why a file was not read (becomes its skip reason)."""


def read_regular(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of the regular file `path` (links followed), or `Unreadable` with the reason:
    a folder, a special file (FIFO, device, socket), over `max_bytes`, or an OSError."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise Unreadable("is a directory, not a MIDI file") from None
    except OSError as exc:
        raise Unreadable(f"cannot read file ({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Unreadable("is a directory, not a MIDI file")
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise Unreadable(f"{kind}, not a regular file: only regular files are read")
        if st.st_size > max_bytes:
            raise Unreadable(_too_big(st.st_size, max_bytes))
        chunks, total = [], 0
        while total <= max_bytes and (chunk := os.read(fd, min(1 << 20, max_bytes + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise Unreadable(f"cannot read file ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    if total > max_bytes:  # the file grew while it was read
        raise Unreadable(_too_big(total, max_bytes))
    return b"".join(chunks)


def _too_big(size: int, max_bytes: int) -> str:
    return f"over the size limit ({size / 2**20:.1f} MB > {max_bytes / 2**20:g} MB)"


def find_midi(root: Path, dataset: str) -> list[Path]:
    """Every *.mid / *.midi (any case) below `root`, sorted; POP909's versions/ folders ignored."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        if dataset == "pop909":
            dirnames[:] = [d for d in dirnames if d.lower() != "versions"]
        for name in filenames + [d for d in dirnames if d.lower().endswith(MIDI_SUFFIXES)]:
            if name.lower().endswith(MIDI_SUFFIXES):
                found.append(Path(dirpath) / name)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def hash_split(rel: str) -> str:
    """Stable split from the relative path alone, so adding files never moves other songs."""
    h = int(hashlib.sha1(rel.encode()).hexdigest()[:8], 16)
    return "validation" if h % 1000 < VALIDATION_PER_MILLE else "train"


def official_splits(root: Path, dataset: str) -> dict[str, str]:
    """relative path -> split from Maestro's maestro-v*.csv or Groove's info.csv, if present."""
    names = {"maestro": ["maestro-v*.csv"], "groove": ["info.csv"]}.get(dataset, [])
    for pattern in names:
        for index in sorted(root.rglob(pattern)):
            if not index.is_file():
                continue
            out = _read_split_list(index, index.parent.relative_to(root).as_posix())
            if out:
                return out
    return {}


def _read_split_list(index: Path, prefix: str) -> dict[str, str]:
    """relative path -> split from one index CSV (columns `split`, `midi_filename`)."""
    out: dict[str, str] = {}
    try:
        with open(index, newline="", errors="replace") as fh:
            for row in csv.DictReader(fh):
                split = SPLIT_FOLDERS.get(str(row.get("split") or "").strip().lower())
                name = str(row.get("midi_filename") or "").strip()
                if split and name:
                    out[name if prefix == "." else f"{prefix}/{name}"] = split
    except (csv.Error, OSError) as exc:
        raise MusicgenError(f"{index}: not a readable split list ({exc})") from None
    return out


def assign_split(rel: str, dataset: str, official: dict[str, str]) -> str:
    if rel in official:
        return official[rel]
    if dataset in ("groove", "folder", "maestro"):
        top = rel.split("/", 1)[0].lower()
        if "/" in rel and top in SPLIT_FOLDERS:
            return SPLIT_FOLDERS[top]
    return hash_split(rel)


def chord_file(path: Path, dataset: str) -> str:
    """POP909's chord annotation next to a song, if there is one."""
    from musicgen.tokenizers.chords import CHORD_FILE

    found = path.parent / CHORD_FILE
    return str(found) if dataset == "pop909" and found.is_file() else ""
