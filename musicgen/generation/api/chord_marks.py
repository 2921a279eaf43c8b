"""The chords of a written piece as MIDI markers ("Chord Am"), one per chord change, as the
phrases are ("A8", `tokenizers.form.add_markers`): a DAW's marker lane and `mido` show them
(pretty_midi reads the file, though its API has no markers). The chords are those the piece's
ids write (a REMI model's Chord tokens: the model's own, or a requested progression's). The
"Chord " prefix keeps a chord apart from a phrase marker ("A7" would read as a 7-bar phrase A).

Spelling: one name per pitch class, C C# D Eb E F F# G Ab A Bb B (the common pop spelling),
and miditok's chord kinds as chord symbols: maj "", min "m", 7dom "7", 7maj "maj7", 7min "m7",
7halfdim "m7b5", 7dim "dim7", dim, aug, sus2, sus4.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import symusic

from musicgen.tokenizers.base import Tokenizer

if TYPE_CHECKING:
    from musicgen.generation.api.prompt import Prompt

CHORD_MARK = "Chord "  # a chord marker's text: "Chord Am"
NOTE_NAMES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
SHARPS = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
FLATS = ("C", "Db", "D", "Eb", "E", "F", "Gb", "G", "Ab", "A", "Bb", "B")
SUFFIXES = {  # miditok's chord kinds, and Harte's, as chord symbols
    "maj": "", "min": "m", "7dom": "7", "7maj": "maj7", "7min": "m7", "7halfdim": "m7b5",
    "7dim": "dim7", "dim": "dim", "aug": "aug", "sus2": "sus2", "sus4": "sus4",
    "7": "7", "maj7": "maj7", "min7": "m7", "hdim7": "m7b5", "dim7": "dim7",
}  # fmt: skip


def pitch_class(root: str) -> int | None:
    """A root's pitch class (C# and Db alike), None if it is no note name."""
    for names in (SHARPS, FLATS):
        if root in names:
            return names.index(root)
    return None


def chord_symbol(label: str, transpose: int = 0) -> str:
    """A tokenizer's chord label ('A:min', 'C#:7dom') as a chord symbol ('Am', 'C#7'), moved
    `transpose` semitones; a label it cannot read comes back as it is."""
    root, _, kind = label.partition(":")
    pc = pitch_class(root)
    if pc is None:
        return label
    return NOTE_NAMES[(pc + transpose) % 12] + SUFFIXES.get(kind, kind)


def split_symbol(symbol: str) -> tuple[int, str] | None:
    """(root pitch class, the rest) of a chord symbol ('Bbm7' -> (10, 'm7')); None if none."""
    for n in (2, 1):
        pc = pitch_class(symbol[:n])
        if pc is not None:
            return pc, symbol[n:]
    return None


def add_chord_marks(
    score: symusic.Score, tokenizer: Tokenizer, ids: Sequence[int], prompt: Prompt | None = None
) -> None:
    """A marker per chord change that `ids` write (bar 0 of the ids at time 0 of `score`),
    in place; nothing for a tokenizer without chords or without score bars, or a score
    without a track (no note to name). A `prompt` whose file has chord markers keeps them:
    they replace the ids' chords over its bars; the new part's first chord is marked even
    where it goes on from the prompt's (an extended file, which keeps only the new part's
    markers, then names it)."""
    from musicgen.generation.controls.progression import chord_events, chords_unsupported

    if chords_unsupported(tokenizer) is not None or not len(score.tracks):
        return  # symusic writes a track-less score's markers after its tempos, out of order
    per_beat = tokenizer.time_tables().positions_per_beat
    tpq = score.ticks_per_quarter
    cut = -1 if prompt is None else prompt.end_tick * tpq // prompt.notes.ticks_per_quarter
    at: dict[int, str] = {}  # time -> the chord written there (the last of several)
    own = prompt is not None and bool(prompt.chords)
    for bar, pos, cid in chord_events(tokenizer, ids):
        time = bar * 4 * tpq + pos * tpq // per_beat
        if bar < 0 or (own and time < cut):  # before the first Bar; the file's own chords
            continue
        at[time] = chord_symbol(tokenizer.token_name(cid).removeprefix("Chord_"))
    if own:
        at |= {time * tpq // prompt.notes.ticks_per_quarter: name for time, name in prompt.chords}
    first_new = min((t for t in at if t >= cut), default=None) if prompt is not None else None
    last = None
    for time, name in sorted(at.items()):
        if name != last or time == first_new:  # the new part's first chord, marked even where
            score.markers.append(symusic.TextMeta(time, CHORD_MARK + name))  # it goes on
        last = name
    _sort_markers(score)


def transpose_marks(score: symusic.Score, semitones: int) -> None:
    """The chord markers renamed `semitones` up (in place), as their notes are moved."""
    for m in score.markers:
        if not m.text.startswith(CHORD_MARK):
            continue
        parts = split_symbol(m.text[len(CHORD_MARK) :])
        if parts is not None:
            m.text = CHORD_MARK + NOTE_NAMES[(parts[0] + semitones) % 12] + parts[1]


def _sort_markers(score: symusic.Score) -> None:
    markers = sorted(score.markers, key=lambda m: m.time)  # stable: a phrase first
    score.markers.clear()
    score.markers.extend(markers)


def phrase_marks(score: symusic.Score) -> list[str]:
    """The texts of a score's markers other than its chords (its phrases: "A8")."""
    return [m.text for m in score.markers if not m.text.startswith(CHORD_MARK)]


def file_chords(path: Path, first_bar: int, tpq: int, end: int) -> list[tuple[int, str]]:
    """(tick, chord symbol) of a file's chord markers from bar `first_bar` (4/4 from time 0)
    to `end`, in ticks of `tpq` from that bar: what a continuation of it keeps."""
    score = symusic.Score(str(path))
    origin = first_bar * 4 * score.ticks_per_quarter
    out = []
    for m in score.markers:
        if m.text.startswith(CHORD_MARK) and m.time >= origin:
            time = (m.time - origin) * tpq // score.ticks_per_quarter
            if time < end:
                out.append((time, m.text[len(CHORD_MARK) :]))
    return out
