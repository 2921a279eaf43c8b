"""Form control, the request's side: a form read, drawn or placed, and chords given per phrase.

A form (`i4A8B8A8o4`, tokenizers.form) lays phrases end to end from the first bar; the rules
force it while sampling (`rules.form_control`, and `rules.melody_due` for melodic phrases). A
prompt is the form's first bars: its ids get their phrase tokens before it is fed. `auto` draws
one of the training songs' forms kept in the model folder (`forms.json`); a path reads POP909's
`human_label*.txt`. See docs/generation.md, "Form control".
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.generation.controls.progression import Progression, parse_progression
from musicgen.io import Unreadable, read_regular
from musicgen.tokenizers.base import Tokenizer
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


def form_sections(tokenizer: Tokenizer, phrases: list[Phrase]) -> list[Section]:
    """The form's phrases placed from the song's first bar (`rules.FormControl` forces them),
    each phrase's tokens made where the model lacks one (checked here, before sampling)."""
    sections = place(phrases)
    for s in sections:
        tokenizer.section_ids(s.label, s.bars, density=s.density)
    return sections


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
    "draw_form",
    "form_sections",
    "form_text",
    "model_forms",
    "read_form_arg",
    "resolve",
    "total_bars",
    "with_form",
]
