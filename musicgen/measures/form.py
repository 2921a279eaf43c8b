"""Measures of form over plain note arrays: repeats, bar self-similarity by lag, the top voice,
key, groove; and the statistics that tell a change from noise (spread, paired bootstrap CIs).

A piece here is anything with `onset`, `duration`, `pitch` arrays (beats, beats, MIDI) and a
`pitched()` method (`measures.metrics.Notes`). Bars are `BAR_BEATS` beats from time 0 and
onsets are told apart on the sixteenth-note grid (the REMI resolution), as in
`measures.metrics`, which re-exports the repetition measures it always had
(`repeated_bar_rate`, `rhythm_repeat_rate`, `bar_self_similarity`). This module imports nothing
from `measures.metrics`, so both can share the grid without a cycle. The benchmark that uses
them is `musicgen.evaluate.form`.

Measures that a maintained library also computes (pitch-class entropy and scale consistency in
MusPy, groove and chroma similarity in smg-metrics) are checked against it in
`scripts/experiments/check_form_library.py`; docs/evaluation.md says why the library is not a
dependency.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BAR_BEATS = 4.0
ONSET_STEPS_PER_BEAT = 4  # the sixteenth-note grid
LAGS = (1, 2, 4, 8)  # bar lags of the self-similarity: the next bar, a half phrase, a phrase
NEAR_REPEAT = 0.75  # a bar sharing this share (Jaccard) of its (position, pitch) notes repeats
LINE_LEAP = 7  # semitones: a larger jump of the top voice is another voice, not the line
LINE_GAP = 1.0  # beats of silence that break the top voice's run
GROOVE_STEPS = 48  # positions per bar of the groove histogram (MuseMorphose's simGrv)
MAJOR = np.array([0, 2, 4, 5, 7, 9, 11])  # = its relative natural minor

Piece = Any  # musicgen.measures.metrics.Notes (duck-typed to keep this module below metrics)


def onset_steps(notes: Piece, steps_per_beat: int = ONSET_STEPS_PER_BEAT) -> np.ndarray:
    """Onset of every note on the grid (integer steps; halves round up, as symusic does)."""
    return np.floor(np.asarray(notes.onset) * steps_per_beat + 0.5).astype(np.int64)


def _steps_per_bar(bar_beats: float) -> int:
    return int(round(bar_beats * ONSET_STEPS_PER_BEAT))


def bar_keys(notes: Piece, bar_beats: float = BAR_BEATS) -> tuple[np.ndarray, np.ndarray, int]:
    """Bar index and (grid position in the bar, pitch) key of every note; and the bar count.

    Positions are on the sixteenth-note grid, so a repeat is exact at the REMI resolution; an
    onset rounding up past a bar line belongs to the next bar.
    """
    steps = onset_steps(notes)
    per_bar = _steps_per_bar(bar_beats)
    bar = steps // per_bar
    bars = int(bar.max()) + 1 if len(bar) else 0
    return bar, (steps - bar * per_bar) * 128 + np.asarray(notes.pitch), bars


def _repeat_rate(bar: np.ndarray, key: np.ndarray, bars: int) -> float:
    """Share of the bars with notes whose set of keys equals that of an earlier such bar."""
    seen: set[tuple[int, ...]] = set()
    repeats = filled = 0
    for b in range(bars):
        content = tuple(np.unique(key[bar == b]).tolist())
        if not content:
            continue
        filled += 1
        repeats += content in seen
        seen.add(content)
    return float(repeats / filled)


def repeated_bar_rate(notes: Piece, bar_beats: float = BAR_BEATS) -> float:
    """Fraction of non-empty bars whose notes (grid position in the bar, pitch) exactly repeat
    an earlier bar's. For unbarred performances (Maestro: one tempo) bars are fixed windows."""
    if len(notes) == 0:
        return float("nan")
    return _repeat_rate(*bar_keys(notes, bar_beats))


def rhythm_repeat_rate(notes: Piece, bar_beats: float = BAR_BEATS) -> float:
    """Fraction of non-empty bars whose onset positions (pitch ignored) repeat an earlier bar's:
    an accompaniment figure that comes back over another chord counts, a copied bar too."""
    if len(notes) == 0:
        return float("nan")
    bar, key, bars = bar_keys(notes, bar_beats)
    return _repeat_rate(bar, key // 128, bars)


def bar_histograms(notes: Piece, bars: int | None = None, bar_beats: float = BAR_BEATS):
    """[bars, positions x 12] counts of (grid position, pitch class) per bar; `bars` fixes the
    count (notes beyond it are left out), None: through the last onset's bar."""
    bar, key, found = bar_keys(notes, bar_beats)
    bars = found if bars is None else bars
    per_bar = _steps_per_bar(bar_beats)
    hist = np.zeros((bars, per_bar * 12), np.float64)
    inside = bar < bars
    pos, pc = key[inside] // 128, (key[inside] % 128) % 12
    np.add.at(hist, (bar[inside], pos * 12 + pc), 1.0)
    return hist


def _unit_rows(hist: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(hist, axis=1, keepdims=True)
    return np.divide(hist, norm, out=np.zeros_like(hist), where=norm > 0)


def bar_self_similarity(notes: Piece, bar_beats: float = BAR_BEATS) -> float:
    """Mean cosine similarity, over all pairs of non-empty bars, of their (pitch class, grid
    position) histograms: 1 for a piece looping one bar; NaN with fewer than two such bars."""
    if len(notes) == 0:
        return float("nan")
    hist = bar_histograms(notes, None, bar_beats)
    unit = _unit_rows(hist[hist.sum(axis=1) > 0])
    k = len(unit)
    if k < 2:
        return float("nan")
    sim = unit @ unit.T  # [filled bars, filled bars]
    return float((sim.sum() - np.trace(sim)) / (k * (k - 1)))


def lag_similarity(notes: Piece, lag: int, bars: int | None = None) -> float:
    """Mean cosine similarity of bar b and bar b - `lag` (both non-empty): how much a bar
    resembles the one a lag earlier (lag 4 or 8: the previous phrase). NaN without such pairs."""
    unit = _unit_rows(bar_histograms(notes, bars))
    filled = unit.sum(axis=1) > 0
    both = filled[lag:] & filled[:-lag] if lag < len(unit) else np.zeros(0, bool)
    if not both.any():
        return float("nan")
    return float((unit[lag:] * unit[:-lag]).sum(axis=1)[both].mean())


def _bar_sets(notes: Piece, bars: int | None) -> list[frozenset]:
    """The (position, pitch) keys of each bar (a fixed `bars` count, or through the last onset)."""
    bar, key, found = bar_keys(notes)
    bars = found if bars is None else bars
    return [frozenset(key[bar == b].tolist()) for b in range(bars)]


def lag_repeat_rate(notes: Piece, lag: int, bars: int | None = None) -> float:
    """Share of the non-empty bars b >= `lag` whose notes exactly equal bar b - `lag`'s."""
    sets = _bar_sets(notes, bars)
    pairs = [(a, b) for a, b in zip(sets[lag:], sets[:-lag], strict=False) if a]
    return float(np.mean([a == b for a, b in pairs])) if pairs else float("nan")


def near_repeat_rate(notes: Piece, bars: int | None = None, threshold: float = NEAR_REPEAT):
    """Share of non-empty bars sharing at least `threshold` of their (position, pitch) notes
    (Jaccard: common / either) with some earlier bar: a repeat with a note or two changed."""
    sets = [s for s in _bar_sets(notes, bars) if s]
    if not sets:
        return float("nan")
    hits = sum(
        any(len(s & e) / len(s | e) >= threshold for e in sets[:i]) for i, s in enumerate(sets)
    )
    return float(hits / len(sets))


# the top voice: the skyline of the pitched notes, a stand-in for the melody line


def top_voice(notes: Piece) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start step, end step, pitch) of the skyline notes, in time order.

    At each grid onset the highest note starting there joins the line unless the line's current
    note still sounds and is higher (then it lies under the line); a note that joins cuts the
    previous one short. On the sixteenth grid; a note lasts at least one step.
    """
    p = notes.pitched()
    start = onset_steps(p)
    stop = np.floor((np.asarray(p.onset) + np.asarray(p.duration)) * ONSET_STEPS_PER_BEAT + 0.5)
    end = np.maximum(stop.astype(np.int64), start + 1)
    order = np.lexsort((-p.pitch, start))  # by onset, highest first
    s_out: list[int] = []
    e_out: list[int] = []
    p_out: list[int] = []
    last_step = None
    for i in order:
        step = int(start[i])
        if step == last_step:
            continue  # a lower note of the same onset
        last_step = step
        if p_out and e_out[-1] > step and p_out[-1] > p.pitch[i]:
            continue  # under the line's sounding note
        if p_out:
            e_out[-1] = min(e_out[-1], step)
        s_out.append(step)
        e_out.append(int(end[i]))
        p_out.append(int(p.pitch[i]))
    return np.array(s_out, np.int64), np.array(e_out, np.int64), np.array(p_out, np.int64)


def _runs(start: np.ndarray, end: np.ndarray, pitch: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) indices of the top voice's unbroken runs: a silence over `LINE_GAP` beats
    or a leap over `LINE_LEAP` semitones starts a new one."""
    leaps = np.abs(np.diff(pitch))
    broken = (leaps > LINE_LEAP) | (start[1:] - end[:-1] > LINE_GAP * ONSET_STEPS_PER_BEAT)
    cuts = [0, *(np.flatnonzero(broken) + 1).tolist(), len(pitch)]
    return [(a, b - 1) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def top_voice_measures(notes: Piece, beats: float | None = None) -> dict[str, float]:
    """The top voice as a melody line, over `beats` beats (default: through the last note's
    end): `coverage` (share of beats in which it sounds), `line` (share of beats covered by
    unbroken runs (`_runs`) of at least a bar), `interval` (mean absolute step, semitones),
    `range` (semitones) and `run` (the longest unbroken run, beats)."""
    start, end, pitch = top_voice(notes)
    if len(pitch) == 0:
        nan = float("nan")
        return {"coverage": 0.0, "line": 0.0, "interval": nan, "range": nan, "run": 0.0}
    per_beat = ONSET_STEPS_PER_BEAT
    n_beats = int(np.ceil(end.max() / per_beat)) if beats is None else int(beats)
    sounding = np.zeros(n_beats * per_beat, bool)  # [grid steps]
    in_line = np.zeros(n_beats * per_beat, bool)
    runs = _runs(start, end, pitch)
    for a, b in runs:
        for s, e in zip(start[a : b + 1], end[a : b + 1], strict=True):
            sounding[s:e] = True
        if end[b] - start[a] >= BAR_BEATS * per_beat:
            for s, e in zip(start[a : b + 1], end[a : b + 1], strict=True):
                in_line[s:e] = True
    longest = max(int(end[b] - start[a]) for a, b in runs)
    leaps = np.abs(np.diff(pitch))

    def share(steps: np.ndarray) -> float:
        return float(steps.reshape(n_beats, per_beat).any(axis=1).mean()) if n_beats else 0.0

    return {
        "coverage": share(sounding),
        "line": share(in_line),
        "interval": float(leaps.mean()) if len(leaps) else float("nan"),
        "range": float(pitch.max() - pitch.min()),
        "run": longest / per_beat,
    }


# key


def scale_root(notes: Piece) -> int | None:
    """Root (0 = C) of the major scale (= its relative minor) holding most pitched notes;
    the lowest such root on a tie; None without pitched notes."""
    pitches = np.asarray(notes.pitched().pitch)
    if len(pitches) == 0:
        return None
    return int(np.argmax(scale_sizes(np.bincount(pitches % 12, minlength=12))))


def scale_sizes(counts: np.ndarray) -> np.ndarray:
    """int[12]: of pitch-class `counts` ([12]), how many lie in the major scale on each root."""
    return np.array([counts[(MAJOR + root) % 12].sum() for root in range(12)])


def in_scale_rate(notes: Piece, root: int | None) -> float:
    """Share of the pitched notes inside the major scale on `root` (NaN without notes/root)."""
    pitches = np.asarray(notes.pitched().pitch)
    if root is None or len(pitches) == 0:
        return float("nan")
    return float(np.isin(pitches % 12, (MAJOR + root) % 12).mean())


# groove and chroma similarity (MuseMorphose, Wu & Yang 2023; smg-metrics' simGrv / simChr)


def _bar_profiles(notes: Piece, bars: int, groove: bool, bar_beats: float = BAR_BEATS):
    """[bars, D] L2-normalised per-bar onset-position (48 steps) or pitch-class histograms;
    an empty bar is the uniform unit vector (as smg-metrics does)."""
    p = notes.pitched()
    onset = np.asarray(p.onset)
    bar = np.floor(onset / bar_beats).astype(np.int64)
    keep = (bar >= 0) & (bar < bars)
    dim = GROOVE_STEPS if groove else 12
    if groove:
        col = ((onset - bar * bar_beats) / bar_beats * GROOVE_STEPS).astype(np.int64)
        col = np.minimum(col, GROOVE_STEPS - 1)
    else:
        col = np.asarray(p.pitch) % 12
    hist = np.zeros((bars, dim), np.float64)
    np.add.at(hist, (bar[keep], col[keep]), 1.0)
    unit = _unit_rows(hist)
    unit[hist.sum(axis=1) == 0] = 1.0 / np.sqrt(dim)
    return unit


def bar_similarity(a: Piece, b: Piece, a_bars: int, b_bars: int, groove: bool = True) -> float:
    """For each bar of `a`, the best cosine similarity with any bar of `b`, averaged over `a`'s
    bars: groove (onset positions, 48 per bar) or chroma (pitch classes). 1: every bar of `a`
    has its rhythm somewhere in `b`."""
    if a_bars < 1 or b_bars < 1:
        return float("nan")
    sim = _bar_profiles(a, a_bars, groove) @ _bar_profiles(b, b_bars, groove).T
    return float(sim.max(axis=1).mean())


# statistics over songs: the spread, and paired differences with a bootstrap CI


def columns(rows, names) -> dict[str, list]:
    """Per-piece rows of measures as one list per measure in `names`, over the pieces."""
    return {m: [r[m] for r in rows] for m in names}


def spread(values) -> dict[str, float]:
    """Mean, sd (ddof 1), quartiles and count of the finite values (NaN where there are none)."""
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], np.float64)
    if len(arr) == 0:
        nan = float("nan")
        return {"mean": nan, "sd": nan, "q25": nan, "median": nan, "q75": nan, "n": 0}
    q25, med, q75 = np.quantile(arr, [0.25, 0.5, 0.75])
    sd = float(arr.std(ddof=1)) if len(arr) > 1 else float("nan")
    return {
        "mean": float(arr.mean()),
        "sd": sd,
        "q25": float(q25),
        "median": float(med),
        "q75": float(q75),
        "n": int(len(arr)),
    }


def paired_difference(a, b, resamples: int = 10000, seed: int = 0, level: float = 0.95):
    """Mean of the per-song differences a - b with a percentile bootstrap CI (songs resampled
    with replacement, `resamples` times, seeded). Pairs where either value is missing are
    dropped. `better` is not decided here: a CI that excludes 0 says the runs differ."""
    pairs = [
        (x, y)
        for x, y in zip(a, b, strict=True)
        if x is not None and y is not None and np.isfinite(x) and np.isfinite(y)
    ]
    if not pairs:
        nan = float("nan")
        return {"mean": nan, "low": nan, "high": nan, "n": 0, "differs": False}
    diff = np.array([x - y for x, y in pairs], np.float64)  # [n]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))  # [resamples, n]
    means = diff[idx].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return {
        "mean": float(diff.mean()),
        "low": float(low),
        "high": float(high),
        "n": int(len(diff)),
        "differs": bool(low > 0 or high < 0),
    }
