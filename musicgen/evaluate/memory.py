"""`musicgen evaluate memory`: does a model remember a passage of a song it has heard?

For a gap of G bars, a song's passage Q of P bars (default 8: the bars P + G after the song's
first bar with music) is scored twice, each time after the same G bars (those that precede Q in
the song):

- **alone**: the song as it is, from its first bar with music through Q: Q at its own place,
  after the P + G bars that precede it (the control; one causal pass covers every gap);
- **return**: the same with the first P bars replaced by Q itself, so Q was heard G bars before.

The ratio NLL(Q on its return) / NLL(Q alone), per song and gap, is about 1 for a model that
remembers nothing and far below 1 for one that copies; the same tokens are scored in both, so
the ratio of the sums is that of the means. `vs_first`, the return over Q's first time (at the
start of the probe), is the ratio a first version of this probe reported: below 1 even without
memory, since the opening bars of any sequence are the least predictable. Songs are read as
`prepare` read the training songs (the chord annotation beside them; with `--structure`,
phrases as tokens for a model that has them) and scored through `Model.nll`, the path of
`Model.score`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from musicgen.errors import MusicgenError, check_range
from musicgen.evaluate.common import write_json
from musicgen.measures.form import paired_difference

PASSAGE_BARS = 8
GAPS = (0, 16, 32)
PHRASE_BARS = (4, 8)  # --phrases: the lengths of phrase a probe takes as its passage
Scorer = Callable[[np.ndarray], np.ndarray]  # ids [N] -> NLL of ids[1:], [N - 1]


@dataclass(frozen=True)
class Probes:
    """One song's sequences: per gap, the control, the probe and where Q lies (index ranges
    of tokens: Q's first time and its return in the probe, Q alone in the control); gaps may
    share one control array (scored once)."""

    controls: dict[int, np.ndarray]
    probes: dict[int, np.ndarray]
    first: dict[int, tuple[int, int]]
    back: dict[int, tuple[int, int]]
    alone: dict[int, tuple[int, int]]
    bars: dict[int, int]  # Q's bars per gap


def make_probes(ids: np.ndarray, starts: np.ndarray, first: int, bars: int, gaps: Sequence[int]):
    """The probes of a song's ids without EOS (`starts`: each bar's first index; `first`: its
    first bar with music) for the gaps it is long enough for: 2 * bars + gap bars from `first`.
    None when it is too short for every gap."""
    fits = [g for g in gaps if first + 2 * bars + g <= len(starts)]
    if not fits:
        return None
    ends = np.append(starts[1:], len(ids))

    def span(a: int, b: int) -> np.ndarray:  # bars a..b-1
        return ids[starts[a] : ends[b - 1]] if b > a else ids[:0]

    head = ids[: starts[0]]
    control = np.concatenate([head, span(first, first + 2 * bars + max(fits))])
    probes, first_at, back, alone = {}, {}, {}, {}
    for g in fits:
        q = first + bars + g
        passage = span(q, q + bars)
        probes[g] = np.concatenate([head, passage, span(first + bars, q), passage])
        n, m = len(head), len(passage)
        first_at[g], back[g] = (n, n + m), (len(probes[g]) - m, len(probes[g]))
        alone[g] = (starts[q] - starts[first] + n, ends[q + bars - 1] - starts[first] + n)
    return Probes({g: control for g in fits}, probes, first_at, back, alone,
                  {g: bars for g in fits})  # fmt: skip


def make_phrase_probes(ids: np.ndarray, starts: np.ndarray, first: int, sections, gaps):
    """`make_probes` with Q a whole phrase, its phrase tokens included: per gap, the first
    phrase of PHRASE_BARS bars that starts at least its bars + the gap after `first`; the
    return is Q, the G bars that precede Q in the song, Q again (a section that comes back).
    None when no phrase fits any gap."""
    ends = np.append(starts[1:], len(ids))

    def span(a: int, b: int) -> np.ndarray:  # bars a..b-1
        return ids[starts[a] : ends[b - 1]] if b > a else ids[:0]

    head = ids[: starts[0]]
    n = len(head)
    out: dict[str, dict] = {k: {} for k in ("controls", "probes", "first", "back", "alone", "bars")}
    for g in gaps:
        fit = [s for s in sections if PHRASE_BARS[0] <= s.bars <= PHRASE_BARS[1]
               and s.bar >= first + s.bars + g and s.bar + s.bars <= len(starts)]  # fmt: skip
        if not fit:
            continue
        q, p = fit[0].bar, fit[0].bars
        passage = span(q, q + p)
        probe = np.concatenate([head, passage, span(q - g, q), passage])
        m = len(passage)
        out["controls"][g] = np.concatenate([head, span(first, q + p)])
        out["probes"][g], out["bars"][g] = probe, p
        out["first"][g], out["back"][g] = (n, n + m), (len(probe) - m, len(probe))
        out["alone"][g] = (starts[q] - starts[first] + n, ends[q + p - 1] - starts[first] + n)
    return Probes(**out) if out["probes"] else None


def span_nll(nll: np.ndarray, where: tuple[int, int]) -> float:
    """Summed NLL of tokens where[0]..where[1]-1 (`nll[p]` is the NLL of token p + 1)."""
    return float(nll[max(where[0] - 1, 0) : where[1] - 1].sum())


def probe_song(score: Scorer, p: Probes) -> dict[int, dict[str, float]]:
    """Per gap: the summed NLL of Q alone, on its return and its first time, and the ratios."""
    scored: dict[int, np.ndarray] = {}  # id of a control array -> its NLL
    out = {}
    for g, seq in p.probes.items():
        control = p.controls[g]
        if id(control) not in scored:
            scored[id(control)] = score(control)
        nll = score(seq)
        alone, back, first = (
            span_nll(scored[id(control)], p.alone[g]),
            span_nll(nll, p.back[g]),
            span_nll(nll, p.first[g]),
        )
        tokens = p.back[g][1] - p.back[g][0]
        out[g] = {
            "tokens": tokens,
            "bars": p.bars[g],
            "nll_alone": alone / tokens,
            "nll_return": back / tokens,
            "nll_first": first / tokens,
            "ratio": back / alone,
            "vs_first": back / first,
        }
    return out


def read_song(tokenizer, path: Path, structure: str | Path | None) -> np.ndarray:
    """A POP909 song's ids without EOS, read as `prepare` read the training songs: its
    chord_midi.txt as its chords and, with `structure` and a tokenizer with sections, its
    phrases as tokens (a song that does not align has none, as in training)."""
    from musicgen.data.pop909_structure import song_folder
    from musicgen.data.prepare import CHORD_MAX_BYTES, _encode
    from musicgen.data.sources import chord_file
    from musicgen.io import Unreadable, read_regular

    chords = chord_file(path, "pop909")
    try:
        text = read_regular(Path(chords), CHORD_MAX_BYTES) if chords else b""
    except Unreadable as exc:
        raise MusicgenError(f"{chords}: {exc}") from None
    ids = _encode(tokenizer, tokenizer.load_score(path), chords, text, song_folder(structure, path))
    arr = np.asarray(ids, dtype=np.int64)
    return arr[:-1] if len(arr) and arr[-1] == tokenizer.eos_id else arr


def song_probes(
    tokenizer, ids: np.ndarray, bars: int, gaps: Sequence[int], where: str, phrases: bool = False
):
    """`make_probes` (with `phrases`: `make_phrase_probes`) of a song's ids, from its first
    bar with music (the prompt rule's)."""
    from musicgen.generation.api.prompt import music_start

    first, _pickup = music_start(tokenizer, ids.tolist(), where)
    if phrases:
        sections = tokenizer.sections(ids)
        return make_phrase_probes(ids, tokenizer.bar_starts(ids), first, sections, gaps)
    return make_probes(ids, tokenizer.bar_starts(ids), first, bars, gaps)


def mean_ci(values: Sequence[float], seed: int = 0) -> dict[str, float]:
    """Mean over songs with its percentile bootstrap 95 % CI (10,000 resamples, seeded)."""
    d = paired_difference(values, [0.0] * len(values), seed=seed)
    return {"mean": d["mean"], "low": d["low"], "high": d["high"], "n": d["n"]}


def summarize(per_song: dict[str, dict], gaps: Sequence[int]) -> dict[str, dict]:
    """Per gap: songs used, songs read but too short for it, the ratios' means with CIs, and
    the mean NLLs per token."""
    out = {}
    for g in gaps:
        rows = [r[g] for r in per_song.values() if g in r]
        out[str(g)] = {
            "songs": len(rows),
            "too_short": len(per_song) - len(rows),
            "ratio": mean_ci([r["ratio"] for r in rows]),
            "vs_first": mean_ci([r["vs_first"] for r in rows]),
            **{k: float(np.mean([r[k] for r in rows])) if rows else float("nan")
               for k in ("nll_alone", "nll_return", "nll_first")},
        }  # fmt: skip
    return out


def probe_songs(
    score_for: Callable[[int], Scorer],
    tokenizer,
    songs: Sequence[Path],
    structure,
    bars: int,
    gaps: Sequence[int],
    phrases: bool = False,
) -> tuple[dict[str, dict], list[dict]]:
    """Every song read, with its probes per gap (none for a song too short for every gap;
    `score_for(k)`: the scorer of song k), and the songs that could not be read, with why."""
    per_song, skipped = {}, []
    for k, path in enumerate(tqdm(songs, desc="memory", unit="song", disable=None)):
        try:
            ids = read_song(tokenizer, path, structure)
            probes = song_probes(tokenizer, ids, bars, gaps, str(path), phrases)
        except MusicgenError as exc:
            skipped.append({"song": path.stem, "reason": str(exc)})
            continue
        per_song[path.stem] = {} if probes is None else probe_song(score_for(k), probes)
    return per_song, skipped


def model_scorer(model, seed: int, song: int) -> Scorer:
    """`Model.nll` with torch seeded alike before every sequence of a song, so that an SPE
    model scores a song's probes and its control under one noise draw."""
    from musicgen.measures.likelihood import noise_seed

    def score(ids: np.ndarray) -> np.ndarray:
        torch.manual_seed(noise_seed(seed, 0, song))
        return model.nll(ids)

    return score


def check_options(bars: int, gaps: Sequence[int], max_songs: int | None) -> list[int]:
    """The gaps sorted and unique; a bad number is a one-line error naming its option."""
    check_range("--passage-bars", bars, 1, 64)
    check_range("--max-songs", max_songs, 1)
    if not gaps:
        raise MusicgenError("--gaps: give at least one gap in bars")
    for g in gaps:
        check_range("--gaps", g, 0, 256)
    return sorted(set(int(g) for g in gaps))


def evaluate_memory(
    checkpoint: str | Path,
    data: str | Path,
    out: str | Path,
    split: str = "validation",
    structure: str | Path | None = None,
    max_songs: int | None = None,
    bars: int = PASSAGE_BARS,
    gaps: Sequence[int] = GAPS,
    seed: int = 0,
    device: str = "auto",
    phrases: bool = False,
) -> dict:
    """The memory probe of one checkpoint on the POP909 songs of `split` in `data`; writes
    OUT/memory.json (atomic) and returns what it holds. `phrases`: the passage is a whole
    phrase (`make_phrase_probes`; needs `structure` and a model with phrase tokens)."""
    from musicgen.evaluate.form import benchmark_songs
    from musicgen.generation.api import load

    gaps = check_options(bars, gaps, max_songs)
    if phrases and structure is None:
        raise MusicgenError("--phrases: needs --structure (the songs' phrases come from it)")
    if structure is not None and not Path(structure).is_dir():
        raise MusicgenError(f"{structure}: structure folder not found")
    songs = benchmark_songs(data, split)[:max_songs]
    model = load(checkpoint, device=device)
    if phrases and not _has_sections(model.tokenizer):
        raise MusicgenError(f"--phrases: {checkpoint} has no phrase tokens (the passage is one)")
    per_song, skipped = probe_songs(
        lambda k: model_scorer(model, seed, k),
        model.tokenizer,
        songs,
        structure,
        bars,
        gaps,
        phrases,
    )
    result = {
        "checkpoint": str(checkpoint), "data": str(data), "split": split,
        "structure": None if structure is None else str(structure),
        "phrases": bool(structure) and _has_sections(model.tokenizer),
        "passage_bars": "a phrase" if phrases else bars, "passage": "phrase" if phrases else "bars",
        "gaps": gaps, "seed": seed, "songs_asked": len(songs),
        "gap_summary": summarize(per_song, gaps), "per_song": per_song, "skipped": skipped,
    }  # fmt: skip
    write_json(Path(out) / "memory.json", result)
    return result


def _has_sections(tokenizer) -> bool:
    options = getattr(tokenizer, "options", None)
    return isinstance(options, dict) and bool(options.get("sections"))


def table(result: dict) -> str:
    """The console table: one row per gap."""
    lines = ["gap  songs  too short  return / alone [95 % CI]  return / first  NLL alone  return"]
    for g, s in result["gap_summary"].items():
        r, f = s["ratio"], s["vs_first"]
        lines.append(
            f"{int(g):>3}  {s['songs']:>5}  {s['too_short']:>9}  "
            f"{r['mean']:.3f} [{r['low']:.3f}, {r['high']:.3f}]  "
            f"{f['mean']:>14.3f}  {s['nll_alone']:>9.3f}  {s['nll_return']:.3f}"
        )
    return "\n".join(lines)
