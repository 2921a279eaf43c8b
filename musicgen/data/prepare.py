"""`musicgen prepare`: a folder of MIDI files -> the prepared layout of docs/CONTRACTS.md.

Tokenizer-agnostic: any registered tokenizer (or YAML) works. Songs are tokenized in worker
processes and cached one file per song (`OUT/cache/<key>.npy`, key = content hash + tokenizer
fingerprint), so a rerun reuses unchanged songs and an interrupted run picks up where it stopped.
Bad files are skipped with a reason (`skipped.csv`), never fatal: unreadable or too long ones
(musicgen.limits, checked on the parsed score before tokenizing), byte-identical copies of an
earlier file (removed before the split, so a song cannot sit in train and validation), and a file
whose worker process died (killed by the OOM killer, say): the run goes on with a new worker.
Outputs are written all or nothing (`data/layout.py`); the input side (finding files, reading
only regular files, splits) is `data/sources.py`, the worker processes `data/pool.py`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from musicgen.config import MAX_WORKERS
from musicgen.data import layout
from musicgen.data.pool import run_pool, terminate_raises
from musicgen.data.pop909_structure import check_structure, song_folder, structure_bytes
from musicgen.data.sources import (  # noqa: F401  (re-exported: the names other modules use)
    DATASETS,
    MIDI_SUFFIXES,
    SPLITS,
    Unreadable,
    assign_split,
    chord_file,
    find_midi,
    hash_split,
    official_splits,
    read_regular,
)
from musicgen.errors import MusicgenError, check_range
from musicgen.io import FolderLock, atomic_write_text, ensure_dir
from musicgen.limits import MAX_CHORD_FILE_BYTES, Limits, check_score, check_tokens
from musicgen.tokenizers import REGISTRY, Tokenizer, build_tokenizer, load_tokenizer
from musicgen.tokenizers.form import form_text

CHORD_MAX_BYTES = MAX_CHORD_FILE_BYTES  # a POP909 chord_midi.txt is a few KB


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
    structure: str = ""  # POP909: the song's pop909_structure folder (phrases, melody)


@dataclass
class Result:
    rel: str
    reason: str = ""  # non-empty: skipped
    hash: str = ""
    tokens: int = 0
    bars: int = 0
    cache: str = ""
    reused: bool = False
    form: str = ""  # the phrases written as section tokens (`i4A8...`), "" for none


def _save_npy(path: Path, arr: np.ndarray) -> None:
    layout.save_npy(path, arr)


def process_song(job: Job, tok: Tokenizer | None = None) -> Result:
    """Tokenize one file (or reuse its cache); every problem becomes a skip reason."""
    tok = tok or _WORKER_TOKENIZER
    assert tok is not None
    try:
        data = read_regular(job.path, job.max_bytes)
    except Unreadable as exc:
        return Result(job.rel, str(exc))
    try:
        chord_text = read_regular(job.chords, CHORD_MAX_BYTES) if job.chords else b""
    except Unreadable as exc:
        return Result(job.rel, f"{job.chords}: {exc}")
    if not data:
        return Result(job.rel, "empty file")
    digest = hashlib.sha1(data).hexdigest()
    extra = chord_text + b"\0" + structure_bytes(job.structure)
    key = hashlib.sha1(data + b"\0" + extra).hexdigest() if extra != b"\0" else digest
    cache = Path(job.cache_dir) / f"{job.fingerprint}-{key}.npy"
    if cache.is_file():
        try:
            arr = np.load(cache, allow_pickle=False)
            if arr.dtype == np.uint16 and arr.ndim == 1:
                return _accepted(job, tok, arr, digest, cache, True)
        except (OSError, ValueError, EOFError):
            pass  # a damaged cache entry is simply recomputed
    ids = _tokenize(job, tok, data, chord_text)
    if isinstance(ids, Result):
        return ids
    arr = np.asarray(ids, dtype=np.uint16)
    _save_npy(cache, arr)
    return _accepted(job, tok, arr, digest, cache, False)


def _tokenize(job: Job, tok: Tokenizer, data: bytes, chord_text: bytes) -> list[int] | Result:
    """The ids of the MIDI bytes `data`, or the Result that says why they have none."""
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
        return _encode(tok, score, job.chords, chord_text, job.structure)
    except MusicgenError as exc:
        return Result(job.rel, str(exc).removeprefix("score: "))
    except MemoryError:
        return Result(job.rel, "out of memory while tokenizing")
    except Exception as exc:  # a tokenizer bug on odd input must not end the batch
        return Result(job.rel, f"cannot tokenize ({type(exc).__name__}: {exc})"[:200])


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
    form = form_text(tok.sections(arr))
    return Result(job.rel, "", digest, len(arr), bars, str(cache), reused, form)


def _encode(
    tok: Tokenizer, score, chord_path: str, chord_text: bytes, structure: str = ""
) -> list[int]:
    """Ids of one song; a REMI tokenizer takes its chords from the annotation when there is
    one, and, with section tokens, its phrases from the structure folder (the score delayed
    onto the annotation's bars, the chords with it)."""
    from musicgen.tokenizers.chords import ChordSpan, parse_chord_text
    from musicgen.tokenizers.remi import RemiTokenizer

    if not isinstance(tok, RemiTokenizer):
        return tok.encode(score)
    chords = None
    if chord_path:
        try:
            chords = parse_chord_text(chord_text.decode("utf-8"), chord_path)
        except UnicodeDecodeError:
            raise MusicgenError(f"{chord_path}: not a UTF-8 text file") from None
    sections = None
    if structure and tok.options["sections"]:
        from musicgen.data.pop909_structure import align_song, delay_seconds

        song = align_song(score, structure)
        if song.delay and chords:
            dt = delay_seconds(score, song.delay)
            chords = [ChordSpan(c.start + dt, c.end + dt, c.label) for c in chords]
        score, sections = song.score, song.sections
    return tok.encode(score, chords=chords, sections=sections)


# ---------------------------------------------------------------------------------------------
# the whole run


def fingerprint(tok: Tokenizer) -> str:
    return hashlib.sha1(json.dumps(tok.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


def _died(job: Job, reason: str) -> Result:
    return Result(job.rel, reason)


def _work(job: Job) -> Result:
    return process_song(job)  # looked up at call time: tests replace process_song


def _run_jobs(jobs: list[Job], tok: Tokenizer, workers: int) -> list[Result]:
    bar = tqdm(total=len(jobs), desc="tokenizing", unit="song", disable=None)
    try:
        if workers <= 1:
            results = []
            for job in jobs:
                results.append(process_song(job, tok))
                bar.update()
        else:
            results = run_pool(jobs, workers, _init_worker, tok.to_dict(), _work, _died, bar.update)
    finally:
        bar.close()
    return results


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


def prepare(
    dataset: str,
    input_dir: str | Path,
    output_dir: str | Path,
    tokenizer: str | Path | None = None,
    workers: int = 1,
    max_size_mb: float = 10.0,
    limits: Limits | None = None,
    structure: str | Path | None = None,
) -> dict:
    """Tokenize every MIDI file under `input_dir` into `output_dir`; returns the summary counts.
    `structure`: POP909's pop909_structure folder (a subfolder per song, named as the song's
    folder), read by tokenizers with section tokens. SIGTERM raises `errors.Terminated`
    meanwhile (workers ended, nothing half-written)."""
    limits = limits or Limits()
    _check_options(dataset, workers, max_size_mb, limits)
    root = Path(input_dir)
    if not root.is_dir():
        raise MusicgenError(f"{root}: input folder not found")
    files = find_midi(root, dataset)
    if not files:
        raise MusicgenError(f"{root}: no MIDI files (*.mid, *.midi) found")
    tok = _tokenizer(tokenizer, dataset)
    if structure is not None:
        check_structure(tok, Path(structure), files)
    out = Path(output_dir)
    jobs = _jobs(files, root, out, tok, int(max_size_mb * 2**20), limits, dataset, structure)
    with FolderLock(out, "prepare"), terminate_raises():
        results = sorted(_run_jobs(jobs, tok, int(workers)), key=lambda r: r.rel)
        drop_duplicates(results)
        good = [r for r in results if not r.reason]
        bad = [r for r in results if r.reason]
        sizes = _write_outputs(out, tok, good, bad, dataset, official_splits(root, dataset))
    if not good:
        raise MusicgenError(
            f"{root}: none of the {len(files)} MIDI files could be tokenized "
            f"(reasons in {out / 'skipped.csv'}; the rest of {out} is left as it was)"
        )
    return {
        "songs": len(good),
        "skipped": len(bad),
        "reused": sum(r.reused for r in good),
        "duplicates": sum(r.reason.startswith("duplicate of ") for r in bad),
        "tokens": sum(r.tokens for r in good),
        "with_phrases": sum(bool(r.form) for r in good),
        **sizes,
    }


def _jobs(files, root: Path, out: Path, tok, max_bytes: int, limits, dataset, structure):
    """One Job per MIDI file: where it is, its cache, its chord and structure annotations."""
    cache_dir, fp = ensure_dir(out / "cache"), fingerprint(tok)
    return [
        Job(
            str(p),
            p.relative_to(root).as_posix(),
            str(cache_dir),
            fp,
            max_bytes,
            limits,
            chord_file(p, dataset),
            song_folder(structure, p),
        )
        for p in files
    ]


def _check_options(dataset: str, workers: int, max_size_mb: float, limits: Limits) -> None:
    """Every option's range, before any file is read."""
    for name, value in (("max_size_mb", max_size_mb), ("max_minutes", limits.max_minutes)):
        if not math.isfinite(value):
            raise MusicgenError(f"{name}: must be a finite number, got {value}")
    check_range("workers", workers, 1, MAX_WORKERS)
    check_range("max_size_mb", max_size_mb, 0, low_open=True)
    check_range("max_bars", limits.max_bars, 1)
    check_range("max_minutes", limits.max_minutes, 0, low_open=True)
    check_range("max_song_tokens", limits.max_tokens, 3)  # Limits.max_tokens: a song's length
    if dataset not in DATASETS:
        raise MusicgenError(
            f"dataset: unknown dataset '{dataset}'; choose one of: {', '.join(DATASETS)}"
        )


def _tokenizer(tokenizer: str | Path | None, dataset: str) -> Tokenizer:
    """The tokenizer by registry name or YAML file (the dataset's default when None)."""
    spec = str(tokenizer or default_tokenizer(dataset))
    if spec not in REGISTRY and Path(spec).suffix.lower() not in (".yaml", ".yml"):
        raise MusicgenError(
            f"tokenizer: unknown tokenizer '{spec}'; choose one of: "
            f"{', '.join(REGISTRY)} or a YAML file"
        )
    tok = build_tokenizer(spec)
    if tok.vocab_size > 65536:
        raise MusicgenError(f"tokenizer: {tok.vocab_size} tokens do not fit the uint16 layout")
    return tok


def _write_outputs(
    out: Path, tok: Tokenizer, good: list[Result], bad: list[Result], dataset: str, official: dict
) -> dict[str, int]:
    """tokenizer.json, the split arrays, manifest.jsonl and skipped.csv, staged, read back and
    moved into `out` all together (`layout.publish`); songs per split. With no good song only
    skipped.csv is replaced."""
    stage = layout.new_staging(out)
    per_split: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    manifest = []
    for r in good:
        split = assign_split(r.rel, dataset, official)
        per_split[split].append(np.load(r.cache, allow_pickle=False))
        entry = {"path": r.rel, "hash": r.hash, "tokens": r.tokens, "bars": r.bars}
        manifest.append({**entry, "split": split, **({"form": r.form} if r.form else {})})
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["path", "reason"])
    writer.writerows([r.rel, r.reason] for r in bad)
    atomic_write_text(stage / "skipped.csv", buf.getvalue())
    if not good:
        layout.publish_report(stage, out, "skipped.csv")
        return {s: 0 for s in SPLITS}
    tok.save(stage / "tokenizer.json")
    for split in SPLITS:
        layout.write_split(stage, split, per_split[split])
        layout.load_arrays(stage, split)  # read back before anything is replaced
    lines = "".join(json.dumps(m) + "\n" for m in manifest)
    atomic_write_text(stage / "manifest.jsonl", lines)
    files = ["tokenizer.json", "manifest.jsonl", "skipped.csv"]
    files += [f"{s}/{name}" for s in SPLITS for name in ("tokens.npy", "offsets.npy")]
    layout.publish(stage, out, files)
    return {s: len(per_split[s]) for s in SPLITS}
