"""A generated piece (`Music`): its score, the ids that decode to it, how sampling ended, and
the ways out (MIDI, audio, piano roll)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.generation.api.write import write_midi


def apply_tempo(score: symusic.Score, tempo: float | None) -> symusic.Score:
    """`tempo` (qpm) replaces whatever the score sets at time 0; later changes are kept."""
    if tempo is None:
        return score
    later = [t for t in score.tempos if t.time > 0]
    score.tempos.clear()
    score.tempos.append(symusic.Tempo(0, float(tempo)))
    for t in later:
        score.tempos.append(t)
    return score


@dataclass
class Music:
    """One generated piece: its score, ids (which decode to it, the melody's legato aside:
    `generation.api.legato`) and how sampling ended."""

    score: symusic.Score
    ids: list[int]
    prompt_len: int = 1
    stop: str = ""  # end | max_tokens | bars
    sampled: int = 0
    errors: int = 0
    seed: int | None = None
    extra: dict = field(default_factory=dict, repr=False)
    new_notes: int | None = None  # notes of the new part (after the prompt); None: not counted

    def save(self, path: str | Path) -> Path:
        """Write the piece as a MIDI file (replaced if it exists)."""
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise MusicgenError(f"path: give the MIDI file's path, got {path!r}")
        return write_midi(self.score, path)

    def to_score(self) -> symusic.Score:
        """A copy of the piece as a symusic Score."""
        return self.score.copy()

    def piano_roll(self, steps_per_beat: int = 4) -> np.ndarray:
        """[128, T] max velocity of the notes sounding at each step (all tracks, drums too)."""
        score = self.score.to("quarter")
        end = max((n.time + n.duration for t in score.tracks for n in t.notes), default=0.0)
        roll = np.zeros((128, int(np.ceil(end * steps_per_beat))), dtype=np.uint8)
        for track in score.tracks:
            for n in track.notes:
                a = int(round(n.time * steps_per_beat))
                b = max(int(round((n.time + n.duration) * steps_per_beat)), a + 1)
                roll[n.pitch, a:b] = np.maximum(roll[n.pitch, a:b], n.velocity)
        return roll

    def save_audio(self, path: str | Path) -> Path:
        """Synthesize the piece to .wav (or .ogg / .mp3) (`render.synthesize`)."""
        from musicgen.generation.api.render import synthesize

        return synthesize(self.score, path)
