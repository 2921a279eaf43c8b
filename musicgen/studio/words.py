"""The page in a musician's words: every control's label and its one line of help, the song
sections by name (the form's letters are the library's, never shown as such), and the terms a
musician would not know (`JARGON`), which a test holds every visible label to.

No Gradio here: the labels and the form builder are plain functions, tested without a page.
"""

from __future__ import annotations

import re

from musicgen.errors import MusicgenError
from musicgen.generation.api.options import OPTIONS
from musicgen.tokenizers.form import MAX_SECTION_BARS, Phrase, form_text, parse_form

# Words a songwriter does not use: the sampler's, the tokenizer's, the form's letters.
JARGON = (
    "greedy", "top-k", "top-p", "top k", "top p", "nats", "seed", "prompt", "midi pitch",
    "harte", "third", "token", "temperature", "logit", "sampling", "nucleus",
)  # fmt: skip
FORM_LETTERS = re.compile(r"\b[ioX]\d+\b|\bi/o\b|'[ioxX]'")  # i4, o4, X8, 'i' (x2: a repeat)

# The sampling widgets: (label, what it does to the music), by option name, from each option's
# declaration (`Option.words`: "Label: what it does.").
SAMPLING = {n: tuple(o.words.split(": ", 1)) for n, o in OPTIONS.items() if o.studio and o.words}
TAKE = ("Take number", "The same number makes the same piece again; -1: a new one each time.")

# The melody's instrument (General MIDI programs, 0-based), by name; the library's lead first.
MELODY_LABEL = "Melody instrument"
INSTRUMENTS = {
    "Flute": 73, "Voice Oohs": 53, "Sawtooth lead": 81, "Piano": 0, "Clarinet": 71,
    "Violin": 40, "Trumpet": 56, "Alto sax": 65, "Vibraphone": 11, "Choir": 52,
}  # fmt: skip
# Which part of an uploaded piece the model hears before the new bars (`inputs.prompt_length`).
MODES = [
    ("its end: keep it all and add bars", "end"),
    ("its opening, in bars", "bars"),
    ("its opening, in seconds", "seconds"),
]

# Section names by the form's letter (POP909's labels): the builder offers the first ones.
SECTIONS = {
    "i": "Intro", "A": "Verse", "B": "Chorus", "C": "Bridge", "D": "Part D", "E": "Part E",
    "b": "Interlude", "x": "Break", "X": "Other part", "o": "Outro",
}  # fmt: skip
BUILDER = ("Intro", "Verse", "Chorus", "Bridge", "Interlude", "Outro")
LETTER = {name: letter for letter, name in SECTIONS.items()}

FORM_LABEL = "Song form (the sections in order, with their bars)"
FORM_INFO = (
    "Add sections with the buttons above, or type 'auto' for the form of one of the songs the "
    "model learnt. A form sets the song's length. Chords may be given per section below "
    "(Verse: C G Am F; Chorus: F G C Am)."
)
DENSITY_INFO = " This model also takes how busy each section is (1 sparse to 8 full)."
CHORDS_LABEL = "Chords, one a bar"
CHORDS_INFO = (
    "e.g. Am F C G, or '|' between bars: C | G D; x2 at the end of a line plays it twice; "
    "per section with a form: Verse: C G Am F; Chorus: F G C Am"
)


def section_name(letter: str) -> str:
    """A form letter as a songwriter names the section ('A' -> 'Verse')."""
    return SECTIONS.get(letter, f"Part {letter}")


def form_info(densities: bool) -> str:
    """The form box's help: section densities only for a model that learnt them."""
    return FORM_INFO + (DENSITY_INFO if densities else "")


def add_section(form: str | None, name: str | None, bars) -> str:
    """The form box's text with section `name` of `bars` bars added at its end (the
    builder's Add button); a one-line error for a bad name or length."""
    if name not in LETTER:
        raise MusicgenError(f"section: choose one of {', '.join(BUILDER)}")
    if isinstance(bars, bool) or not isinstance(bars, (int, float)) or bars != int(bars):
        raise MusicgenError(f"section bars: must be a whole number, got {bars!r}")
    if not 1 <= int(bars) <= MAX_SECTION_BARS:
        raise MusicgenError(f"section bars: must be 1 to {MAX_SECTION_BARS}, got {int(bars)}")
    text = (form or "").strip()
    phrases = [] if not text or text.lower() == "auto" else parse_form(text, "form")
    return spaced(form_text([*phrases, Phrase(LETTER[name], int(bars))]))


def spaced(form: str) -> str:
    """'i4A8B8' as 'i4 A8 B8' (the form box's own spelling)."""
    return " ".join(m.group(0) for m in re.finditer(r"[A-Za-z]\d+(?:@\d+)?", form))


def named_form(form: str) -> str:
    """A form as a songwriter reads it: 'Intro 4, Verse 8, Chorus 8'."""
    return ", ".join(f"{section_name(p.label)} {p.bars}" for p in parse_form(form, "form"))


def section_letters(chords: str) -> str:
    """Chords per section as the page lets them be typed ('Verse: C G; Chorus: F') in the
    form's letters the library reads ('A: C G; B: F')."""
    names = "|".join(BUILDER)
    return re.sub(
        rf"(?i)(^|;)\s*({names})\s*:",
        lambda m: f"{m.group(1)} {LETTER[m.group(2).title()]}:".lstrip(),
        chords,
    )


def jargon_in(text: str) -> list[str]:
    """The terms of `JARGON` (and form letters such as 'i4') that `text` uses."""
    low = text.lower()
    found = [term for term in JARGON if re.search(rf"(?<![a-z]){re.escape(term)}", low)]
    return found + [m.group(0) for m in FORM_LETTERS.finditer(text)]
