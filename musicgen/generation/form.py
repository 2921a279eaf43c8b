"""Form control: a song's phrases forced as section tokens while the model writes the music.

A form (`i4A8B8A8o4`, tokenizers.form) lays phrases end to end from the first bar. The wrapped
grammar writes, right after the `Bar` that opens a phrase, its `Section_<label>` and
`SectionBars_<n>` tokens, forbids phrase tokens anywhere else, and ends the song after the
form's last bar (no further `Bar`: the end token closes it), as the training songs end after
their outro. When sampling, the song does not end before the form's last bar, and a bar of a
melodic phrase (upper-case label) does not close before its melody sounds
(`generation.melody.MelodyDue`). A prompt is the form's first bars: its ids get their phrase
tokens before it is fed. `auto` draws one of the training songs' forms kept in the model folder
(`forms.json`); a path reads POP909's `human_label*.txt`. See docs/generation.md, "Form control".
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.generation.melody import MelodyDue
from musicgen.generation.progression import Progression, parse_progression
from musicgen.generation.sample import GrammarWrap
from musicgen.io import Unreadable, read_regular
from musicgen.tokenizers.base import Grammar, Tokenizer
from musicgen.tokenizers.form import Phrase, Section, form_text, parse_form, place

FORMS_FILE = "forms.json"  # the training songs' forms, beside a model's weights
MAX_FORM_BARS = 256
MAX_FORM_BYTES = 1 << 16


def read_form_arg(form: str | Path) -> list[Phrase] | str:
    """A request's `form`: phrases from text or a label file, or "auto" (drawn later, from the
    model's forms). Checked here, before a model is loaded."""
    if isinstance(form, str) and len(form) > MAX_FORM_BYTES:  # before parsing: at once
        raise MusicgenError(f"form: {len(form):,} characters, more than the {MAX_FORM_BYTES:,}")
    if isinstance(form, Path) or (isinstance(form, str) and _names_file(form)):
        path = Path(form)
        try:
            text = read_regular(path, MAX_FORM_BYTES, "a form file").decode("utf-8")
        except (Unreadable, UnicodeDecodeError) as exc:
            raise MusicgenError(f"{path}: cannot read the form ({exc})") from None
        return _bounded(parse_form(text.splitlines()[0] if text.strip() else "", str(path)))
    if not isinstance(form, str):
        raise MusicgenError(f"form: give a form like 'i4A8B8o4', 'auto' or a file, got {form!r}")
    if form.strip().lower() == "auto":
        return "auto"
    return _bounded(parse_form(form, "form"))


def _names_file(form: str) -> bool:
    """A form text that names a file (a label file, or any path: `/dev/zero` is refused as one,
    not parsed as a form)."""
    return form.lower().endswith(".txt") or "/" in form or "\\" in form


def _bounded(phrases: list[Phrase]) -> list[Phrase]:
    total = sum(p.bars for p in phrases)
    if total > MAX_FORM_BARS:
        raise MusicgenError(f"form: {total} bars, more than the {MAX_FORM_BARS} allowed")
    return phrases


def model_forms(folder: Path) -> list[str]:
    """The forms kept in a model folder (`forms.json`: the training songs' forms)."""
    path = folder / FORMS_FILE if folder.is_dir() else folder.parent / FORMS_FILE
    try:
        forms = json.loads(read_regular(path, 1 << 22, "a forms file"))
    except (Unreadable, ValueError) as exc:
        raise MusicgenError(f"form auto: {path}: no forms to draw from ({exc})") from None
    if not isinstance(forms, list) or not all(isinstance(f, str) for f in forms) or not forms:
        raise MusicgenError(f"form auto: {path}: must be a list of forms like 'i4A8o4'")
    return forms


def draw_form(forms: Sequence[str], seed: int) -> list[Phrase]:
    """One of `forms`, drawn from the request's seed (the same seed, the same form)."""
    rng = np.random.default_rng(seed)
    return parse_form(forms[int(rng.integers(len(forms)))], "form auto")


def resolve(form, folder: Path, seed: int) -> list[Phrase]:
    """The phrases of a request's checked `form` (`read_form_arg`), `auto` drawn."""
    return draw_form(model_forms(folder), seed) if form == "auto" else form


class FormGrammar(Grammar):
    """The tokenizer's grammar with a form's phrase tokens forced (module doc), through the
    tokenizer's `section_ids`, `section_mask` and `bar_start_ids`."""

    def __init__(
        self, base: Grammar, tokenizer: Tokenizer, sections: list[Section], prompt_ids
    ) -> None:
        self.base = base
        self._phrase = tokenizer.section_mask()
        self._bar_ids = frozenset(tokenizer.bar_start_ids())
        self._eos = tokenizer.eos_id
        self._opens = {s.bar: tokenizer.section_ids(s.label, s.bars, density=s.density)
                       for s in sections}  # fmt: skip
        self._last_bar = max(s.bar + s.bars for s in sections) - 1
        self.bar = sum(int(t) in self._bar_ids for t in prompt_ids) - 1  # the current bar
        self.pending: list[int] = []
        written = tokenizer.sections(list(prompt_ids))
        if (
            prompt_ids
            and int(prompt_ids[-1]) in self._bar_ids
            and self.bar not in {s.bar for s in written}
        ):
            self.pending = list(self._opens.get(self.bar, []))
        self._own_errors = 0
        melodic = {b for s in sections if s.label.isupper() for b in range(s.bar, s.bar + s.bars)}
        has_melody = tokenizer.melody_pitches() is not None
        self._due = MelodyDue(tokenizer, melodic, list(prompt_ids)) if has_melody else None
        self._bar_array = np.array(sorted(self._bar_ids), np.int64)
        self._eos_array = np.array([self._eos], np.int64)
        self._before_end = np.ones(len(self._phrase), bool)
        self._before_end[self._eos] = False

    @property
    def errors(self) -> int:
        return self.base.errors + self._own_errors

    @property
    def position(self) -> int:
        return self.base.position

    def place(self, mask: np.ndarray, position: int, token_id: int) -> np.ndarray:
        return self.base.place(mask, position, token_id)

    def bonus(self) -> np.ndarray | None:
        return self.base.bonus()

    def sampling_mask(self) -> np.ndarray | None:
        """The inner grammar's; no end before the form's last bar; no closing a melodic bar
        before its melody sounds (`MelodyDue`)."""
        masks = [self.base.sampling_mask(), self._due.mask() if self._due is not None else None]
        if self.bar < self._last_bar:
            masks.append(self._before_end)
        masks = [m for m in masks if m is not None]
        return np.logical_and.reduce(masks) if masks else None

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The inner grammar's; in the form's last bar, a `Bar` the model wants is the song's
        end (masked, its probability would otherwise pile notes onto the bar's last onset)."""
        out = list(self.base.redirects())
        if self.bar >= self._last_bar:
            out.append((self._bar_array, self._eos_array))
        return out

    def allowed(self) -> np.ndarray:
        mask = self.base.allowed()
        if self.pending:
            one = np.zeros_like(mask)
            one[self.pending[0]] = True
            return one
        mask &= ~self._phrase
        if self.bar >= self._last_bar:  # the form's last bar: the song ends, no new bar
            for b in self._bar_ids:
                mask[b] = False
            if not mask.any():
                mask[self._eos] = True
        return mask

    def advance(self, token_id: int) -> bool:
        token_id = int(token_id)
        mine = bool(self.allowed()[token_id]) if 0 <= token_id < len(self._phrase) else False
        ok = self.base.advance(token_id)
        if self._due is not None:
            self._due.push(token_id)
        if ok and not mine:
            self._own_errors += 1
        if token_id in self._bar_ids:
            self.bar += 1
            self.pending = list(self._opens.get(self.bar, []))
        elif self.pending and token_id == self.pending[0]:
            self.pending.pop(0)
        return ok and mine

    def finished(self) -> bool:
        return self.base.finished()

    def completion(self) -> list[int]:
        """The phrase tokens still due, then what closes the inner grammar after them (a
        vocabulary with densities wants one after a phrase's length)."""
        if not self.pending:
            return self.base.completion()
        after = copy.deepcopy(self.base)
        for tok in self.pending:
            after.advance(tok)
        return self.pending + after.completion()


def form_wrap(tokenizer: Tokenizer, phrases: list[Phrase]) -> GrammarWrap:
    """The `grammar_wrap` that forces `phrases` from the song's first bar."""
    sections = place(phrases)
    for s in sections:
        tokenizer.section_ids(s.label, s.bars, density=s.density)  # one the model lacks: now

    def wrap(grammar: Grammar, prompt_ids: list[int]) -> Grammar:
        return FormGrammar(grammar, tokenizer, sections, prompt_ids)

    return wrap


def with_form(tokenizer: Tokenizer, ids: list[int], phrases: list[Phrase]) -> list[int]:
    """A prompt's ids with the phrase tokens of the form's bars it holds (none where it has
    some already). A bar the prompt's last id opens (its lead-in) is the first new bar: its
    tokens are the grammar's to force."""
    if tokenizer.sections(ids):
        return list(ids)
    bars = set(tokenizer.bar_start_ids())
    held = sum(int(t) in bars for t in ids) - int(bool(ids) and int(ids[-1]) in bars)
    return tokenizer.insert_sections(list(ids), [s for s in place(phrases) if s.bar < held])


SECTION_CHORDS = re.compile(r"(?:^|;)\s*([A-Za-z])\s*:\s")  # "A: C G Am F; B: F G C Am"


@dataclass(frozen=True)
class SectionChords:
    """A progression per phrase label (`"A: C G Am F; B: F G C Am"`), laid over a form."""

    by_label: dict[str, Progression]

    def over(self, phrases: list[Phrase]) -> Progression:
        """The song's chords: each phrase takes its label's progression from its first bar;
        every label of the form needs one, and every label given is the form's."""
        bars = []
        for p in phrases:
            prog = self.by_label.get(p.label)
            if prog is None:
                given = ", ".join(sorted(self.by_label))
                raise MusicgenError(
                    f"chords: no progression for the form's phrase '{p.label}' (given: {given})"
                )
            bars += [prog.from_bar(k).bars[0] for k in range(p.bars)]
        extra = sorted(set(self.by_label) - {p.label for p in phrases})
        if extra:
            raise MusicgenError(
                f"chords: phrase '{extra[0]}' is not in the form {form_text(phrases)}"
            )
        return Progression(tuple(bars), repeat=False, strict=True)


def parse_section_chords(text: str) -> SectionChords | None:
    """`"A: C G Am F; B: F G C Am"` -> a progression per label; None for a text without
    `label:` parts (a plain progression)."""
    if not SECTION_CHORDS.search(text):
        return None
    parts = [x.strip() for x in text.split(";") if x.strip()]
    by_label: dict[str, Progression] = {}
    for part in parts:
        label, sep, chords = part.partition(":")
        if not sep or len(label.strip()) != 1 or not label.strip().isalpha():
            raise MusicgenError(
                f"chords: '{part[:30]}' is not 'LABEL: chords' (e.g. 'A: C G Am F; B: F G C Am')"
            )
        if label.strip() in by_label:
            raise MusicgenError(f"chords: phrase '{label.strip()}' is given twice")
        by_label[label.strip()] = parse_progression(chords)
    return SectionChords(by_label)


def total_bars(phrases: list[Phrase]) -> int:
    return sum(p.bars for p in phrases)


__all__ = [
    "FORMS_FILE",
    "FormGrammar",
    "draw_form",
    "form_text",
    "form_wrap",
    "model_forms",
    "read_form_arg",
    "resolve",
    "total_bars",
    "with_form",
]
