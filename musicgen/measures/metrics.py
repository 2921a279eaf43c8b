"""Music metrics over plain note arrays: style similarity and descriptive statistics.

Everything here works on `Notes` (onsets and durations in quarter-note beats, pitches, tracks), so
it is pure numpy, needs no model, and can be checked on hand-built pieces. Bars are a fixed number
of beats (4 by default): POP909 files carry meaningless 1/4 and 2/4 time signatures, and both
tokenizers write 4/4, so reading bar lengths from the files would make them disagree.

Style similarity follows Cífka et al. (Groove2Groove, TASLP 2020): a 2-D histogram per piece,
flattened, compared by cosine similarity. Descriptive statistics follow the usual symbolic-music
evaluation set (pitch-class entropy, scale consistency, polyphony, groove consistency, empty
bars), plus texture measures that a mean hides (notes per onset, stacked onsets, duplicate
notes, sparse bars).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.limits import check_score

# Onsets are told apart on a sixteenth-note grid (the REMI resolution), so a raw reference file
# and a decoded generation are compared at the same resolution: `measures.form` holds the grid.
from musicgen.measures.form import (  # noqa: F401  (re-exported: an import path callers use)
    BAR_BEATS,
    ONSET_STEPS_PER_BEAT,
    bar_self_similarity,
    onset_steps,
    repeated_bar_rate,
    rhythm_repeat_rate,
    scale_sizes,
)

STACK_NOTES = 8  # an onset with this many notes or more is a "stack" (real POP909: < 0.01 %)
SPARSE_BAR_NOTES = 2  # a bar with at most this many notes is "sparse"


@dataclass
class Notes:
    """One piece as parallel arrays (length n), sorted by onset then pitch.

    `track` indexes `track_keys`, which names each track by role ("drums" or "program:N") so that
    the tracks of two pieces decoded by the same tokenizer can be matched.
    """

    onset: np.ndarray  # float64 [n], beats
    duration: np.ndarray  # float64 [n], beats
    pitch: np.ndarray  # int64 [n]
    track: np.ndarray  # int64 [n]
    track_keys: list[str] = field(default_factory=list)
    is_drum: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.onset.shape[0])

    def select(self, mask: np.ndarray) -> Notes:
        return Notes(
            self.onset[mask],
            self.duration[mask],
            self.pitch[mask],
            self.track[mask],
            list(self.track_keys),
            list(self.is_drum),
        )

    def of_track(self, key: str) -> Notes:
        """Notes of the track named `key` (empty if the piece has none)."""
        idx = self.track_keys.index(key) if key in self.track_keys else -1
        return self.select(self.track == idx)

    def pitched(self) -> Notes:
        """Notes of the non-drum tracks (pitch statistics make no sense for drums)."""
        drum_idx = [i for i, d in enumerate(self.is_drum) if d]
        return self.select(~np.isin(self.track, drum_idx))

    def end(self) -> float:
        return float((self.onset + self.duration).max()) if len(self) else 0.0

    def first_bars(self, bars: int, bar_beats: float = BAR_BEATS) -> Notes:
        """The notes of `bars` bars from the bar of the first note, shifted to start at beat 0:
        a song's head as long as a generated piece, so that repetition compares like with like."""
        if not len(self):
            return self
        start = np.floor(self.onset.min() / bar_beats) * bar_beats
        kept = self.select((self.onset >= start) & (self.onset < start + bars * bar_beats))
        kept.onset = kept.onset - start
        return kept


def make_notes(
    onset,
    duration,
    pitch,
    track=None,
    track_keys: list[str] | None = None,
    is_drum: list[bool] | None = None,
) -> Notes:
    """Build `Notes` from plain sequences (tests and hand-built examples), sorted."""
    onset = np.asarray(onset, dtype=np.float64)
    duration = np.asarray(duration, dtype=np.float64)
    pitch = np.asarray(pitch, dtype=np.int64)
    track = np.zeros(len(onset), np.int64) if track is None else np.asarray(track, np.int64)
    n_tracks = int(track.max()) + 1 if len(track) else 1
    keys = track_keys or [f"program:{i}" for i in range(n_tracks)]
    drums = is_drum or [k == "drums" for k in keys]
    order = np.lexsort((pitch, onset))
    return Notes(onset[order], duration[order], pitch[order], track[order], keys, drums)


def notes_from_score(score: symusic.Score) -> Notes:
    """All notes of a score, time converted to quarter-note beats."""
    score = score.to("quarter")
    keys: list[str] = []
    drums: list[bool] = []
    parts = []
    bases = ["drums" if t.is_drum else f"program:{t.program}" for t in score.tracks]
    for i, track in enumerate(score.tracks):
        key = bases[i]
        if bases.count(key) > 1:  # e.g. POP909: MELODY, BRIDGE, PIANO all on program 0
            key = f"{key} ({track.name or i})"
        if key not in keys:
            keys.append(key)
            drums.append(bool(track.is_drum))
        arr = track.notes.numpy()
        if len(arr["time"]) == 0:
            continue
        idx = np.full(len(arr["time"]), keys.index(key), np.int64)
        parts.append((arr["time"], arr["duration"], arr["pitch"], idx))
    if not parts:
        return make_notes([], [], [], [], keys or ["program:0"], drums or [False])
    cat = [np.concatenate([p[i] for p in parts]) for i in range(4)]
    return make_notes(*cat, track_keys=keys, is_drum=drums)


def load_score(path: str | Path) -> symusic.Score:
    """A MIDI file, checked; unreadable files are a one-line `MusicgenError`."""
    path = Path(path)
    if not path.is_file():
        raise MusicgenError(f"{path}: MIDI file not found")
    try:
        score = symusic.Score(str(path))
    except Exception as exc:  # symusic raises RuntimeError/ValueError on corrupt input
        raise MusicgenError(f"{path}: not a readable MIDI file ({exc})") from None
    check_score(score, str(path))
    return score


def load_notes(path: str | Path) -> Notes:
    """Notes of a MIDI file (`load_score`)."""
    return notes_from_score(load_score(path))


# ---------------------------------------------------------------------------------------------
# style similarity (Cífka et al.)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two flattened histograms; 0 when either is empty (no style to share)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 0.0
    return float(a @ b / (na * nb))


def time_pitch_histogram(
    notes: Notes, max_beats: float = 4.0, time_bins: int = 24, max_interval: int = 20
) -> np.ndarray:
    """Counts of (onset difference, pitch interval) over ordered note pairs.

    A pair (i, j), i != j, counts when onset_j - onset_i is in [0, max_beats); intervals outside
    ±max_interval are left out. Shape [time_bins, 2 * max_interval + 1]. Transposition-invariant.
    """
    hist = np.zeros((time_bins, 2 * max_interval + 1), np.int64)
    on, pi = notes.onset, notes.pitch  # sorted by onset
    n = len(on)
    for k in range(1, n):
        dt = on[k:] - on[:-k]  # [n - k], >= 0 since sorted
        keep = dt < max_beats
        if not keep.any():
            break  # larger shifts are only further apart
        dp = pi[k:] - pi[:-k]
        _add_pairs(hist, dt[keep], dp[keep], max_beats, time_bins, max_interval)
        same = dt == 0  # simultaneous onsets: the reversed pair is also ordered
        _add_pairs(hist, dt[same], -dp[same], max_beats, time_bins, max_interval)
    return hist


def _add_pairs(hist, dt, dp, max_beats, time_bins, max_interval) -> None:
    ok = np.abs(dp) <= max_interval
    t = np.minimum((dt[ok] / max_beats * time_bins).astype(np.int64), time_bins - 1)
    np.add.at(hist, (t, dp[ok] + max_interval), 1)


def onset_duration_histogram(
    notes: Notes,
    bar_beats: float = BAR_BEATS,
    onset_bins: int = 24,
    max_duration: float = 2.0,
    duration_bins: int = 12,
) -> np.ndarray:
    """Counts of (onset position in the bar, duration); durations >= max are put in the last bin.

    Shape [onset_bins, duration_bins].
    """
    pos = np.mod(notes.onset, bar_beats)
    o = np.minimum((pos / bar_beats * onset_bins).astype(np.int64), onset_bins - 1)
    d = np.clip(
        (notes.duration / max_duration * duration_bins).astype(np.int64), 0, duration_bins - 1
    )
    hist = np.zeros((onset_bins, duration_bins), np.int64)
    np.add.at(hist, (o, d), 1)
    return hist


def style_similarity(a: Notes, b: Notes) -> dict[str, float]:
    """Both style similarities of two single-part pieces (or parts)."""
    return {
        "time_pitch": cosine(time_pitch_histogram(a), time_pitch_histogram(b)),
        "onset_duration": cosine(onset_duration_histogram(a), onset_duration_histogram(b)),
    }


def style_similarity_per_track(candidate: Notes, source: Notes) -> dict[str, dict[str, float]]:
    """Similarities per track role present in the source; a track the candidate lacks scores 0.

    Tracks only the candidate has are not scored (there is no reference style for them).
    """
    out = {}
    for key in source.track_keys:
        src = source.of_track(key)
        if len(src) == 0:
            continue
        out[key] = style_similarity(candidate.of_track(key), src)
    return out


# ---------------------------------------------------------------------------------------------
# descriptive statistics


def pitch_class_entropy(notes: Notes) -> float:
    """Entropy (bits) of the pitch-class histogram of the pitched notes; 0 for a single class."""
    pc = np.bincount(notes.pitched().pitch % 12, minlength=12).astype(np.float64)
    if pc.sum() == 0:
        return float("nan")
    p = pc[pc > 0] / pc.sum()
    return float(-(p * np.log2(p)).sum() + 0.0)


def scale_consistency(notes: Notes) -> float:
    """Largest fraction of pitched notes that fit one major (or its relative minor) scale."""
    pitches = notes.pitched().pitch
    if len(pitches) == 0:
        return float("nan")
    best = scale_sizes(np.bincount(pitches % 12, minlength=12)).max()
    return float(best / len(pitches))


def n_bars(notes: Notes, bar_beats: float = BAR_BEATS) -> int:
    """Bars from time 0 through the bar holding the last onset."""
    if len(notes) == 0:
        return 0
    return int(np.floor(notes.onset.max() / bar_beats)) + 1


def note_density(notes: Notes, bar_beats: float = BAR_BEATS) -> float:
    """Notes per bar."""
    bars = n_bars(notes, bar_beats)
    return float(len(notes) / bars) if bars else float("nan")


def polyphony(notes: Notes, steps_per_beat: int = 12) -> float:
    """Mean number of distinct pitched notes sounding, over the grid steps where any sounds."""
    p = notes.pitched()
    if len(p) == 0:
        return float("nan")
    start = np.round(p.onset * steps_per_beat).astype(np.int64)
    stop = np.maximum(np.round((p.onset + p.duration) * steps_per_beat).astype(np.int64), start + 1)
    roll = np.zeros((int(stop.max()), 128), bool)
    for s, e, k in zip(start, stop, p.pitch, strict=True):
        roll[s:e, k] = True
    counts = roll.sum(axis=1)
    counts = counts[counts > 0]
    return float(counts.mean())


def groove_consistency(
    notes: Notes, bar_beats: float = BAR_BEATS, steps_per_beat: int = 12
) -> float:
    """1 - mean Hamming distance (per grid step) between onset patterns of adjacent bars.

    Wu & Yang (2020). 1 means every bar has the same rhythm; NaN with fewer than two bars.
    """
    bars = n_bars(notes, bar_beats)
    if bars < 2:
        return float("nan")
    steps = int(round(bar_beats * steps_per_beat))
    grid = np.round(notes.onset * steps_per_beat).astype(np.int64)
    patterns = np.zeros((bars, steps), bool)
    patterns[np.minimum(grid // steps, bars - 1), grid % steps] = True
    dist = (patterns[1:] != patterns[:-1]).mean(axis=1)
    return float(1.0 - dist.mean())


def empty_bar_rate(notes: Notes, bar_beats: float = BAR_BEATS) -> float:
    """Fraction of bars (time 0 through the last onset) in which no note starts."""
    bars = n_bars(notes, bar_beats)
    if bars == 0:
        return float("nan")
    used = np.unique(np.floor(notes.onset / bar_beats).astype(np.int64))
    return float(1.0 - len(used) / bars)


# texture: what averages hide (notes piled on one onset, doubled notes, near-empty bars)


def _notes_at_each_onset(notes: Notes) -> np.ndarray:
    """Number of notes (all tracks) starting at each distinct grid onset."""
    return np.unique(onset_steps(notes), return_counts=True)[1]


def notes_per_onset(notes: Notes) -> float:
    """Mean number of notes (all tracks) starting together, onsets on the sixteenth grid."""
    counts = _notes_at_each_onset(notes)
    return float(counts.mean()) if len(counts) else float("nan")


def stacked_onset_rate(notes: Notes, min_notes: int = STACK_NOTES) -> float:
    """Fraction of distinct onsets where `min_notes` or more notes start."""
    counts = _notes_at_each_onset(notes)
    return float(np.mean(counts >= min_notes)) if len(counts) else float("nan")


def duplicate_note_rate(notes: Notes) -> float:
    """Fraction of notes repeating the (grid onset, pitch) of another note: n - distinct, over n.

    Drum notes count too (a doubled hit is a duplicate as well); the track is not part of the key.
    """
    if len(notes) == 0:
        return float("nan")
    keys = onset_steps(notes) * 128 + notes.pitch
    return float(1.0 - len(np.unique(keys)) / len(notes))


def sparse_bar_rate(
    notes: Notes, max_notes: int = SPARSE_BAR_NOTES, bar_beats: float = BAR_BEATS
) -> float:
    """Fraction of bars (time 0 through the last onset) in which at most `max_notes` notes start."""
    bars = n_bars(notes, bar_beats)
    if bars == 0:
        return float("nan")
    per_bar = np.bincount(np.floor(notes.onset / bar_beats).astype(np.int64), minlength=bars)
    return float(np.mean(per_bar <= max_notes))


# The repetition measures (repeated bars, rhythm repeats, bar self-similarity) live in
# `musicgen.measures.form` with the other measures of form, and are imported above.

STATISTICS = {
    "pitch_class_entropy": pitch_class_entropy,
    "scale_consistency": scale_consistency,
    "note_density": note_density,
    "polyphony": polyphony,
    "groove_consistency": groove_consistency,
    "empty_bar_rate": empty_bar_rate,
    "notes_per_onset": notes_per_onset,
    "stacked_onset_rate": stacked_onset_rate,
    "duplicate_note_rate": duplicate_note_rate,
    "sparse_bar_rate": sparse_bar_rate,
    "repeated_bar_rate": repeated_bar_rate,
    "rhythm_repeat_rate": rhythm_repeat_rate,
    "bar_self_similarity": bar_self_similarity,
}


def music_statistics(notes: Notes) -> dict[str, float]:
    """Every statistic in `STATISTICS` for one piece."""
    return {name: fn(notes) for name, fn in STATISTICS.items()}


def grammar_error_rate(ids: list[int] | np.ndarray, grammar) -> float:
    """Fraction of ids the tokenizer's grammar rejects (it keeps going after an error)."""
    ids = [int(i) for i in ids]
    for i in ids:
        grammar.advance(i)
    return float(grammar.errors / len(ids)) if ids else float("nan")


def summarize(values: list[float]) -> dict[str, float]:
    """Mean, std and count of the finite values (NaN where there are none)."""
    arr = np.asarray([v for v in values if np.isfinite(v)], np.float64)
    if len(arr) == 0:
        return {"mean": float("nan"), "std": float("nan"), "n": 0}
    return {"mean": float(arr.mean()), "std": float(arr.std()), "n": int(len(arr))}
