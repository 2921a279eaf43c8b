"""`musicgen prepare`: a folder of MIDI files -> the prepared layout of docs/CONTRACTS.md.

Tokenizer-agnostic: any registered tokenizer (or YAML) works. Songs are tokenized in worker
processes and cached one file per song (`OUT/cache/<key>.npy`, key = content hash + tokenizer
fingerprint), so a rerun reuses unchanged songs and an interrupted run picks up where it stopped.
Bad files are skipped with a reason (`skipped.csv`), never fatal: unreadable or too long ones
(musicgen.limits, checked on the parsed score before tokenizing), byte-identical copies of an
earlier file (removed before the split, so a song cannot sit in train and validation), and a file
whose worker process died (killed by the OOM killer, say): the run goes on with a new worker.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import multiprocessing as mp
import os
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path

import numpy as np
from tqdm import tqdm

from musicgen.errors import MusicgenError, check_range
from musicgen.io import atomic_path, atomic_write_text, ensure_dir
from musicgen.limits import Limits, check_score, check_tokens
from musicgen.tokenizers import REGISTRY, Tokenizer, build_tokenizer, load_tokenizer

DATASETS = ("pop909", "maestro", "groove", "folder")
SPLITS = ("train", "validation", "test")
SPLIT_FOLDERS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}
VALIDATION_PER_MILLE = 50  # ~5 % of songs held out when the data has no official split
MIDI_SUFFIXES = (".mid", ".midi")


# Maestro is performance MIDI: the pop REMI's grid and tempo bins drift off it
# (docs/tokenization.md, "Expressive piano"), so it gets the expressive REMI; others the pop REMI.
DEFAULT_TOKENIZERS = {"groove": "groove", "maestro": "remi_expressive.yaml"}


def default_tokenizer(dataset: str) -> str:
    """The tokenizer `prepare` uses for `dataset` unless `--tokenizer` names one."""
    name = DEFAULT_TOKENIZERS.get(dataset, "remi.yaml")
    if name in REGISTRY:
        return name
    from musicgen.resources import shipped_dir

    config = shipped_dir("configs") / "tokenizer" / name
    if config.is_file():
        return str(config)
    if name != "remi.yaml":
        raise MusicgenError(f"{config}: the default tokenizer of --dataset {dataset} is missing")
    return "remi"


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
    limits: Limits = field(default_factory=Limits)
    chords: str = ""  # POP909: the song's chord_midi.txt (its chords replace detected ones)


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
    try:
        chord_text = Path(job.chords).read_bytes() if job.chords else b""
    except OSError as exc:
        return Result(job.rel, f"cannot read {job.chords} ({exc.strerror or type(exc).__name__})")
    key = hashlib.sha1(data + b"\0" + chord_text).hexdigest() if job.chords else digest
    cache = Path(job.cache_dir) / f"{job.fingerprint}-{key}.npy"
    if cache.is_file():
        try:
            arr = np.load(cache)
            return _accepted(job, tok, arr, digest, cache, True)
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
        check_score(score, "score", job.limits)  # before the tokenizer allocates per bar
        ids = _encode(tok, score, job.chords, chord_text)
    except MusicgenError as exc:
        return Result(job.rel, str(exc).removeprefix("score: "))
    except MemoryError:
        return Result(job.rel, "out of memory while tokenizing")
    except Exception as exc:  # a tokenizer bug on odd input must not end the batch
        return Result(job.rel, f"cannot tokenize ({type(exc).__name__}: {exc})"[:200])
    arr = np.asarray(ids, dtype=np.uint16)
    _save_npy(cache, arr)
    return _accepted(job, tok, arr, digest, cache, False)


def _accepted(
    job: Job, tok: Tokenizer, arr: np.ndarray, digest: str, cache: Path, reused: bool
) -> Result:
    """The Result of a tokenized song, or its skip reason if it breaks the token/bar limits
    (checked on cache hits too: the limits may have changed since the cache was written)."""
    bars = len(tok.bar_starts(arr))
    try:
        check_tokens(len(arr), "score", job.limits)
        if bars > job.limits.max_bars:
            raise MusicgenError(
                f"score: too long ({bars} bars > the limit of {job.limits.max_bars})"
            )
    except MusicgenError as exc:
        return Result(job.rel, str(exc).removeprefix("score: "))
    return Result(job.rel, "", digest, len(arr), bars, str(cache), reused)


def _encode(tok: Tokenizer, score, chord_path: str, chord_text: bytes) -> list[int]:
    """Ids of one song; a REMI tokenizer takes its chords from the annotation when there is one."""
    from musicgen.tokenizers.chords import parse_chord_text
    from musicgen.tokenizers.remi import RemiTokenizer

    if not chord_path or not isinstance(tok, RemiTokenizer):
        return tok.encode(score)
    try:
        text = chord_text.decode("utf-8")
    except UnicodeDecodeError:
        raise MusicgenError(f"{chord_path}: not a UTF-8 text file") from None
    return tok.encode(score, chords=parse_chord_text(text, chord_path))


def chord_file(path: Path, dataset: str) -> str:
    """POP909's chord annotation next to a song, if there is one."""
    from musicgen.tokenizers.chords import CHORD_FILE

    found = path.parent / CHORD_FILE
    return str(found) if dataset == "pop909" and found.is_file() else ""


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
        results = _run_pool(jobs, tok, workers, bar.update)
    bar.close()
    return results


def _worker_loop(conn, tok_dict: dict) -> None:
    """A worker process: one job in, one Result out, until it receives None. A MusicgenError
    (the cache cannot be written: the disk is full) goes to the parent, which stops the run."""
    _init_worker(tok_dict)
    while (job := conn.recv()) is not None:
        try:
            conn.send(process_song(job))
        except MusicgenError as exc:
            conn.send(exc)


def _died(job: Job, exitcode: int | None) -> Result:
    how = (
        f"killed by signal {-exitcode}"
        if exitcode is not None and exitcode < 0
        else f"exit code {exitcode}"
    )
    return Result(job.rel, f"the worker process died on this file ({how}; out of memory?)")


def _run_pool(jobs: list[Job], tok: Tokenizer, workers: int, done) -> list[Result]:
    """Run `jobs` on `workers` processes, one job per worker at a time, so that when a worker
    dies (OOM killer, segfault) the parent knows which file it held: that file is skipped with
    the reason, a fresh worker replaces it, and the run goes on (a Pool would wait forever)."""
    ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
    tok_dict = tok.to_dict()

    def spawn():
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_loop, args=(child, tok_dict), daemon=True)
        proc.start()
        child.close()
        return parent, proc

    todo, results = list(reversed(jobs)), []
    idle = [spawn() for _ in range(min(workers, len(jobs)))]
    busy: dict = {}  # connection -> (process, job)
    try:
        while todo or busy:
            while idle and todo:
                conn, proc = idle.pop()
                job = todo.pop()
                try:
                    conn.send(job)
                except OSError:  # that worker died after its last answer: replace it, retry
                    _reap(conn, proc)
                    idle.append(spawn())
                    todo.append(job)
                    continue
                busy[conn] = (proc, job)
            ready = set(wait([*busy, *(p.sentinel for p, _ in busy.values())]))
            for conn, (proc, job) in list(busy.items()):
                if conn not in ready and proc.sentinel not in ready:
                    continue
                del busy[conn]
                try:
                    res = conn.recv()
                except (EOFError, OSError):  # the worker died before answering
                    _reap(conn, proc)
                    results.append(_died(job, proc.exitcode))
                    idle.append(spawn())
                else:
                    idle.append((conn, proc))
                    if isinstance(res, MusicgenError):
                        raise res
                    results.append(res)
                done()
    finally:
        for conn, proc in idle + [(c, p) for c, (p, _) in busy.items()]:
            try:
                conn.send(None)
            except OSError:
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
    return results


def _reap(conn, proc) -> None:
    conn.close()
    proc.join()


def drop_duplicates(results: list[Result]) -> list[Result]:
    """Mark byte-identical copies (same content hash) of an earlier file as skipped, before
    any split is assigned: the first path in sorted order is kept."""
    first: dict[str, str] = {}
    for r in results:
        if r.reason:
            continue
        if r.hash in first:
            r.reason = f"duplicate of {first[r.hash]} (identical bytes)"
        else:
            first[r.hash] = r.rel
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
    limits: Limits | None = None,
) -> dict:
    """Tokenize every MIDI file under `input_dir` into `output_dir`; returns the summary counts."""
    limits = limits or Limits()
    _check_options(dataset, workers, max_size_mb, limits)
    root = Path(input_dir)
    if not root.is_dir():
        raise MusicgenError(f"{root}: input folder not found")
    files = find_midi(root, dataset)
    if not files:
        raise MusicgenError(f"{root}: no MIDI files (*.mid, *.midi) found")
    tok = _tokenizer(tokenizer, dataset)
    out = Path(output_dir)
    cache_dir = ensure_dir(out / "cache")
    tok.save(out / "tokenizer.json")
    fp = fingerprint(tok)
    max_bytes = int(max_size_mb * 2**20)
    jobs = [
        Job(
            str(p),
            p.relative_to(root).as_posix(),
            str(cache_dir),
            fp,
            max_bytes,
            limits,
            chord_file(p, dataset),
        )
        for p in files
    ]
    results = sorted(_run_jobs(jobs, tok, int(workers)), key=lambda r: r.rel)
    drop_duplicates(results)
    good = [r for r in results if not r.reason]
    bad = [r for r in results if r.reason]
    sizes = _write_outputs(out, good, bad, dataset, official_splits(root, dataset))
    if not good:
        raise MusicgenError(
            f"{root}: none of the {len(files)} MIDI files could be tokenized "
            f"(reasons in {out / 'skipped.csv'})"
        )
    return {
        "songs": len(good),
        "skipped": len(bad),
        "reused": sum(r.reused for r in good),
        "duplicates": sum(r.reason.startswith("duplicate of ") for r in bad),
        "tokens": sum(r.tokens for r in good),
        **sizes,
    }


def _check_options(dataset: str, workers: int, max_size_mb: float, limits: Limits) -> None:
    """Every option's range, before any file is read."""
    check_range("--workers", workers, 1)
    check_range("--max-size-mb", max_size_mb, 0, low_open=True)
    check_range("--max-bars", limits.max_bars, 1)
    check_range("--max-minutes", limits.max_minutes, 0, low_open=True)
    check_range("--max-tokens", limits.max_tokens, 3)
    if dataset not in DATASETS:
        raise MusicgenError(
            f"--dataset: unknown dataset '{dataset}'; choose one of: {', '.join(DATASETS)}"
        )


def _tokenizer(tokenizer: str | Path | None, dataset: str) -> Tokenizer:
    """The tokenizer by registry name or YAML file (the dataset's default when None)."""
    spec = str(tokenizer or default_tokenizer(dataset))
    if spec not in REGISTRY and Path(spec).suffix.lower() not in (".yaml", ".yml"):
        raise MusicgenError(
            f"--tokenizer: unknown tokenizer '{spec}'; choose one of: "
            f"{', '.join(REGISTRY)} or a YAML file"
        )
    tok = build_tokenizer(spec)
    if tok.vocab_size > 65536:
        raise MusicgenError(f"tokenizer: {tok.vocab_size} tokens do not fit the uint16 layout")
    return tok


def _write_outputs(
    out: Path, good: list[Result], bad: list[Result], dataset: str, official: dict
) -> dict[str, int]:
    """The split arrays, manifest.jsonl and skipped.csv (each atomically); songs per split."""
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
    return {s: len(per_split[s]) for s in SPLITS}
