"""Chord symbols and the generated bass / accompaniment patterns of the trio dataset.

A pattern is one or two bars of (onset, duration, role, velocity) events on the 12-ticks-per-beat
grid; rendering plays it over a chart (one chord per beat), each event taking the chord of the
beat it starts in. Patterns are drawn from a numpy Generator, so a seed fixes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.tokenizers.chords import parse_harte

BEAT = 12  # ticks per beat (the Groove tokenizer's grid)
BAR = 4 * BEAT


@dataclass(frozen=True)
class Chord:
    root: int  # pitch class
    intervals: tuple[int, ...]
    bass: int  # pitch class of the bass note (the root unless a slash chord)


def parse_chord(label: str) -> Chord | None:
    """A POP909 label ('C#:min7', 'G:maj/3', 'B:sus4(b7)') read by the one Harte parser
    (`tokenizers.chords.parse_harte`): every degree it names is voiced; None for 'N', 'X' or a
    label that is not Harte syntax (the chart then holds the chord before it)."""
    try:
        chord = parse_harte(label)
    except MusicgenError:
        return None
    return None if chord is None else Chord(chord.root, chord.intervals, chord.bass)


def _durations(onsets: list[int], length: int, legato: bool) -> list[int]:
    """Gap to the next onset (wrapping at the pattern length); half of it when staccato."""
    gaps = [(onsets[(i + 1) % len(onsets)] - o) % length or length for i, o in enumerate(onsets)]
    return gaps if legato else [max(1, g // 2) for g in gaps]


def _velocity(onset: int) -> int:
    return 100 if onset % BAR == 0 else 86 if onset % BEAT == 0 else 72


def _rhythm(rng: np.random.Generator, step: int, length: int, density: float) -> list[int]:
    """Onsets on a `step` grid: bar starts always, beats likely, off-beats less so."""
    out = []
    for t in range(0, length, step):
        p = 1.0 if t % BAR == 0 else density if t % BEAT == 0 else density * 0.5
        if rng.random() < p:
            out.append(t)
    return out


def make_bass_pattern(rng: np.random.Generator) -> dict:
    length = BAR * int(rng.choice([1, 2]))
    step = int(rng.choice([24, 12, 6, 6, 3]))
    onsets = _rhythm(rng, step, length, float(rng.uniform(0.5, 0.95)))
    durs = _durations(onsets, length, legato=bool(rng.random() < 0.6))
    roles = [
        "bass" if o % BAR == 0 else str(rng.choice(["root", "fifth", "octave", "third"]))
        for o in onsets
    ]
    return {"length": length, "events": list(zip(onsets, durs, roles, strict=True))}


ACCOMP_KINDS = ("block", "arpeggio", "pad", "offbeat", "broken")


def make_accomp_pattern(rng: np.random.Generator) -> dict:
    kind = str(rng.choice(ACCOMP_KINDS))
    length = BAR * int(rng.choice([1, 2]))
    legato = bool(rng.random() < 0.5)
    if kind == "block":
        onsets = _rhythm(rng, int(rng.choice([12, 6])), length, float(rng.uniform(0.5, 0.9)))
    elif kind == "arpeggio":
        onsets = list(range(0, length, int(rng.choice([6, 3]))))
    elif kind == "pad":
        onsets = list(range(0, length, int(rng.choice([48, 24]))))
        legato = True
    elif kind == "offbeat":
        onsets = list(range(BEAT // 2, length, BEAT))
        legato = False
    else:  # broken: low note on the bar, the upper notes on the other beats
        onsets = list(range(0, length, BEAT))
    durs = _durations(onsets, length, legato)
    return {
        "kind": kind,
        "length": length,
        "low": int(rng.integers(52, 61)),  # lowest pitch of the voicing
        "updown": bool(rng.random() < 0.5),
        "events": list(zip(onsets, durs, strict=True)),
    }


def _chord_at(chords: list[Chord | None], tick: int) -> Chord | None:
    """The chord of the beat containing `tick`, else the last chord before it."""
    for b in range(min(tick // BEAT, len(chords) - 1), -1, -1):
        if chords[b] is not None:
            return chords[b]
    return None


def _bass_pitch(chord: Chord, role: str) -> int:
    root = 28 + (chord.root - 4) % 12  # E1..D#2
    if role == "bass":
        return 28 + (chord.bass - 4) % 12
    return root + {"root": 0, "fifth": 7, "octave": 12, "third": chord.intervals[1]}[role]


def _voicing(chord: Chord, low: int) -> list[int]:
    return sorted(low + (chord.root + i - low) % 12 for i in chord.intervals)


def render_bass(pattern: dict, chords: list[Chord | None]) -> np.ndarray:
    """(onset, offset, pitch, velocity) rows over the whole chart."""
    rows = []
    end = len(chords) * BEAT
    for start in range(0, end, pattern["length"]):
        for on, dur, role in pattern["events"]:
            chord = _chord_at(chords, start + on)
            if chord is not None and start + on < end:
                p = _bass_pitch(chord, role)
                rows.append((start + on, start + on + dur, p, _velocity(on)))
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def render_accomp(pattern: dict, chords: list[Chord | None]) -> np.ndarray:
    rows = []
    end = len(chords) * BEAT
    kind, low = pattern["kind"], pattern["low"]
    for start in range(0, end, pattern["length"]):
        for j, (on, dur) in enumerate(pattern["events"]):
            chord = _chord_at(chords, start + on)
            if chord is None or start + on >= end:
                continue
            voiced = _voicing(chord, low)
            if kind == "arpeggio":
                cycle = voiced + [voiced[0] + 12]
                if pattern["updown"]:
                    cycle = cycle + cycle[-2:0:-1]
                pitches = [cycle[j % len(cycle)]]
            elif kind == "broken":
                pitches = voiced[:1] if on % BAR == 0 else voiced[1:]
            else:
                pitches = voiced
            for p in pitches:
                rows.append((start + on, start + on + dur, p, _velocity(on)))
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _bar_pattern(events: list[tuple[int, int, str]]) -> dict:
    return {"length": BAR, "events": events}


# Named one-bar bass lines for real accompaniments: root and fifth on the beat grid, the chord's
# bass note (slash chords) on the downbeat. Each event takes the chord of its beat.
BASS_STYLES: dict[str, dict] = {
    "root_half": _bar_pattern([(0, 24, "bass"), (24, 24, "root")]),
    "root_fifth": _bar_pattern([(0, 24, "bass"), (24, 24, "fifth")]),
    "quarters": _bar_pattern(
        [(0, 12, "bass"), (12, 12, "root"), (24, 12, "fifth"), (36, 12, "root")]
    ),
    "eighths": _bar_pattern([(t, 6, "bass" if t == 0 else "root") for t in range(0, BAR, 6)]),
    "octaves": _bar_pattern(
        [(t, 5, "bass" if t == 0 else "octave" if t % 12 else "root") for t in range(0, BAR, 6)]
    ),
    "pushed": _bar_pattern(
        [(0, 18, "bass"), (18, 6, "root"), (24, 12, "fifth"), (36, 6, "octave"), (42, 6, "fifth")]
    ),
}
