"""Chord control, the request's side: a progression from the user checked for a model and
planned against the prompt (`chord_plan`); the rule that forces it while sampling, and favours
its chord tones, is `rules.chord_control`. A `Progression` (read in `controls.progression`) is
a list of bars with the chords given in them. The rules in full: docs/generation.md, "Chord
control".
"""

from __future__ import annotations

from musicgen.errors import MusicgenError
from musicgen.generation.rules import ChordPlan
from musicgen.generation.rules.chord_control import chord_id
from musicgen.tokenizers.base import Tokenizer

__all__ = [
    "ACCEPTED",
    "NO_CHORD_TOKENS",
    "NO_BARS",
    "MAX_PROGRESSION_BARS",
    "chords_unsupported",
    "check_chord_path",
    "PER_BAR",
    "Slot",
    "Progression",
    "read_chord",
    "parse_progression",
    "progression_from_chord_file",
    "progression_from_midi",
    "load_progression",
    "chord_events",
    "check_progression",
    "chord_id",
    "chord_plan",
]

from musicgen.generation.controls.progression import (  # re-exported: the controls' one import
    ACCEPTED,
    MAX_PROGRESSION_BARS,
    NO_BARS,
    NO_CHORD_TOKENS,
    PER_BAR,
    Progression,
    Slot,
    _check_chords,
    check_chord_path,
    chord_events,
    chords_unsupported,
    load_progression,
    parse_progression,
    progression_from_chord_file,
    progression_from_midi,
    read_chord,
)


def check_progression(tokenizer: Tokenizer, progression) -> Progression:
    """A progression read for this tokenizer and every chord of it checked, before any
    sampling: a tokenizer without chord tokens, an unknown symbol, a chord with no token."""
    _check_chords(tokenizer)
    prog = load_progression(progression, tokenizer)
    for bar in prog.bars:
        for slot in bar:
            chord_id(tokenizer, slot, prog.strict)
    return prog


def chord_plan(
    tokenizer: Tokenizer, chords, prompt, grammar: bool = True, form: bool = False
) -> ChordPlan:
    """The `chords=` of a generation request as the chord control's plan (`rules.ChordPlan`);
    `grammar`: whether it masks. A progression given as text starts with the first new bar; one
    from a file keeps the song's bars: from scratch it starts at its first bar with a chord (none:
    its first bar; at bar 0 under a `form`, whose bars it then is), continuing a prompt at the
    song's bar after the prompt (a progression laid over a form: the form's bar after it). A
    prompt cut inside a bar (`seconds`) leaves that bar's chord to the model."""
    if not grammar:
        raise MusicgenError("chords and grammar: chords need the grammar's masking, which is off")
    prog = check_progression(tokenizer, chords)
    if prog.repeat or (prompt is None and form):
        start = 0
    elif prompt is None:
        chorded = (k for k, bar in enumerate(prog.bars) if any(s.chord for s in bar))
        start = next(chorded, 0) if prog.song else 0
    else:
        start = prompt.bars + (prompt.first_bar if prog.song else 0)
    open_bar = prompt is None or prompt.first_allowed is None
    return ChordPlan(prog, start, force_open_bar=open_bar)
