"""The band measure of every MIDI file of a folder (`musicgen evaluate music --band`); the
measure itself is `measures.band`, whose names are re-exported here."""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.evaluate.common import midi_files
from musicgen.measures.band import (
    MAX_NOTE_BARS,
    MEASURES,
    MIN_DRUM_PITCHES,
    MIN_PART_BARS,
    band_measures,
    band_of_roles,
    band_summary,
    band_windows,
    plays_as_band,
)
from musicgen.tokenizers.groove import GrooveTokenizer

__all__ = [
    "MAX_NOTE_BARS",
    "MEASURES",
    "MIN_DRUM_PITCHES",
    "MIN_PART_BARS",
    "band_measures",
    "band_of_roles",
    "band_summary",
    "band_windows",
    "folder_band",
    "plays_as_band",
]


def folder_band(
    folder: str | Path, bars: int | None = None, windows: bool = False
) -> tuple[list[dict], list[dict]]:
    """Per-piece rows (with `path`; `window` too with `windows`) of every MIDI file of a folder,
    and the skipped files with the reason. `windows` needs `bars`."""
    if windows and bars is None:
        raise MusicgenError("band windows: need a number of bars")
    tok = GrooveTokenizer()
    rows, skipped = [], []
    for path in tqdm(midi_files(folder), desc=f"band {Path(folder).name}", leave=False):
        try:
            if windows:
                found = band_windows(path, bars, tok)
                rows += [{"path": str(path), "window": i, **r} for i, r in enumerate(found)]
            else:
                rows.append({"path": str(path), **band_measures(path, bars, tok)})
        except MusicgenError as exc:
            skipped.append({"path": str(path), "reason": str(exc)})
    return rows, skipped
