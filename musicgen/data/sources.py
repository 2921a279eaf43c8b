"""Input side of `musicgen prepare`: finding MIDI files, reading them safely, assigning splits.

Only regular files are read: a FIFO named `x.mid` would block `open` forever and a link to
/dev/zero would read without end, so the file type is checked on the opened descriptor (opened
non-blocking) and at most `max_bytes + 1` bytes are read (`musicgen.io.read_regular`).
"""

from __future__ import annotations

import csv
import hashlib
import os
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.io import Unreadable, read_regular  # noqa: F401 (prepare's import)

DATASETS = ("pop909", "maestro", "groove", "folder")
SPLITS = ("train", "validation", "test")
SPLIT_FOLDERS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}
VALIDATION_PER_MILLE = 50  # ~5 % of songs held out when the data has no official split
# POP909's test split: of the songs not in validation, those whose sha256 falls under this per
# mille (49 of the 850 songs). Never used to choose anything (docs/evaluation.md, "Splits").
TEST_PER_MILLE = 50
MIDI_SUFFIXES = (".mid", ".midi")


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


def hash_split(rel: str, test: bool = False) -> str:
    """Stable split from the relative path alone, so adding files never moves other songs.

    Validation is SHA-1 under VALIDATION_PER_MILLE, as the shipped models were trained, so their
    validation songs stay theirs; with `test` (POP909) a song outside validation whose SHA-256
    falls under TEST_PER_MILLE is a test song (the shipped models trained on those)."""
    h = int(hashlib.sha1(rel.encode()).hexdigest()[:8], 16)
    if h % 1000 < VALIDATION_PER_MILLE:
        return "validation"
    if test and int(hashlib.sha256(rel.encode()).hexdigest()[:8], 16) % 1000 < TEST_PER_MILLE:
        return "test"
    return "train"


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
    """A song's split: the official list, a top folder named for a split (not POP909), else
    the stable hash (POP909 with its test split)."""
    if rel in official:
        return official[rel]
    if dataset in ("groove", "folder", "maestro"):
        top = rel.split("/", 1)[0].lower()
        if "/" in rel and top in SPLIT_FOLDERS:
            return SPLIT_FOLDERS[top]
    return hash_split(rel, test=dataset == "pop909")


def chord_file(path: Path, dataset: str) -> str:
    """POP909's chord annotation next to a song, if there is one."""
    from musicgen.tokenizers.chords import CHORD_FILE

    found = path.parent / CHORD_FILE
    return str(found) if dataset == "pop909" and found.is_file() else ""
