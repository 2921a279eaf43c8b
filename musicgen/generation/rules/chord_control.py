"""Chord control as a rule: a progression's Chord tokens forced, and its chord tones favoured.

The progression is written the way the training data write annotated chords: a Chord token
where the chord changes, right after its position, and no other Chord token; the prompt's bars
are never forced (`force`, through the grammar's `position` and `place`). Beside it, a soft
rule adds `chord_tones` nats to each pitch of the sounding chord as a choice among the pitches
(`choice`, `filters.choose_within`): which pitch a note takes, not how many notes an onset
gets. The default is measured (docs/generation.md, "Chord control").
"""

from __future__ import annotations

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.generation.controls.progression import Progression, Slot
from musicgen.generation.rules.base import Option, Rule, Start
from musicgen.limits import Range
from musicgen.tokenizers.base import Grammar, Tokenizer

TONE_NATS = 2.0  # the chord tones' default, measured (docs/generation.md, "Chord control")


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


class ChordControl(Rule):
    """One sequence's place in the progression: the bar it takes next, the Chord tokens still
    due in this bar, and the tones sounding at each position of it."""

    option = Option(
        "chord_tones",
        TONE_NATS,
        Range(0.0, 100.0, note="nats; 0 = off"),
        f"with chords: nats for the pitches of the chord sounding (default {TONE_NATS:g})",
        needs="chords",
    )
    control = True

    def __init__(
        self, at: Start, progression: Progression, start_bar: int, force_open_bar: bool
    ) -> None:
        tokenizer = at.tokenizer
        self.grammar: Grammar = at.grammar
        self.tok, self.strict = tokenizer, progression.strict
        self.tone_nats, self._tone_rows = float(at.value(self.option)), {}
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
        self._pitches = tokenizer.pitch_class_mask(range(12))  # the group the tones choose in
        ends_open = len(at.ids) > 0 and int(at.ids[-1]) in self._bar_ids
        if ends_open and force_open_bar:  # the prompt's lead-in opened the first new bar
            self._open_bar()

    @classmethod
    def start(cls, at: Start) -> ChordControl | None:
        plan = at.controls.chords
        if plan is None:
            return None
        return cls(at, plan.progression, plan.start_bar, plan.force_open_bar)

    def _open_bar(self) -> None:
        slots = self.prog.bar(self.next_bar)
        self.next_bar += 1
        self.carried = self.bar_tones[-1][1] if self.bar_tones else self.carried
        self.pending, self.controlled, self.bar_tones = [], slots is not None, []
        for slot in slots or ():
            tok = chord_id(self.tok, slot, self.strict)
            pos = min(int(round(slot.onset * self._per_bar)), self._per_bar - 1)
            if tok is not None and tok != self.current:
                self.pending = [p for p in self.pending if p[0] != pos] + [(pos, tok)]
            self.current = tok
            self.bar_tones.append((pos, None if slot.chord is None else slot.chord.tones))

    def choice(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(nats, group): `chord_tones` nats on the Pitch ids of the chord sounding now (bars
        of the progression), chosen among all Pitch ids."""
        if not self.controlled or self.tone_nats == 0:
            return None
        tones, pos = self.carried, max(self.grammar.position, 0)  # no Position yet: 0
        for at, pcs in self.bar_tones:
            tones = pcs if at <= pos else tones
        if tones is None:
            return None
        if tones not in self._tone_rows:
            hit = self.tok.pitch_class_mask(tones)
            self._tone_rows[tones] = np.where(hit, self.tone_nats, 0.0).astype(np.float32)
        return self._tone_rows[tones], self._pitches

    def force(self, mask: np.ndarray) -> np.ndarray:
        """No Chord token but the progression's, each at its position."""
        if not self.controlled:
            return mask
        mask &= ~self._chords
        if not self.pending:
            return mask
        at, tok = self.pending[0]
        return self.grammar.place(mask, at, tok)

    def push(self, tok: int) -> None:
        if not 0 <= tok < len(self._chords):
            return
        if tok in self._bar_ids:
            self._open_bar()
        elif self.pending and tok == self.pending[0][1] and self._chords[tok]:
            self.pending.pop(0)
