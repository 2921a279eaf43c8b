"""The prepared layout on disk, written all or nothing and checked when read.

`prepare` builds every output in a staging folder (`OUT/.staging`), reads it back, then moves the
files into place: it first marks `OUT/prepared.json` incomplete, renames each file, and last
writes `prepared.json` complete with the SHA-1 of every file. An interrupted run therefore leaves
either the previous dataset untouched (killed while tokenizing, the long part) or a folder that
readers refuse (killed during the renames); never a new tokenizer.json beside old tokens.

Readers (`check_split`) verify the stamp's digests of tokenizer.json and the split's arrays, and
the arrays themselves: 1-D uint16 tokens, int64 offsets from 0, non-decreasing, ending at the
number of tokens. A folder without prepared.json (written by hand, or by a musicgen before the
stamp existed) is read with the array checks alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.io import atomic_path, atomic_write_text, ensure_dir

STAMP = "prepared.json"
STAMP_FORMAT = "musicgen-prepared/1"
STAGING = ".staging"
RERUN = "rerun musicgen prepare (unchanged songs come from its cache)"


def save_npy(path: Path, arr: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, arr)


def write_split(folder: Path, split: str, arrays: list[np.ndarray]) -> None:
    """`folder/split/tokens.npy` (flat uint16) and `offsets.npy` (int64, n_songs + 1)."""
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.concatenate(arrays).astype(np.uint16) if arrays else np.zeros(0, dtype=np.uint16)
    save_npy(folder / split / "tokens.npy", flat)
    save_npy(folder / split / "offsets.npy", offsets)


def digest(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def new_staging(out: Path) -> Path:
    """An empty staging folder inside `out` (one a killed run left is removed first)."""
    stage = out / STAGING
    if stage.is_symlink() or stage.is_file():
        stage.unlink()
    shutil.rmtree(stage, ignore_errors=True)
    return ensure_dir(stage)


def publish(stage: Path, out: Path, files: list[str]) -> None:
    """Move the staged `files` (paths relative to both folders) into `out`, then stamp it.

    The stamp is marked incomplete before the first rename and written complete after the last,
    so a reader never takes a half-moved folder for a dataset."""
    sums = {rel: digest(stage / rel) for rel in files}
    atomic_write_text(out / STAMP, json.dumps({"format": STAMP_FORMAT, "complete": False}))
    try:
        for rel in files:
            ensure_dir((out / rel).parent)
            _move(stage / rel, out / rel)
    except OSError as exc:
        raise MusicgenError(f"{out}: cannot move the new dataset into place ({exc})") from None
    stamp = {"format": STAMP_FORMAT, "complete": True, "files": sums}
    atomic_write_text(out / STAMP, json.dumps(stamp, indent=1) + "\n")
    shutil.rmtree(stage, ignore_errors=True)


def _move(src: Path, dst: Path) -> None:
    os.replace(src, dst)


def publish_report(stage: Path, out: Path, rel: str) -> None:
    """Move one staged report (skipped.csv) into `out` alone; the dataset there stays as it was."""
    try:
        os.replace(stage / rel, out / rel)
    except OSError as exc:
        raise MusicgenError(f"{out / rel}: cannot write ({exc.strerror or exc})") from None
    shutil.rmtree(stage, ignore_errors=True)


def read_stamp(folder: Path) -> dict | None:
    """The stamp's digests (None for a folder without one); an incomplete or damaged stamp is
    an error."""
    path = folder / STAMP
    if not path.exists():
        return None
    try:
        stamp = json.loads(path.read_bytes())
    except (OSError, ValueError):
        raise MusicgenError(f"{path}: damaged (not JSON); {RERUN}") from None
    if not isinstance(stamp, dict) or stamp.get("format") != STAMP_FORMAT:
        raise MusicgenError(f"{path}: not a musicgen prepare stamp; {RERUN}")
    if stamp.get("complete") is not True or not isinstance(stamp.get("files"), dict):
        raise MusicgenError(
            f"{folder}: an interrupted musicgen prepare left it incomplete; {RERUN}"
        )
    return stamp["files"]


def check_files(folder: Path, rels: list[str]) -> None:
    """Each of `rels` has the digest the stamp recorded (skipped for an unstamped folder)."""
    sums = read_stamp(folder)
    if sums is None:
        return
    for rel in rels:
        want = sums.get(rel)
        if want is None or digest(folder / rel) != want:
            raise MusicgenError(
                f"{folder / rel}: does not match {folder / STAMP} (left by another prepare "
                f"run?); {RERUN}"
            )


def load_arrays(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The split's tokens (memory-mapped, (T,) uint16) and offsets ((n + 1,) int64), checked."""
    tokens_path, offsets_path = folder / split / "tokens.npy", folder / split / "offsets.npy"
    try:
        tokens = np.load(tokens_path, mmap_mode="r", allow_pickle=False)
        offsets = np.load(offsets_path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MusicgenError(f"{folder / split}: damaged token arrays ({reason})") from None
    if tokens.dtype != np.uint16 or tokens.ndim != 1:
        raise MusicgenError(
            f"{tokens_path}: must be a 1-D uint16 array, got {tokens.ndim}-D {tokens.dtype}"
        )
    if offsets.dtype != np.int64 or offsets.ndim != 1 or len(offsets) == 0:
        raise MusicgenError(
            f"{offsets_path}: must be a non-empty 1-D int64 array, got "
            f"{offsets.ndim}-D {offsets.dtype} of {offsets.size}"
        )
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != len(tokens):
        raise MusicgenError(
            f"{offsets_path}: offsets must rise from 0 to the {len(tokens)} tokens of "
            "tokens.npy, never decreasing"
        )
    return tokens, offsets


POP909_SONG = re.compile(r"^\d{3}/\d{3}\.midi?$")  # POP909's layout, NNN/NNN.mid


def check_no_test_songs(path: str | Path) -> None:
    """Refuse a dataset whose train split holds POP909 test songs: one prepared before POP909
    had a test split (docs/evaluation.md, "Splits") would train on the songs the test figures
    are reported on."""
    from musicgen.data.sources import hash_split

    leaked = [
        entry["path"]
        for entry in _manifest(Path(path))
        if entry.get("split") == "train"
        and POP909_SONG.match(entry.get("path", ""))
        and hash_split(entry["path"], test=True) == "test"
    ]
    if leaked:
        raise MusicgenError(
            f"{path}: prepared before POP909 had a test split: {len(leaked)} test songs "
            f"(e.g. {leaked[0]}) are in train; {RERUN}"
        )


def _manifest(path: Path) -> list[dict]:
    """The entries of `path/manifest.jsonl` (none without the file)."""
    manifest = path / "manifest.jsonl"
    if not manifest.is_file():
        return []
    return [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]


def manifest_forms(path: str | Path, split: str = "train") -> list[str]:
    """The forms (`i4A8B8o4`) of a prepared dataset's songs in `split`, as `prepare` wrote
    them in manifest.jsonl (songs with section tokens only)."""
    return [e["form"] for e in _manifest(Path(path)) if e.get("split") == split and e.get("form")]
