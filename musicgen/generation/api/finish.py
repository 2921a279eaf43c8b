"""How a written piece sounds, after sampling: a tempo held through it, a transposition, the
instruments of its tracks, its chords as markers (`chord_marks`). The request's `tempo`,
`transpose` and `melody_program` fields (`generation.api.request`) act here, once, for `generate`,
`continue` (`--extend` too), the API and the studio; none of them changes what the model is fed
or samples.

The melody's default instrument is General MIDI program 73 (0-based; "Flute", 74 in the GM
list's 1-based numbering): a breathy, sustained lead in the singing range that articulates each
note, so the tune is heard as a voice over the piano (program 0). A sawtooth lead (81) cuts
through as hard as a synthesizer; a choir (52) smears the notes together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import symusic

from musicgen.errors import MusicgenError
from musicgen.generation.api.chord_marks import add_chord_marks, transpose_marks
from musicgen.generation.api.written import PIANO_NAMES
from musicgen.measures.song import MELODY_NAME

if TYPE_CHECKING:
    from musicgen.generation.api.prompt import Prompt
    from musicgen.generation.api.request import GenerationRequest
    from musicgen.tokenizers.base import Tokenizer

LEAD_PROGRAM = 73  # General MIDI "Flute" (0-based): the melody's instrument by default
PIANO_PROGRAM = 0  # "Acoustic Grand Piano"


def hold_tempo(score: symusic.Score, qpm: float | None) -> symusic.Score:
    """One tempo, `qpm`, from time 0 to the end (in place): a set tempo is held, so the
    prompt's or the model's tempo changes go. None leaves the score's tempos as they are."""
    if qpm is None:
        return score
    score.tempos.clear()
    score.tempos.append(symusic.Tempo(0, float(qpm)))
    return score


def transpose(score: symusic.Score, semitones: int | None) -> symusic.Score:
    """Every pitched note (drum tracks untouched) and chord marker moved `semitones` (in
    place); a note that would leave MIDI's 0..127 is a one-line error and nothing is moved."""
    if not semitones:
        return score
    pitched = [t for t in score.tracks if not t.is_drum]
    pitches = [n.pitch for t in pitched for n in t.notes]
    if pitches and not 0 <= min(pitches) + semitones <= max(pitches) + semitones <= 127:
        low, high = min(pitches), max(pitches)
        raise MusicgenError(
            f"transpose: {semitones:+d} semitones would move the piece's notes ({low}..{high}) "
            "outside MIDI's 0..127; give a smaller shift"
        )
    for track in pitched:
        for note in track.notes:
            note.pitch += semitones
    transpose_marks(score, semitones)
    return score


def set_programs(score: symusic.Score, melody: int | None, keep: bool = False) -> symusic.Score:
    """The Melody track (named so: musicgen's reader finds it by name) on program `melody`
    (None: `LEAD_PROGRAM`), the Piano track on the piano (in place). With `keep` (a file
    extended as it was), a track keeps its program unless `melody` is given."""
    for track in score.tracks:
        name = track.name.strip().lower()
        if track.is_drum:
            continue
        if name == MELODY_NAME and not (keep and melody is None):
            track.program = LEAD_PROGRAM if melody is None else int(melody)
        elif name in PIANO_NAMES and not keep:
            track.program = PIANO_PROGRAM
    return score


def finish(
    score: symusic.Score,
    request: GenerationRequest,
    keep: bool = False,
    written: tuple[Tokenizer, Sequence[int], Prompt | None] | None = None,
) -> None:
    """The request's sound on a written score (in place): the chords the ids write as markers
    (`written`: the tokenizer, the ids that decode to the score and the prompt whose file's
    chord markers it keeps, `chord_marks.add_chord_marks`), its instruments
    (`set_programs`), transposition (chord markers too) and held tempo. `keep`: the score is a
    file extended as it was."""
    if written is not None:
        add_chord_marks(score, *written)
    set_programs(score, request.melody_program, keep)
    transpose(score, request.transpose)
    hold_tempo(score, request.tempo)
