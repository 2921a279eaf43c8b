"""A song's form: phrases with a label and a length in bars (`i4A8B8A8o4`).

The labels follow Dai, Zhang & Dannenberg's annotation of POP909 (2020): upper case for a phrase
with melody (A, B, C, ... the same letter for the same material), lower case for one without,
`i` and `o` for intro and outro, `x`/`X` for other phrases. The REMI tokenizer writes a phrase
as `Section_<label> SectionBars_<n>` right after the `Bar` where it starts; the form control
(generation.form) forces those tokens; the data side (data.pop909_structure) reads annotations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from musicgen.errors import MusicgenError

# the labels POP909's annotators used, in vocabulary order
SECTION_LABELS = ["i", "A", "B", "C", "D", "E", "b", "x", "X", "o"]
MAX_SECTION_BARS = 32  # a longer phrase is written as 32 bars (3 of POP909's 7,400 are longer)
FORM_RE = re.compile(r"([A-Za-z])(\d+)")


@dataclass(frozen=True)
class Phrase:
    """One phrase of a form: its label (`A`, `b`, `i`, ...) and its length in bars."""

    label: str
    bars: int


@dataclass(frozen=True)
class Section:
    """A phrase placed on a score: it starts at bar `bar` (0-based, the score's own bars)."""

    bar: int
    label: str
    bars: int


def parse_form(text: str, where: str = "form") -> list[Phrase]:
    """`i4A8B8o4` -> phrases; anything else in the text is a one-line error."""
    text = text.strip()
    phrases = [Phrase(m.group(1), int(m.group(2))) for m in FORM_RE.finditer(text)]
    if not phrases or FORM_RE.sub("", text).strip():
        raise MusicgenError(
            f"{where}: not a form like 'i4A8B8A8o4' (a letter then a bar count per phrase), "
            f"got {text[:60]!r}"
        )
    for p in phrases:
        if p.bars < 1:
            raise MusicgenError(f"{where}: phrase {p.label}{p.bars} has no bars")
    return phrases


def form_text(phrases: list[Phrase] | list[Section]) -> str:
    return "".join(f"{p.label}{p.bars}" for p in phrases)


def place(phrases: list[Phrase], first_bar: int = 0) -> list[Section]:
    """The phrases laid end to end from bar `first_bar`."""
    out, bar = [], first_bar
    for p in phrases:
        out.append(Section(bar, p.label, p.bars))
        bar += p.bars
    return out


def add_markers(score, sections: list[Section]) -> None:
    """Write each phrase as a MIDI marker ("A8") at its first bar (4/4), so a DAW and
    `musicgen render` show the form."""
    import symusic

    bar = 4 * score.ticks_per_quarter
    for s in sections:
        score.markers.append(symusic.TextMeta(s.bar * bar, f"{s.label}{s.bars}"))


def read_markers(score) -> list[Section]:
    """The phrases a score's markers name (`add_markers`); other markers are ignored."""
    bar = 4 * score.ticks_per_quarter
    out = []
    for m in score.markers:
        hit = FORM_RE.fullmatch(m.text.strip())
        if hit and hit.group(1) in SECTION_LABELS:
            out.append(Section(int(m.time) // bar, hit.group(1), int(hit.group(2))))
    return out
