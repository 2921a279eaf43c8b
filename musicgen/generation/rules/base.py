"""The one shape of a sampling rule (`Rule`) and of a sampling option (`Option`).

A rule follows one sequence while it is written: it starts from the tokenizer, the request's
options and controls and the prompt (`Start`), takes each new id (`push`, constant work: no
rescans), and offers effects the sampler composes (`decoding.steer.Steered`): `force` (a hard
narrowing that counts as the grammar), `mask` (a soft narrowing, kept only where it leaves an
id), `bonus` (nats added), `choice` (nats that choose inside a group, `filters.choose_within`),
`redirects` (mass moved from forbidden ids to the ids they mean) and `due` (ids owed before the
grammar's completion). Each effect defaults to none, so a rule says only what it does. A rule
that follows the bars and positions reads them from a `BarClock`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from musicgen.limits import Range
from musicgen.tokenizers.base import Grammar, TimeTables, Tokenizer
from musicgen.tokenizers.form import Section


@dataclass(frozen=True)
class Need:
    """What a model must have for an option to act: `what` names it in the refusal ("a melody
    voice"), `has` tells whether a tokenizer has it."""

    what: str
    has: Callable[[Tokenizer], bool]


MELODY_VOICE = Need("melody voice", lambda t: t.melody_pitches() is not None)


@dataclass(frozen=True)
class Option:
    """One sampling option, declared once: every surface (the API, the CLI, a config's
    `sample:`, the studio, the evaluate sweep, the cards) is derived from it. `studio`: the
    page shows it (`words`: "Label: what it does to the music." there; `slider`: (low, high,
    step), else a number box);
    `short`: its label in sweep tables; `card`: its words in a model card's and the demo's
    sampling line, a format of its value ("top-k {}"), shown where the value is not the default
    (`card_always`: whatever it is); `needs`: the request field without which it does nothing
    (a value given without it is an error); `model`: what the model must have for it to act (a
    value other than the default on a model without it is an error)."""

    name: str
    default: Any
    range: Range | None
    help: str
    kind: type = float
    studio: bool = False
    words: str = ""
    slider: tuple[float, float, float] | None = None
    short: str = ""
    card: str = ""
    card_always: bool = False
    needs: str = ""
    model: Need | None = None
    paper: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class ChordPlan:
    """The chord control of a request: its progression (`progression.Progression`), the bar
    of it the first new bar takes, and whether a prompt's open last bar is forced too."""

    progression: Any
    start_bar: int = 0
    force_open_bar: bool = True


@dataclass(frozen=True)
class Controls:
    """What a request forces, resolved before sampling: the form's phrases placed from the
    first bar (`tokenizers.form.Section`) and the chords."""

    sections: tuple[Section, ...] = ()
    chords: ChordPlan | None = None


@dataclass
class Start:
    """What a rule starts from, per sequence: the row's grammar is advanced over `ids` (the
    prompt, or the ids so far where a row is rebuilt after a bar cut)."""

    tokenizer: Tokenizer
    options: Any  # the resolved `SamplingOptions`
    controls: Controls
    ids: list[int]
    grammar: Grammar = field(repr=False, default=None)

    def value(self, option: Option) -> Any:
        """The request's value of a rule's option."""
        return getattr(self.options, option.name)


class Rule:
    """A rule's effects, all none by default (module doc). A subclass sets `option` (or none)
    and `start`, which returns None where the rule has nothing to do for the sequence."""

    option: ClassVar[Option | None] = None
    control: ClassVar[bool] = False  # a `force` that counts as the grammar (an error if broken)

    @classmethod
    def start(cls, at: Start) -> Rule | None:
        raise NotImplementedError

    def push(self, tok: int) -> None:
        """Take the id just written."""

    def force(self, mask: np.ndarray) -> np.ndarray:
        """The ids that may come next, narrowed from `mask` (a copy the rule may change)."""
        return mask

    def mask(self) -> np.ndarray | None:
        """bool[V]: the ids the rule lets come next; None: no narrowing."""
        return None

    def bonus(self) -> np.ndarray | None:
        """float32[V]: nats added after the temperature; None: none."""
        return None

    def choice(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(nats float32[V], group bool[V]): nats that choose inside the group; None: none."""
        return None

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(source ids, target ids) pairs: a source's mass is the targets'."""
        return []

    def due(self) -> list[int]:
        """Ids the rule still owes, written before the grammar's completion."""
        return []


class BarClock:
    """A row's bar and its position in it, followed id by id from the tokenizer's time tables
    (`Tokenizer.time_tables`): an id that opens a bar starts the next one at position 0, a
    Position id moves within it. `bar` is -1 before the first bar opens. Constant work per id."""

    def __init__(self, tt: TimeTables) -> None:
        self.opens_bar = tt.bar.astype(bool)
        self._position = np.where(self.opens_bar, -1, tt.position)  # Position_p: p
        self.per_bar, self.per_beat = tt.positions_per_bar, tt.positions_per_beat
        self.bar, self.pos = -1, 0

    def push(self, tok: int) -> bool:
        """Take an id of the vocabulary; whether it was a clock id (a bar opened, a position)."""
        if self.opens_bar[tok]:
            self.bar, self.pos = self.bar + 1, 0
            return True
        if self._position[tok] >= 0:
            self.pos = int(self._position[tok])
            return True
        return False

    def now(self) -> int:
        """Positions from the first bar's start to the current position."""
        return self.bar * self.per_bar + self.pos

    def at_last_position(self) -> bool:
        """Whether the current position is the bar's last."""
        return self.pos == self.per_bar - 1
