"""Chord control: a progression from the user, forced as Chord tokens while the model writes notes.

A `Progression` (read in `generation.progression`) is a list of bars with the chords given in
them. `chord_grammar_wrap(tokenizer, progression)` wraps the tokenizer's grammar so that the
progression is written the way the training data write annotated chords: a Chord token where
the chord changes, right after its position, and no other Chord token; everything else stays the
model's choice, and the prompt's bars are never forced. Beside the mask, a soft rule adds `tones`
nats to each pitch of the sounding chord (`CHORD_TONE_NATS`, chosen by measurement), as a choice
among the pitches (`choice_bonus`): which pitch a note takes, not how many notes an onset gets.
The rules in full: docs/generation.md, "Chord control".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.generation.sample import GrammarWrap
from musicgen.limits import check_option
from musicgen.tokenizers.base import Grammar, Tokenizer

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
    "chord_grammar_wrap",
    "chord_id",
    "request_wrap",
    "ChordGrammar",
]

from musicgen.generation.progression import (  # re-exported: the chord control's one import
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

# the default of `chord_tones` (the request's, CLI `--chord-tones`), measured with
# scripts/experiments/chord_control.py (docs/generation.md): at 0 the recogniser finds the forced
# chord's root in 72-76 % of bars, at 2 in 88-90 % (the songs themselves: 85 %), with note time
# on chord tones near the songs' own 0.90; as a choice among the pitches it keeps the songs'
# notes per onset (scripts/experiments/chord_texture.py)
CHORD_TONE_NATS = 2.0

# --- forcing --------------------------------------------------------------------------------------


def chord_id(tokenizer: Tokenizer, slot: Slot, strict: bool) -> int | None:
    """The Chord token of a slot: the tokenizer's quality whose pitch set is the largest subset
    of the chord's (as for annotations: C:maj6 -> C:maj, C:9 -> C:7dom); None for `N`, and for
    a chord no quality fits (e.g. C5) unless `strict`, where that is an error."""
    if slot.chord is None:
        return None
    tok = tokenizer.chord_token(slot.chord.root, slot.chord.pitch_classes)
    if tok is None and strict:
        raise MusicgenError(
            f"chords: '{slot.label}' has no chord token in this model "
            f"(its qualities: {', '.join(tokenizer.chord_qualities())})"
        )
    return tok


class ChordGrammar(Grammar):
    """The tokenizer's grammar with a progression's Chord tokens forced (module doc), through
    the tokenizer's control interface (`chord_token`, `chord_mask`, `pitch_class_mask`,
    `bar_start_ids`) and the grammar's (`position`, `place`)."""

    def __init__(
        self,
        base: Grammar,
        tokenizer: Tokenizer,
        progression: Progression,
        prompt_ids: Sequence[int],
        start_bar: int = 0,
        force_open_bar: bool = True,
        tones: float = CHORD_TONE_NATS,
    ) -> None:
        self.base, self.tok, self.prog = base, tokenizer, progression
        self.tone_nats, self._tone_rows = float(tones), {}
        self.carried: frozenset[int] | None = None  # the tones sounding into this bar
        self.bar_tones: list[tuple[int, frozenset[int] | None]] = []  # (position, tones)
        self._chords = tokenizer.chord_mask()
        self._bar_ids = frozenset(tokenizer.bar_start_ids())
        self._per_bar = tokenizer.time_tables().positions_per_bar
        self.prog = progression.from_bar(start_bar)
        self.next_bar = 0  # the bar of `self.prog` that the next new bar takes
        self.current: int | None = None  # the chord sounding (the last forced one)
        self.pending: list[tuple[int, int]] = []  # (position, chord id) still to write this bar
        self.controlled = False  # inside a bar of the progression
        self._own_errors = 0
        self._pitches = tokenizer.pitch_class_mask(range(12))  # the group the tones choose in
        ends_open = len(prompt_ids) > 0 and int(prompt_ids[-1]) in self._bar_ids
        if ends_open and force_open_bar:  # the prompt's lead-in opened the first new bar
            self._open_bar()

    @property
    def errors(self) -> int:
        return self.base.errors + self._own_errors

    def _open_bar(self) -> None:
        slots = self.prog.bar(self.next_bar)
        self.next_bar += 1
        self.carried = self.bar_tones[-1][1] if self.bar_tones else self.carried
        self.pending, self.controlled, self.bar_tones = [], slots is not None, []
        for slot in slots or ():
            tok = chord_id(self.tok, slot, self.prog.strict)
            pos = min(int(round(slot.onset * self._per_bar)), self._per_bar - 1)
            if tok is not None and tok != self.current:
                self.pending = [p for p in self.pending if p[0] != pos] + [(pos, tok)]
            self.current = tok
            self.bar_tones.append((pos, None if slot.chord is None else slot.chord.tones))

    def bonus(self) -> np.ndarray | None:
        """The inner grammar's bonus: the chord tones' is a choice (`choice_bonus`)."""
        return self.base.bonus()

    def sampling_mask(self) -> np.ndarray | None:
        return self.base.sampling_mask()

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return self.base.redirects()

    def choice_bonus(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(nats, group): `tones` nats on the Pitch ids of the chord sounding now (bars of the
        progression), chosen among all Pitch ids: the sampler keeps the Pitch ids' total
        probability (`filters.choose_within`), so the chord picks which pitch a note takes, not
        whether another note joins the onset."""
        if not self.controlled or self.tone_nats == 0:
            return None
        tones, pos = self.carried, max(self.base.position, 0)  # no Position yet: 0
        for at, pcs in self.bar_tones:
            tones = pcs if at <= pos else tones
        if tones is None:
            return None
        if tones not in self._tone_rows:
            hit = self.tok.pitch_class_mask(tones)
            self._tone_rows[tones] = np.where(hit, self.tone_nats, 0.0).astype(np.float32)
        return self._tone_rows[tones], self._pitches

    def allowed(self) -> np.ndarray:
        mask = self.base.allowed()
        if not self.controlled:
            return mask
        mask &= ~self._chords
        if not self.pending:
            return mask
        at, tok = self.pending[0]
        return self.base.place(mask, at, tok)

    def advance(self, token_id: int) -> bool:
        token_id = int(token_id)
        mine = 0 <= token_id < len(self._chords) and bool(self.allowed()[token_id])
        ok = self.base.advance(token_id)
        if ok and not mine:
            self._own_errors += 1
        if not 0 <= token_id < len(self._chords):
            return False
        if token_id in self._bar_ids:
            self._open_bar()
        elif self.pending and token_id == self.pending[0][1] and self._chords[token_id]:
            self.pending.pop(0)
        return ok and mine

    def finished(self) -> bool:
        return self.base.finished()

    def completion(self) -> list[int]:
        return self.base.completion()


def chord_grammar_wrap(
    tokenizer: Tokenizer,
    progression: Progression | str | Sequence[str],
    start_bar: int = 0,
    force_open_bar: bool = True,
    tones: float = CHORD_TONE_NATS,
) -> GrammarWrap:
    """The `grammar_wrap` that forces `progression` (its bar `start_bar` on the first bar written
    after the prompt). `force_open_bar=False` leaves the bar the prompt ends in alone (a prompt
    cut inside a bar); `tones`: the chord-tone bonus in nats (module doc). Checked here, before
    any sampling: a tokenizer without chord tokens, an unknown symbol, a chord with no token,
    a negative `tones`."""
    _check_chords(tokenizer)
    prog = load_progression(progression, tokenizer)
    if start_bar < 0:
        raise MusicgenError(f"start_bar: must be >= 0, got {start_bar}")
    tones = check_option("chord_tones", tones, "tones")
    for bar in prog.bars:
        for slot in bar:
            chord_id(tokenizer, slot, prog.strict)

    def wrap(grammar: Grammar, prompt_ids: list[int]) -> Grammar:
        return ChordGrammar(grammar, tokenizer, prog, prompt_ids, start_bar, force_open_bar, tones)

    return wrap


def request_wrap(
    tokenizer: Tokenizer,
    chords,
    prompt,
    tones: float = CHORD_TONE_NATS,
    grammar: bool = True,
    other: GrammarWrap | None = None,
) -> GrammarWrap:
    """The `chords=` of a generation request as a grammar_wrap (the caller's own `other` wrap,
    if any, applied over it); `tones`: the request's chord-tone bonus, `grammar`: whether it
    masks. A progression given as text starts with the first new bar, one laid over a form
    (`form.SectionChords`) at the form's bar after the prompt; one from a file keeps the song's
    bars: from scratch it starts at its first bar with a chord (none: its first bar),
    continuing a prompt at the song's bar after the prompt. A prompt cut inside a bar
    (`seconds`) leaves that bar's chord to the model."""
    if not grammar:
        raise MusicgenError("chords: needs the grammar (grammar=False turns off the masking)")
    prog = load_progression(chords, tokenizer)
    if prog.repeat:
        start = 0
    elif prompt is None:
        chorded = (k for k, bar in enumerate(prog.bars) if any(s.chord for s in bar))
        start = next(chorded, 0) if prog.song else 0
    else:
        start = prompt.bars + (prompt.first_bar if prog.song else 0)
    open_bar = prompt is None or prompt.first_allowed is None
    wrap = chord_grammar_wrap(tokenizer, prog, start, force_open_bar=open_bar, tones=tones)
    if other is None:
        return wrap
    return lambda grammar, ids: other(wrap(grammar, ids), ids)
