"""`musicgen prepare`: a folder of MIDI files -> the prepared layout of docs/CONTRACTS.md.

Tokenizer-agnostic: any registered tokenizer (or YAML) works. Songs are tokenized in worker
processes and cached one file per song (`OUT/cache/<key>.npy`, key = content hash + tokenizer
fingerprint), so a rerun reuses unchanged songs and an interrupted run picks up where it stopped.
Bad files are skipped with a reason (`skipped.csv`), never fatal.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import multiprocessing as mp
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.io import atomic_path, atomic_write_text
from musicgen.tokenizers import REGISTRY, Tokenizer, build_tokenizer, load_tokenizer

DATASETS = ("pop909", "maestro", "groove", "folder")
SPLITS = ("train", "validation", "test")
SPLIT_FOLDERS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}
VALIDATION_PER_MILLE = 50  # ~5 % of songs held out when the data has no official split
MIDI_SUFFIXES = (".mid", ".midi")


def default_tokenizer(dataset: str) -> str:
    if dataset == "groove":
        return "groove"
    from musicgen.resources import shipped_dir

    config = shipped_dir("configs") / "tokenizer" / "remi.yaml"
    return str(config) if config.is_file() else "remi"


# ---------------------------------------------------------------------------------------------
# finding files and assigning splits


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
            out: dict[str, str] = {}
            prefix = index.parent.relative_to(root).as_posix()
            with open(index, newline="") as fh:
                for row in csv.DictReader(fh):
                    split = SPLIT_FOLDERS.get((row.get("split") or "").strip().lower())
                    name = (row.get("midi_filename") or "").strip()
                    if split and name:
                        rel = name if prefix == "." else f"{prefix}/{name}"
                        out[rel] = split
            if out:
                return out
    return {}


def assign_split(rel: str, dataset: str, official: dict[str, str]) -> str:
    if rel in official:
        return official[rel]
    if dataset in ("groove", "folder", "maestro"):
        top = rel.split("/", 1)[0].lower()
        if "/" in rel and top in SPLIT_FOLDERS:
            return SPLIT_FOLDERS[top]
    return hash_split(rel)


# ---------------------------------------------------------------------------------------------
# one song, in a worker process

_WORKER_TOKENIZER: Tokenizer | None = None


def _init_worker(tok_dict: dict) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = load_tokenizer(tok_dict)


@dataclass
class Job:
    path: str  # absolute
    rel: str  # relative to the input root (what the manifest records)
    cache_dir: str
    fingerprint: str
    max_bytes: int


@dataclass
class Result:
    rel: str
    reason: str = ""  # non-empty: skipped
    hash: str = ""
    tokens: int = 0
    bars: int = 0
    cache: str = ""
    reused: bool = False


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, arr)


def process_song(job: Job, tok: Tokenizer | None = None) -> Result:
    """Tokenize one file (or reuse its cache); every problem becomes a skip reason."""
    tok = tok or _WORKER_TOKENIZER
    assert tok is not None
    path = Path(job.path)
    try:
        if path.is_dir():
            return Result(job.rel, "is a directory, not a MIDI file")
        size = path.stat().st_size
        if size > job.max_bytes:
            return Result(
                job.rel,
                f"over the size limit ({size / 2**20:.1f} MB > {job.max_bytes / 2**20:g} MB)",
            )
        data = path.read_bytes()
    except OSError as exc:
        return Result(job.rel, f"cannot read file ({exc.strerror or type(exc).__name__})")
    if not data:
        return Result(job.rel, "empty file")
    digest = hashlib.sha1(data).hexdigest()
    cache = Path(job.cache_dir) / f"{job.fingerprint}-{digest}.npy"
    if cache.is_file():
        try:
            arr = np.load(cache)
            return Result(job.rel, "", digest, len(arr), len(tok.bar_starts(arr)), str(cache), True)
        except (OSError, ValueError):
            pass  # a damaged cache entry is simply recomputed
    if not data.startswith(b"MThd"):
        return Result(job.rel, "not a MIDI file (no MThd header)")
    import symusic

    try:
        score = symusic.Score.from_midi(data)
    except Exception as exc:  # symusic raises several types for corrupt bytes
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Result(job.rel, f"corrupt MIDI ({msg})")
    try:
        ids = tok.encode(score)
    except MusicgenError as exc:
        return Result(job.rel, str(exc).removeprefix("score: "))
    arr = np.asarray(ids, dtype=np.uint16)
    _save_npy(cache, arr)
    return Result(job.rel, "", digest, len(arr), len(tok.bar_starts(arr)), str(cache))


# ---------------------------------------------------------------------------------------------
# the whole run


def fingerprint(tok: Tokenizer) -> str:
    return hashlib.sha1(json.dumps(tok.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


def _run_jobs(jobs: list[Job], tok: Tokenizer, workers: int) -> list[Result]:
    bar = tqdm(total=len(jobs), desc="tokenizing", unit="song", disable=None)
    results = []
    if workers <= 1:
        for job in jobs:
            results.append(process_song(job, tok))
            bar.update()
    else:
        ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
        with ctx.Pool(workers, initializer=_init_worker, initargs=(tok.to_dict(),)) as pool:
            for res in pool.imap_unordered(process_song, jobs, chunksize=4):
                results.append(res)
                bar.update()
    bar.close()
    return results


def _write_split(out: Path, split: str, arrays: list[np.ndarray]) -> None:
    lengths = np.array([len(a) for a in arrays], dtype=np.int64)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.concatenate(arrays).astype(np.uint16) if arrays else np.zeros(0, dtype=np.uint16)
    _save_npy(out / split / "tokens.npy", flat)
    _save_npy(out / split / "offsets.npy", offsets)


def prepare(
    dataset: str,
    input_dir: str | Path,
    output_dir: str | Path,
    tokenizer: str | Path | None = None,
    workers: int = 1,
    max_size_mb: float = 10.0,
) -> dict:
    """Tokenize every MIDI file under `input_dir` into `output_dir`; returns the summary counts."""
    if dataset not in DATASETS:
        raise MusicgenError(
            f"--dataset: unknown dataset '{dataset}'; choose one of: {', '.join(DATASETS)}"
        )
    root = Path(input_dir)
    if not root.is_dir():
        raise MusicgenError(f"{root}: input folder not found")
    files = find_midi(root, dataset)
    if not files:
        raise MusicgenError(f"{root}: no MIDI files (*.mid, *.midi) found")
    spec = str(tokenizer or default_tokenizer(dataset))
    if spec not in REGISTRY and Path(spec).suffix.lower() not in (".yaml", ".yml"):
        raise MusicgenError(
            f"--tokenizer: unknown tokenizer '{spec}'; choose one of: "
            f"{', '.join(REGISTRY)} or a YAML file"
        )
    tok = build_tokenizer(spec)
    if tok.vocab_size > 65536:
        raise MusicgenError(f"tokenizer: {tok.vocab_size} tokens do not fit the uint16 layout")
    out = Path(output_dir)
    cache_dir = out / "cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    tok.save(out / "tokenizer.json")
    fp = fingerprint(tok)
    official = official_splits(root, dataset)
    max_bytes = int(max_size_mb * 2**20)
    jobs = [
        Job(str(p), p.relative_to(root).as_posix(), str(cache_dir), fp, max_bytes) for p in files
    ]
    results = sorted(_run_jobs(jobs, tok, max(1, int(workers))), key=lambda r: r.rel)

    good = [r for r in results if not r.reason]
    bad = [r for r in results if r.reason]
    per_split: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    manifest = []
    for r in good:
        split = assign_split(r.rel, dataset, official)
        per_split[split].append(np.load(r.cache))
        manifest.append(
            {"path": r.rel, "hash": r.hash, "tokens": r.tokens, "bars": r.bars, "split": split}
        )
    for split in SPLITS:
        _write_split(out, split, per_split[split])
    atomic_write_text(out / "manifest.jsonl", "".join(json.dumps(m) + "\n" for m in manifest))
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["path", "reason"])
    writer.writerows([r.rel, r.reason] for r in bad)
    atomic_write_text(out / "skipped.csv", buf.getvalue())
    summary = {
        "songs": len(good),
        "skipped": len(bad),
        "reused": sum(r.reused for r in good),
        "tokens": sum(r.tokens for r in good),
        **{s: len(per_split[s]) for s in SPLITS},
    }
    if not good:
        raise MusicgenError(
            f"{root}: none of the {len(files)} MIDI files could be tokenized "
            f"(reasons in {out / 'skipped.csv'})"
        )
    return summary
