"""POP909's phrase structure (Dai, Zhang & Dannenberg 2020) put on the MIDI's bars.

A song's folder holds `human_label1.txt` (its form, e.g. `i4A4B8A4o3`: a letter per phrase, then
its length in bars), `melody.txt` (the melody on a 16th grid, `pitch duration` a line, pitch 0 a
rest) and analyses. Their bar 0 is a corrected downbeat that is usually not the MIDI's (how
often: docs/tokenization.md, "POP909's phrases on the MIDI's bars"). So each song is aligned by
matching `melody.txt` against the MIDI's MELODY track on the 16th grid, and the score is then
delayed by the few 16ths that put the corrected downbeat on a bar line: the tokenizer's bars
become the song's real bars and each phrase starts on a `Bar`. A song aligns when at least
`MIN_MATCH` of its annotated melody notes land on a MIDI melody note.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import symusic

from musicgen.errors import MusicgenError
from musicgen.io import Unreadable, read_regular
from musicgen.tokenizers.base import Tokenizer
from musicgen.tokenizers.form import Phrase, Section, parse_form
from musicgen.tokenizers.remi import melody_track

LABEL_FILES = ("human_label1.txt", "human_label2.txt")
MELODY_FILE = "melody.txt"
MIN_MATCH = 0.8  # share of annotated melody notes that must meet a MIDI melody note
MAX_SHIFT = 96  # 16ths searched either way (6 bars)
MAX_TEXT_BYTES = 1 << 20


def _text(path: Path) -> str:
    try:
        return read_regular(path, MAX_TEXT_BYTES).decode("utf-8")
    except (Unreadable, UnicodeDecodeError) as exc:
        raise MusicgenError(f"{path}: cannot read ({exc})") from None


def read_form(folder: str | Path, annotator: int = 1) -> list[Phrase]:
    path = Path(folder) / LABEL_FILES[annotator - 1]
    return parse_form(_text(path), str(path))


def read_melody(folder: str | Path) -> list[tuple[int, int]]:
    """(onset in 16ths from their bar 0, MIDI pitch) of every annotated melody note."""
    path = Path(folder) / MELODY_FILE
    notes, t = [], 0
    for n, line in enumerate(_text(path).splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            pitch, length = int(parts[0]), int(parts[1])
        except (ValueError, IndexError):
            raise MusicgenError(f"{path}: line {n} is not 'pitch duration'") from None
        if pitch > 0:
            notes.append((t, pitch))
        t += length
    return notes


def align(score: symusic.Score, melody: list[tuple[int, int]]) -> tuple[int, float]:
    """(16th of the score where their bar 0 falls, share of annotated notes matched there)."""
    track = melody_track(score)
    if track is None or not melody:
        return 0, 0.0
    q = score.ticks_per_quarter / 4
    midi = {(round(n.time / q), n.pitch) for n in track.notes}
    best, hits = 0, -1
    for shift in range(-MAX_SHIFT, MAX_SHIFT + 1):
        h = sum((t + shift, p) in midi for t, p in melody)
        if h > hits:
            best, hits = shift, h
    return best, hits / len(melody)


def delay(score: symusic.Score, sixteenths: int) -> symusic.Score:
    """The score played `sixteenths` later: every event moves, the first tempo also holds from 0."""
    if sixteenths == 0:
        return score
    ticks = sixteenths * score.ticks_per_quarter // 4
    out = score.shift_time(ticks)
    if len(score.tempos):
        first = score.tempos[0]
        out.tempos.insert(0, symusic.Tempo(0, first.qpm))
    return out


def delay_seconds(score: symusic.Score, sixteenths: int) -> float:
    """How many seconds `delay` adds at the start (at the score's first tempo)."""
    qpm = score.tempos[0].qpm if len(score.tempos) else 120.0
    return sixteenths / 4 * 60.0 / qpm


@dataclass(frozen=True)
class Aligned:
    """A song on its corrected bars: the delayed score, its sections, what aligning found."""

    score: symusic.Score
    sections: list[Section]
    delay: int  # 16ths added at the start
    match: float  # share of annotated melody notes matched

    @property
    def aligned(self) -> bool:
        return self.match >= MIN_MATCH


def align_song(score: symusic.Score, folder: str | Path) -> Aligned:
    """The score delayed onto the annotation's bars, with its phrases as sections; a song that
    does not align keeps its score and gets no sections."""
    shift, match = align(score, read_melody(folder))
    if match < MIN_MATCH:
        return Aligned(score, [], 0, match)
    pad = (-shift) % 16  # their bar 0 moves to a bar line
    bar = (shift + pad) // 16
    sections = []
    for p in read_form(folder):
        if bar + p.bars > 0:  # a phrase before the score's start keeps its bars from 0
            start = max(bar, 0)
            sections.append(Section(start, p.label, p.bars - (start - bar)))
        bar += p.bars
    return Aligned(delay(score, pad), sections, pad, match)


def structure_bytes(folder: str) -> bytes:
    """What of a structure folder the tokens depend on (its form and melody), for the cache."""
    if not folder:
        return b""
    parts = []
    for name in (LABEL_FILES[0], MELODY_FILE):
        try:
            parts.append(read_regular(Path(folder) / name, MAX_TEXT_BYTES))
        except Unreadable:
            parts.append(b"")
    return b"\0".join(parts)


def song_folder(structure: str | Path | None, midi: Path) -> str:
    """The structure folder of a song (named as the folder that holds its MIDI), or ""."""
    if structure is None:
        return ""
    folder = Path(structure) / midi.parent.name
    return str(folder) if folder.is_dir() else ""


def check_structure(tok: Tokenizer, structure: Path, files: list[Path]) -> None:
    """A structure folder that would do nothing is refused before any work: missing, read by a
    tokenizer without section tokens, or holding no song's folder."""
    if not structure.is_dir():
        raise MusicgenError(f"{structure}: structure folder not found")
    if not tok.section_mask().any():
        raise MusicgenError(
            f"{structure}: the tokenizer has no section tokens, so the structure would be "
            "ignored; give one that has them (--tokenizer configs/tokenizer/remi_song.yaml) or "
            "leave --structure out"
        )
    if not any(song_folder(structure, p) for p in files):
        raise MusicgenError(
            f"{structure}: no song's folder in it (one per song, named as the folder of its "
            f"MIDI file, e.g. {structure / files[0].parent.name})"
        )
