"""What the player names for a songwriter: the piece's key, and one chord symbol per bar spelt
as that key spells it (Bb in F major, A# in B major; "Am7", never "A:7min").

The key is estimated from the notes (Krumhansl-Kessler profiles, each pitch class weighted by
how long it sounds): a reading aid for the title, not a measure. The chords are those the
written file's chord markers name (`pieces.chords_per_bar`; the library's names,
`chord_marks.chord_symbol`, respelt for the key), reduced to the chord sounding as each bar
begins, carried over a bar where the chord does not change, so every bar shows one.
"""

from __future__ import annotations

import numpy as np
import symusic

from musicgen.generation.api.chord_marks import chord_symbol as marked_symbol
from musicgen.generation.api.chord_marks import split_symbol

SHARPS = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
FLATS = ("C", "Db", "D", "Eb", "E", "F", "Gb", "G", "Ab", "A", "Bb", "B")
MAJOR = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
MINOR = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])
# Major keys written with sharps (G D A E B F#), by tonic; a minor key spells as its relative.
SHARP_MAJORS = {7, 2, 9, 4, 11, 6}


def key_of(score: symusic.Score) -> tuple[int, bool] | None:
    """(tonic pitch class, minor) of the score's pitched notes; None without any."""
    weights = np.zeros(12)
    for track in score.tracks:
        if track.is_drum:
            continue
        for note in track.notes:
            weights[note.pitch % 12] += max(note.duration, 1)
    if not weights.any():
        return None
    best, found = -2.0, None
    for tonic in range(12):
        for minor, profile in ((False, MAJOR), (True, MINOR)):
            r = np.corrcoef(weights, np.roll(profile, tonic))[0, 1]
            if np.isfinite(r) and r > best:
                best, found = r, (tonic, minor)
    return found


def flats_for(key: tuple[int, bool] | None) -> bool:
    """Whether a key is written with flats (C major and A minor: sharps' spelling, none)."""
    if key is None:
        return False
    major = (key[0] + 3) % 12 if key[1] else key[0]
    return major not in SHARP_MAJORS and major != 0


def key_name(key: tuple[int, bool] | None) -> str:
    """'A minor', 'Eb major' ('' for no key)."""
    if key is None:
        return ""
    names = FLATS if flats_for(key) else SHARPS
    return f"{names[key[0]]} {'minor' if key[1] else 'major'}"


def chord_symbol(name: str, transpose: int = 0, flats: bool = False) -> str:
    """A tokenizer's chord ('A:7min', Harte 'A:min7') as a chord symbol ('Am7'), moved
    `transpose` semitones (the library's naming, `chord_marks.chord_symbol`), spelt with flats
    or sharps; an unknown root is left as given."""
    return respell(marked_symbol(name, transpose), flats)


def respell(symbol: str, flats: bool) -> str:
    """A chord symbol as the piece's key spells it ('C#m' as 'Dbm' with flats): the
    library's one spelling (`chord_marks`) is the common pop one, the player's follows the key."""
    parts = split_symbol(symbol)
    if parts is None:
        return symbol
    return (FLATS if flats else SHARPS)[parts[0]] + parts[1]


def one_per_bar(events: list[tuple[int, int, str]], bars: int) -> list[str]:
    """One chord a bar from (bar, position, chord) events: the chord sounding as the bar
    begins (one written on its downbeat, else the last one before it, which carries on),
    else the bar's first; '' before any chord."""
    out, sounding = [], ""
    for bar in range(bars):
        inside = sorted((pos, name) for b, pos, name in events if b == bar)
        downbeat = next((name for pos, name in inside if pos == 0), "")
        out.append(downbeat or sounding or (inside[0][1] if inside else ""))
        if inside:
            sounding = inside[-1][1]
    return out
