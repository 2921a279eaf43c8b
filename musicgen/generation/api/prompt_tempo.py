"""A prompt's tempo: the qpm in effect where its first bar begins on the tokenizer's grid
(`tempo_at_bar`), refused outside `PROMPT_QPM` (`prompt_tempo`); `bar_ticks`, a bar's length.
Re-exported by `generation.api.prompt`."""

from __future__ import annotations

from pathlib import Path

import symusic

from musicgen.errors import MusicgenError


def bar_ticks(tpq: int, beats: int = 4) -> int:
    return int(tpq) * int(beats)


DEFAULT_QPM = 120.0  # MIDI's tempo where a file sets none
PROMPT_QPM = (20.0, 500.0)  # a prompt's tempo: slower would make hours of a few bars


def tempo_at_bar(
    path: str | Path, bar: int, beats: int = 4, from_first_note: bool = False
) -> float:
    """The tempo (qpm) in effect where bar `bar` begins on the tokenizer's grid: `beats` quarters
    per bar, whatever time signatures the file declares (the tokenizers ignore them), counted from
    tick 0 (REMI) or, with `from_first_note` (groove), from the bar of the first note; MIDI's
    120 where the file sets no tempo."""
    score = symusic.Score(str(path))
    if len(score.tempos) == 0:
        return DEFAULT_QPM
    length = bar_ticks(score.ticks_per_quarter, beats)
    origin = 0
    if from_first_note:
        onsets = [t.notes[0].time for t in score.tracks if len(t.notes)]
        origin = min(onsets) // length * length if onsets else 0
    tick = origin + bar * length
    qpm = score.tempos[0].qpm
    for t in score.tempos:
        if t.time <= tick:
            qpm = t.qpm
    return float(qpm)


def prompt_tempo(path: Path, bar: int, beats: int = 4, from_first_note: bool = False) -> float:
    """`tempo_at_bar`, the tempo the written piece plays at, refused outside `PROMPT_QPM`: a
    tempo event of FF FF FF (16.7 s a beat) would turn 8 bars into 9 minutes of audio."""
    qpm = tempo_at_bar(path, bar, beats, from_first_note)
    low, high = PROMPT_QPM
    if not low <= qpm <= high:
        raise MusicgenError(
            f"{path}: tempo {qpm:.4g} bpm where the prompt begins (bar {bar}) is outside "
            f"{low:g}..{high:g} bpm; refused (the piece would be written at that tempo)"
        )
    return qpm
