"""The band measure: does a bass / drums / third-part piece play as a band?

A groove model can write valid ids and still let the drums carry the piece alone while the bass
and the third part hold one note for bars. Per piece (the groove tokenizer's roles: drums, bass,
the third part; times on its 12-ticks-per-beat grid, 4 beats a bar, from the first bar that has a
note):

- `drum_pitches`: distinct drum pitches;
- `bass_bars`, `third_bars`: share of bars in which a bass / third-part note sounds (starts or is
  held);
- `longest_note_bars`: the longest bass or third-part note, in bars (0 without any);
- `drum_hits_per_bar`: drum onsets per bar.

A piece plays as a band when drums sound on >= 3 pitches, bass and third part each in >= 75 % of
its bars and no bass or third-part note lasts over 2 bars; `band_share` is the share of pieces
that do. A piece spans the bars up to its last onset, or exactly `bars` bars when given. The
job that measures every MIDI file of a folder is `evaluate.band.folder_band`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import symusic

from musicgen.tokenizers.groove import GrooveTokenizer

MEASURES = ("drum_pitches", "bass_bars", "third_bars", "longest_note_bars", "drum_hits_per_bar")
MIN_DRUM_PITCHES = 3
MIN_PART_BARS = 0.75
MAX_NOTE_BARS = 2.0


def _sounding_share(notes: np.ndarray, tpb: int, n_bars: int) -> float:
    """Share of the `n_bars` bars in which some note of `notes` (onset, offset, ...) sounds."""
    if len(notes) == 0:
        return 0.0
    first = notes[:, 0] // tpb
    last = np.maximum(notes[:, 1] - 1, notes[:, 0]) // tpb
    marks = np.zeros(n_bars + 1, np.int64)
    np.add.at(marks, np.clip(first, 0, n_bars), 1)
    np.add.at(marks, np.clip(last + 1, 0, n_bars), -1)
    return float(np.mean(np.cumsum(marks)[:n_bars] > 0))


def plays_as_band(row: dict) -> bool:
    """The acceptance line for one piece (see the module docstring)."""
    return (
        row["drum_pitches"] >= MIN_DRUM_PITCHES
        and row["bass_bars"] >= MIN_PART_BARS
        and row["third_bars"] >= MIN_PART_BARS
        and row["longest_note_bars"] <= MAX_NOTE_BARS
    )


def band_of_roles(
    roles: list[np.ndarray], tpb: int, start_bar: int = 0, bars: int | None = None
) -> dict:
    """The measures of bars [start_bar, start_bar + bars) of (bass, drums, third) note arrays
    (onset, offset, pitch in ticks); notes are cut at the window's ends."""
    lo = start_bar * tpb
    hi = None if bars is None else lo + bars * tpb
    parts = []
    for notes in roles:
        keep = (notes[:, 0] >= lo) & (True if hi is None else notes[:, 0] < hi)
        part = notes[keep].copy()
        part[:, :2] -= lo
        if hi is not None:
            part[:, 1] = np.minimum(part[:, 1], hi - lo)
        parts.append(part)
    bass, drums, third = parts
    onsets = np.concatenate([p[:, 0] for p in parts])
    n_bars = bars if bars is not None else int(onsets.max()) // tpb + 1 if len(onsets) else 1
    pitched = np.concatenate([bass, third])
    row = {
        "bars": n_bars,
        "drum_pitches": len(np.unique(drums[:, 2])),
        "bass_bars": _sounding_share(bass, tpb, n_bars),
        "third_bars": _sounding_share(third, tpb, n_bars),
        "longest_note_bars": float((pitched[:, 1] - pitched[:, 0]).max() / tpb)
        if len(pitched)
        else 0.0,
        "drum_hits_per_bar": len(drums) / n_bars,
    }
    row["band"] = plays_as_band(row)
    return row


def band_measures(src: str | Path | symusic.Score, bars: int | None = None, tokenizer=None) -> dict:
    """The band measures of one piece (of its first `bars` bars when given)."""
    tok = tokenizer or GrooveTokenizer()
    return band_of_roles(tok.roles(src), tok.ticks_per_bar, 0, bars)


def band_windows(src: str | Path | symusic.Score, bars: int, tokenizer=None) -> list[dict]:
    """The measures of each consecutive whole `bars`-bar window of a song (none if shorter): a
    long real song read as the pieces a model writes."""
    tok = tokenizer or GrooveTokenizer()
    roles = tok.roles(src)
    tpb = tok.ticks_per_bar
    onsets = np.concatenate([r[:, 0] for r in roles])
    n_bars = int(onsets.max()) // tpb + 1
    return [band_of_roles(roles, tpb, s, bars) for s in range(0, n_bars - bars + 1, bars)]


def _spread(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, np.float64)
    if len(arr) == 0:
        return {"mean": float("nan"), "std": float("nan"), "min": float("nan"), "max": float("nan")}
    quart = np.percentile(arr, [25, 50, 75])
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": float(arr.min()),
        "q25": float(quart[0]),
        "median": float(quart[1]),
        "q75": float(quart[2]),
        "max": float(arr.max()),
    }


def band_summary(rows: list[dict]) -> dict:
    """Spread of each measure over the pieces, the share passing each criterion, `band_share`."""
    n = len(rows)
    share = lambda ok: float(np.mean(ok)) if n else float("nan")  # noqa: E731
    return {
        "pieces": n,
        "band_share": share([r["band"] for r in rows]),
        "criteria": {
            "drum_pitches": share([r["drum_pitches"] >= MIN_DRUM_PITCHES for r in rows]),
            "bass_bars": share([r["bass_bars"] >= MIN_PART_BARS for r in rows]),
            "third_bars": share([r["third_bars"] >= MIN_PART_BARS for r in rows]),
            "longest_note_bars": share([r["longest_note_bars"] <= MAX_NOTE_BARS for r in rows]),
        },
        "measures": {m: _spread([r[m] for r in rows]) for m in MEASURES},
    }
