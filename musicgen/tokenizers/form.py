"""A song's form: phrases with a label and a length in bars (`i4A8B8A8o4`).

The labels follow Dai, Zhang & Dannenberg's annotation of POP909 (2020): upper case for a phrase
with melody (A, B, C, ... the same letter for the same material), lower case for one without,
`i` and `o` for intro and outro, `x`/`X` for other phrases. The REMI tokenizer writes a phrase
as `Section_<label> SectionBars_<n>` right after the `Bar` where it starts (with densities, then
`SectionDensity_<k>`: how busy the phrase is, `density_level`); the form control
(generation.controls.form_plan, rules.form_control) forces those tokens; the data side
(data.pop909_structure) reads annotations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from musicgen.errors import MusicgenError

# the labels POP909's annotators used, in vocabulary order
SECTION_LABELS = ["i", "A", "B", "C", "D", "E", "b", "x", "X", "o"]
MAX_SECTION_BARS = 32  # a longer phrase is written as 32 bars (3 of POP909's 7,400 are longer)
FORM_RE = re.compile(r"([A-Za-z])(\d{1,9})(?:@(\d{1,9}))?")  # A8, or A8@3: density level 3
# notes a bar (every voice) where a phrase's density level goes up: the octiles of POP909's
# phrases, rounded (2,206 phrases of 173 aligned songs, every fourth of the 850: 12.6, 15.4,
# 17.8, 19.7, 22.1, 24.4, 27.2 notes a bar)
DENSITY_EDGES = (13, 15, 18, 20, 22, 25, 28)
DENSITY_LEVELS = len(DENSITY_EDGES) + 1  # SectionDensity_1 (sparsest) .. SectionDensity_8


@dataclass(frozen=True)
class Phrase:
    """One phrase of a form: its label (`A`, `b`, `i`, ...) and its length in bars."""

    label: str
    bars: int
    density: int | None = None  # its density level (1 .. DENSITY_LEVELS); None: the model's


@dataclass(frozen=True)
class Section:
    """A phrase placed on a score: it starts at bar `bar` (0-based, the score's own bars)."""

    bar: int
    label: str
    bars: int
    density: int | None = None  # its density level (1 .. DENSITY_LEVELS), where written


def density_level(notes_per_bar: float) -> int:
    """A phrase's density level, 1 (sparsest) to `DENSITY_LEVELS`, from its notes a bar."""
    return 1 + sum(notes_per_bar >= edge for edge in DENSITY_EDGES)


def parse_form(text: str, where: str = "form") -> list[Phrase]:
    """`i4A8B8o4` (or with densities, `i4@2A8@3B8@6o4`) -> phrases; anything else in the text
    is a one-line error."""
    text = text.strip()
    phrases = [
        Phrase(m.group(1), int(m.group(2)), int(m.group(3)) if m.group(3) else None)
        for m in FORM_RE.finditer(text)
    ]
    if not phrases or FORM_RE.sub("", text).strip():
        raise MusicgenError(
            f"{where}: not a form like 'i4A8B8A8o4' (a letter then a bar count per phrase), "
            f"got {text[:60]!r}"
        )
    for p in phrases:
        if p.bars < 1:
            raise MusicgenError(f"{where}: phrase {p.label}{p.bars} has no bars")
        if p.density is not None and not 1 <= p.density <= DENSITY_LEVELS:
            raise MusicgenError(
                f"{where}: phrase {p.label}{p.bars}@{p.density}: a density is 1 to {DENSITY_LEVELS}"
            )
    return phrases


def form_text(phrases: list[Phrase] | list[Section]) -> str:
    return "".join(f"{p.label}{p.bars}" + (f"@{p.density}" if p.density else "") for p in phrases)


def place(phrases: list[Phrase], first_bar: int = 0) -> list[Section]:
    """The phrases laid end to end from bar `first_bar`."""
    out, bar = [], first_bar
    for p in phrases:
        out.append(Section(bar, p.label, p.bars, p.density))
        bar += p.bars
    return out


def add_markers(score, sections: list[Section]) -> None:
    """Write each phrase as a MIDI marker ("A8") at its first bar (4/4), so a DAW and
    `musicgen render` show the form."""
    import symusic

    bar = 4 * score.ticks_per_quarter
    for s in sections:
        if s.bar < 0:  # phrase tokens before the first Bar (ids the grammar did not mask)
            continue
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
