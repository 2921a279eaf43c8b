"""How much performance timing and dynamics a tokenization keeps: encode/decode round-trip error.

A tokenizer puts onsets and durations on a grid and velocities in bins, so a decoded performance
differs from the raw MIDI. `roundtrip_error` measures that difference in seconds (milliseconds in
the report) on the piano notes of a score, after matching each raw note to the decoded note of the
same pitch nearest in onset. The sustain pedal is either kept as its own events or folded into the
notes (`fold_pedal`: a key released while the pedal is down sounds on until the pedal is released);
the "sounding" duration error compares pedal-folded durations on both sides, so both ways of
keeping the pedal, and dropping it, are measured on the same footing. Used by
scripts/experiments/measure_tokenizers.py; results in docs/tokenization.md ("Expressive piano").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.tokenizers.pedal import folded_ends, pedal_intervals


@dataclass
class PianoNotes:
    """The piano notes of a score in seconds (parallel arrays, sorted by onset then pitch)."""

    onset: np.ndarray  # float64 [n], seconds
    duration: np.ndarray  # float64 [n], seconds: key held
    sounding: np.ndarray  # float64 [n], seconds: key or sustain pedal held (pedal folded in)
    pitch: np.ndarray  # int64 [n]
    velocity: np.ndarray  # int64 [n]


def piano_notes(score: symusic.Score) -> PianoNotes:
    """The non-drum notes of `score` in seconds, with key and pedal-folded durations."""
    sec = score.to("second")
    parts = [t.notes.numpy() for t in sec.tracks if not t.is_drum and len(t.notes)]
    if not parts:
        raise MusicgenError("score: no piano notes")
    on = np.concatenate([p["time"] for p in parts]).astype(np.float64)
    dur = np.concatenate([p["duration"] for p in parts]).astype(np.float64)
    pitch = np.concatenate([p["pitch"] for p in parts]).astype(np.int64)
    vel = np.concatenate([p["velocity"] for p in parts]).astype(np.int64)
    sounding = folded_ends(on, on + dur, pitch, pedal_intervals(sec)) - on
    order = np.lexsort((pitch, on))
    return PianoNotes(on[order], dur[order], sounding[order], pitch[order], vel[order])


def match_notes(ref: PianoNotes, dec: PianoNotes) -> np.ndarray:
    """For each reference note, the index of the decoded note of the same pitch nearest in onset
    (-1 where the decoded piece has no note of that pitch). Shape [n_ref]."""
    out = np.full(len(ref.onset), -1, np.int64)
    for p in np.unique(ref.pitch):
        ri = np.flatnonzero(ref.pitch == p)
        di = np.flatnonzero(dec.pitch == p)  # sorted by onset within one pitch
        if len(di) == 0:
            continue
        j = np.clip(np.searchsorted(dec.onset[di], ref.onset[ri]), 1, len(di) - 1)
        if len(di) == 1:
            out[ri] = di[0]
            continue
        left, right = di[j - 1], di[j]
        near_left = np.abs(dec.onset[left] - ref.onset[ri]) <= np.abs(
            dec.onset[right] - ref.onset[ri]
        )
        out[ri] = np.where(near_left, left, right)
    return out


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) * 1000.0 if len(x) else float("nan")


def roundtrip_error(ref: symusic.Score, decoded: symusic.Score) -> dict[str, float]:
    """Timing and dynamics error of `decoded` against the raw `ref`, in ms and velocity steps.

    Onset, key-duration and sounding-duration (pedal folded on both sides) errors are absolute,
    reported as median and 95th percentile; `note_ratio` is decoded notes / reference notes
    (miditok drops duplicate or out-of-range notes), `unmatched` the share of reference notes
    whose pitch the decoded piece lacks.
    """
    a, b = piano_notes(ref), piano_notes(decoded)
    m = match_notes(a, b)
    ok = m >= 0
    mi = m[ok]
    on = np.abs(b.onset[mi] - a.onset[ok])
    dur = np.abs(b.duration[mi] - a.duration[ok])
    snd = np.abs(b.sounding[mi] - a.sounding[ok])
    vel = np.abs(b.velocity[mi] - a.velocity[ok]).astype(np.float64)
    return {
        "onset_median_ms": _pct(on, 50),
        "onset_p95_ms": _pct(on, 95),
        "duration_median_ms": _pct(dur, 50),
        "duration_p95_ms": _pct(dur, 95),
        "sounding_median_ms": _pct(snd, 50),
        "sounding_p95_ms": _pct(snd, 95),
        "velocity_mean_abs": float(vel.mean()) if len(vel) else float("nan"),
        "velocity_levels_used": float(len(np.unique(b.velocity))),
        "note_ratio": len(b.onset) / len(a.onset),
        "unmatched": float(1.0 - ok.mean()),
    }


def score_seconds(score: symusic.Score) -> float:
    """Length of a score in seconds (end of its last note)."""
    return float(score.to("second").end())


Codec = Callable[[symusic.Score], tuple[int, symusic.Score]]  # score -> (n_tokens, decoded)


def measure(score: symusic.Score, codec: Codec) -> dict[str, float]:
    """Round-trip error of one score through `codec`, plus tokens per second of music."""
    n_tokens, decoded = codec(score)
    out = roundtrip_error(score, decoded)
    out["tokens_per_second"] = n_tokens / max(score_seconds(score), 1e-9)
    return out
