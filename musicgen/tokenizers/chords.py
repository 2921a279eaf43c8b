"""Chord tokens from annotations (POP909's `chord_midi.txt`) instead of miditok's onset detection.

An annotation line is `start_seconds <tab> end_seconds <tab> label`, the label in Harte's syntax
(`C:maj`, `A:min7`, `F#:maj7/5`, `Bb:sus4(b7)`, `N` = no chord). Each label is folded onto the
tokenizer's chord qualities: the quality whose pitch set is the largest subset of the label's
(so sixths, added tones and 7sus4 keep their triad, the bass of an inversion is dropped, the
root stays). Seconds become ticks through the MIDI's tempo map, then positions on the
tokenizer's grid with symusic's rounding (the one miditok's resampling applies to notes). A chord
token is written where the chord changes: repeats of the same chord are merged, `N` ends the
current chord and writes nothing. See docs/tokenization.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.io import Unreadable, read_regular
from musicgen.limits import MAX_CHORD_FILE_BYTES, MAX_CHORD_SECONDS
from musicgen.tokenizers.remi_grammar import RemiTables

CHORD_FILE = "chord_midi.txt"  # POP909's annotation, aligned to the MIDI (not to the audio)

NOTE_NAMES = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}
# Harte shorthands (Harte et al. 2005, table 2; 1, 5, sus2, 11, 13 and their maj/min forms from
# Harte's 2010 thesis), as the semitones of their degrees above the root in degree order, so
# that `intervals[1]` is the third (the fourth or second of a sus chord). The ninths hold the
# ninth: C:9 is C E G Bb D (a dominant seventh is `7`).
SHORTHANDS: dict[str, tuple[int, ...]] = {
    "maj": (0, 4, 7),
    "min": (0, 3, 7),
    "dim": (0, 3, 6),
    "aug": (0, 4, 8),
    "maj7": (0, 4, 7, 11),
    "min7": (0, 3, 7, 10),
    "7": (0, 4, 7, 10),
    "dim7": (0, 3, 6, 9),
    "hdim7": (0, 3, 6, 10),
    "minmaj7": (0, 3, 7, 11),
    "maj6": (0, 4, 7, 9),
    "min6": (0, 3, 7, 9),
    "9": (0, 4, 7, 10, 2),
    "maj9": (0, 4, 7, 11, 2),
    "min9": (0, 3, 7, 10, 2),
    "11": (0, 4, 7, 10, 2, 5),
    "maj11": (0, 4, 7, 11, 2, 5),
    "min11": (0, 3, 7, 10, 2, 5),
    "13": (0, 4, 7, 10, 2, 5, 9),
    "maj13": (0, 4, 7, 11, 2, 5, 9),
    "min13": (0, 3, 7, 10, 2, 5, 9),
    "sus2": (0, 2, 7),
    "sus4": (0, 5, 7),
    "5": (0, 7),
    "1": (0,),
}
# Harte's degrees 1..13 (8 = the octave, 10 = the third, 12 = the fifth, an octave up)
DEGREES = {1: 0, 2: 2, 3: 4, 4: 5, 5: 7, 6: 9, 7: 11, 8: 0, 9: 2, 10: 4, 11: 5, 12: 7, 13: 9}
NO_CHORD = ("N", "X")  # no chord, unknown chord: both write nothing and end the current chord
_LABEL = re.compile(r"^([A-G])([#b]*)(?::([^(/]*))?(?:\(([^)]*)\))?(?:/(.+))?$")
_DEGREE = re.compile(r"^(\*?)([#b]*)(\d+)$")


@dataclass(frozen=True)
class HarteChord:
    """A parsed Harte label: root and bass pitch classes, the chord's degrees above the root."""

    root: int
    intervals: tuple[int, ...]  # semitones mod 12, the shorthand's degrees first, then added ones
    bass: int  # pitch class of the bass (the root unless a slash chord)

    @property
    def pitch_classes(self) -> frozenset[int]:
        return frozenset(self.intervals)

    @property
    def tones(self) -> frozenset[int]:
        """The chord's sounding pitch classes (0 = C): its intervals above the root."""
        return frozenset((self.root + i) % 12 for i in self.intervals)


def parse_harte(label: str) -> HarteChord | None:
    """THE Harte parser (the tokenizer's annotations, the trio charts, `--chords`): None for `N`
    / `X`; bad syntax, an unknown shorthand or degree is a one-line `MusicgenError`.

    `C` alone is `C:maj`; `C:(1,b3,5)` lists its degrees; `(...)` adds degrees to the
    shorthand's and `*d` omits one; `/d` names the bass as a degree above the root.
    """
    if label in NO_CHORD:
        return None
    m = _LABEL.match(label)
    if m is None:
        raise MusicgenError(f"chord label '{label}': not in Harte's syntax (e.g. C:maj)")
    letter, accidentals, shorthand, extra, bass = m.groups()
    root = (NOTE_NAMES[letter] + accidentals.count("#") - accidentals.count("b")) % 12
    shorthand = "maj" if shorthand is None else shorthand
    if shorthand not in SHORTHANDS and not (shorthand == "" and extra):
        raise MusicgenError(f"chord label '{label}': unknown quality '{shorthand}'")
    intervals = list(SHORTHANDS.get(shorthand, (0,)))
    for degree in (extra or "").split(","):
        if degree.strip():
            omit, semitones = _degree(degree.strip(), label)
            if omit:
                intervals = [i for i in intervals if i != semitones]
            elif semitones not in intervals:
                intervals.append(semitones)
    bass_pc = root if bass is None else (root + _degree(bass, label)[1]) % 12
    return HarteChord(root, tuple(intervals), bass_pc)


def label_pitch_classes(label: str) -> tuple[int, frozenset[int]] | None:
    """(root pitch class, intervals above it) of a Harte label; None for `N` / `X`.

    The bass after `/` is ignored (inversions fold to root position). Unknown syntax raises.
    """
    chord = parse_harte(label)
    return None if chord is None else (chord.root, chord.pitch_classes)


def _degree(text: str, label: str) -> tuple[bool, int]:
    m = _DEGREE.match(text)
    if m is None or int(m.group(3)) not in DEGREES:
        raise MusicgenError(f"chord label '{label}': unknown degree '{text}'")
    omit, acc, number = m.groups()
    return bool(omit), (DEGREES[int(number)] + acc.count("#") - acc.count("b")) % 12


# Lead-sheet chord symbols (`C`, `Am`, `G7`, `Bbmaj7`, `F#m7b5`, `Dsus4`, `C/E`): the suffix after
# the root, as the Harte label it stands for. Read by `symbol_to_harte`, parsed by `parse_harte`.
SYMBOL_SUFFIXES: dict[str, str] = {
    "": "maj",
    "M": "maj",
    "maj": "maj",
    "m": "min",
    "min": "min",
    "-": "min",
    "dim": "dim",
    "o": "dim",
    "aug": "aug",
    "+": "aug",
    "7": "7",
    "dom7": "7",
    "maj7": "maj7",
    "M7": "maj7",
    "m7": "min7",
    "min7": "min7",
    "-7": "min7",
    "dim7": "dim7",
    "o7": "dim7",
    "m7b5": "hdim7",
    "min7b5": "hdim7",
    "-7b5": "hdim7",
    "hdim7": "hdim7",
    "mM7": "minmaj7",
    "mmaj7": "minmaj7",
    "minmaj7": "minmaj7",
    "6": "maj6",
    "m6": "min6",
    "min6": "min6",
    "9": "9",
    "maj9": "maj9",
    "M9": "maj9",
    "m9": "min9",
    "min9": "min9",
    "add9": "maj(9)",
    "madd9": "min(9)",
    "11": "11",
    "m11": "min11",
    "13": "13",
    "maj13": "maj13",
    "m13": "min13",
    "sus2": "sus2",
    "sus4": "sus4",
    "sus": "sus4",
    "7sus4": "sus4(b7)",
    "7sus": "sus4(b7)",
    "5": "5",
}
_SYMBOL = re.compile(r"^([A-G])([#b]?)([^/]*)(?:/([A-G][#b]?))?$")
_BASS_DEGREE = ("1", "b2", "2", "b3", "3", "4", "b5", "5", "b6", "6", "b7", "7")


def symbol_to_harte(symbol: str) -> str | None:
    """A lead-sheet symbol as a Harte label (`Am7/G` -> `A:min7/b7`); None if it is not one."""
    m = _SYMBOL.match(symbol)
    if m is None or m.group(3) not in SYMBOL_SUFFIXES:
        return None
    letter, accidental, suffix, bass = m.groups()
    label = f"{letter}{accidental}:{SYMBOL_SUFFIXES[suffix]}"
    if bass:
        root = (NOTE_NAMES[letter] + accidental.count("#") - accidental.count("b")) % 12
        low = (NOTE_NAMES[bass[0]] + bass[1:].count("#") - bass[1:].count("b")) % 12
        label += "/" + _BASS_DEGREE[(low - root) % 12]
    return label


@dataclass(frozen=True)
class ChordSpan:
    """One annotation line: a chord label sounding from `start` to `end` (seconds)."""

    start: float
    end: float
    label: str


def read_chord_file(path: str | Path) -> list[ChordSpan]:
    """Parse a chord annotation file; a malformed line is a one-line `MusicgenError`."""
    path = Path(path)
    try:
        text = read_regular(path, MAX_CHORD_FILE_BYTES, "a chord file").decode("utf-8")
    except Unreadable as exc:
        raise MusicgenError(f"{path}: cannot read chord annotations ({exc})") from None
    except UnicodeDecodeError:
        raise MusicgenError(f"{path}: not a UTF-8 text file (chord annotations)") from None
    return parse_chord_text(text, str(path))


def parse_chord_text(text: str, where: str = "chords") -> list[ChordSpan]:
    spans = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            start, end = float(parts[0]), float(parts[1])
            label = parts[2]
        except (IndexError, ValueError):
            raise MusicgenError(
                f"{where}: line {n}: expected 'start end label', got '{line.strip()}'"
            ) from None
        if not (np.isfinite(start) and start >= 0 and end >= start):
            raise MusicgenError(f"{where}: line {n}: bad time span {start:g}..{end:g} s")
        if end > MAX_CHORD_SECONDS:
            raise MusicgenError(
                f"{where}: line {n}: time {end:g} s is past the limit of {MAX_CHORD_SECONDS:g} s "
                f"({MAX_CHORD_SECONDS / 60:g} minutes, the longest song)"
            )
        try:
            label_pitch_classes(label)
        except MusicgenError as exc:
            raise MusicgenError(f"{where}: line {n}: {exc}") from None
        spans.append(ChordSpan(start, end, label))
    return spans


def fold_quality(intervals: frozenset[int], chord_maps: dict[str, Sequence[int]]) -> str | None:
    """The quality whose pitch-class set is the largest subset of `intervals` (first on ties)."""
    best, size = None, 0
    for quality, pitch_map in chord_maps.items():
        pcs = {int(p) % 12 for p in pitch_map}
        if pcs <= intervals and len(pcs) > size:
            best, size = quality, len(pcs)
    return best


def seconds_to_ticks(score: symusic.Score, seconds: np.ndarray) -> np.ndarray:
    """Times in seconds -> ticks of `score` (float), through its tempo map (120 bpm if none)."""
    tpq = score.ticks_per_quarter
    tempos = sorted(((int(t.time), int(t.mspq)) for t in score.tempos), key=lambda x: x[0])
    if not tempos or tempos[0][0] > 0:
        tempos.insert(0, (0, tempos[0][1] if tempos else 500_000))
    ticks = np.array([t for t, _ in tempos], dtype=np.float64)
    sec_per_tick = np.array([m for _, m in tempos], dtype=np.float64) / 1e6 / tpq
    starts = np.concatenate([[0.0], np.cumsum(np.diff(ticks) * sec_per_tick[:-1])])  # seconds
    seconds = np.asarray(seconds, dtype=np.float64)
    seg = np.clip(np.searchsorted(starts, seconds, side="right") - 1, 0, len(starts) - 1)
    return ticks[seg] + (seconds - starts[seg]) / sec_per_tick[seg]


def chord_changes(
    score: symusic.Score, spans: Sequence[ChordSpan], positions_per_beat: int
) -> list[tuple[int, str]]:
    """(grid position from the song's start, label) of each annotation line, in time order; of
    two lines rounding onto one position only the later is kept (the chord that holds)."""
    if not spans:
        return []
    ticks = seconds_to_ticks(score, np.array([s.start for s in spans]))
    grid = np.floor(ticks * positions_per_beat / score.ticks_per_quarter + 0.5).astype(np.int64)
    at = {int(g): span.label for span, g in zip(spans, grid, strict=True)}  # later wins
    return sorted(at.items())


def chord_grid_events(
    score: symusic.Score,
    spans: Sequence[ChordSpan],
    tables: RemiTables,
    chord_maps: dict[str, Sequence[int]],
    positions_per_beat: int,
    positions_per_bar: int,
) -> tuple[list[tuple[int, int, int]], int]:
    """[(bar, position, chord id)] at every chord change, and the number of labels dropped.

    A label is dropped when no quality of the tokenizer fits it. Two changes on one grid
    position keep the later one (the chord that holds from there on).
    """
    at: dict[int, int | None] = {}
    dropped = 0
    for g, label in chord_changes(score, spans, positions_per_beat):
        pcs = label_pitch_classes(label)
        chord = None
        if pcs is not None:
            quality = fold_quality(pcs[1], chord_maps)
            chord = tables.chord_to_id.get((pcs[0], quality)) if quality else None
            dropped += chord is None
        at[g] = chord
    events, current = [], None
    for g in sorted(at):
        if at[g] is not None and at[g] != current:
            events.append((g // positions_per_bar, g % positions_per_bar, at[g]))
        current = at[g]
    return events, dropped


def insert_chords(
    ids: Sequence[int], events: list[tuple[int, int, int]], tables: RemiTables, bar_id: int
) -> list[int]:
    """A REMI id sequence with its Chord tokens replaced by `events` (sorted (bar, pos, id)).

    Each chord goes right after its position's Position (and Tempo) tokens, before the notes; a
    position with no token yet gets a `Position` of its own. Chords after the last bar are left
    out (the music has ended).
    """
    fam = tables.family
    ids = [int(t) for t in ids if fam[t] != RemiTables.CHORD]  # miditok's detected chords go
    pos_id = {int(tables.position[i]): int(i) for i in np.flatnonzero(fam == RemiTables.POSITION)}
    out: list[int] = []
    pending = list(reversed(events))  # pop() gives the earliest
    bar, pos = -1, -1

    def flush_before(b: int, p: int) -> None:  # chords of the current bar before (b, p)
        while pending and pending[-1][0] == bar and (pending[-1][0], pending[-1][1]) < (b, p):
            _, q, chord = pending.pop()
            out.extend([pos_id[q], chord])

    for i, t in enumerate(ids):
        f = fam[t]
        if t == bar_id or f == RemiTables.SPECIAL:
            flush_before(bar + 1, -1)
            while pending and pending[-1][0] <= bar:  # bars already passed (none in practice)
                pending.pop()
            if t == bar_id:
                bar, pos = bar + 1, -1
        elif f == RemiTables.POSITION:
            flush_before(bar, int(tables.position[t]))
            pos = int(tables.position[t])
        out.append(t)
        nxt = ids[i + 1] if i + 1 < len(ids) else None
        in_header = f in (RemiTables.POSITION, RemiTables.TEMPO)
        if in_header and (nxt is None or fam[nxt] != RemiTables.TEMPO):
            if pending and pending[-1][:2] == (bar, pos):
                out.append(pending.pop()[2])
    return out
