"""The page's song controls without the page: the chord and form boxes (which models show them,
what they may send, how a form sets a job's length), their preview bar by bar, and progress.

A form (`i4 A8 B8 A8 o4`, or `auto`) goes to the API's `form=` (docs/generation.md, "Form
control"). On the page it sets the piece's length: the bars and new-bars sliders are not used
with it, and the page's own limits hold (`MAX_BARS` from scratch, `MAX_NEW_BARS` after a
prompt), so `auto` draws, from the job's seed, among the model's training forms that fit them;
the piece's label names the form drawn, so it can be typed to make the piece again. Only text
reaches the API from the page: it also reads a label file, which must not open the server's
files to a page.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from musicgen.errors import MusicgenError
from musicgen.generation.api.request import GenerationRequest
from musicgen.generation.controls.form_plan import model_forms, parse_section_chords
from musicgen.generation.controls.progression import Progression, parse_progression
from musicgen.studio import inputs
from musicgen.studio.words import section_name
from musicgen.tokenizers.form import Phrase, form_text, parse_form, place

PROGRESS_EVERY_S = 0.2  # the API reports every decoding step; the page needs a few a second


def has_sections(model) -> bool:
    """Whether the model writes a song's sections (its tokenizer has section tokens): the
    models a form controls."""
    tok = getattr(model, "tokenizer", None)
    return tok is not None and bool(tok.section_mask().any())


def has_densities(model) -> bool:
    """Whether the model learnt how busy each section is (density tokens): the models whose
    form help offers densities."""
    tables = getattr(getattr(model, "tokenizer", None), "tables", None)
    return bool(getattr(tables, "section_density_to_id", None))


def check_form(text) -> str | None:
    """The page's form as the API reads it ('A8B8', 'auto'; None: none). Text only: a file
    name is refused (the API would read it on the server)."""
    if text is not None and not isinstance(text, str):
        raise MusicgenError(f"form: must be text like 'i4 A8 B8 o4', got {text!r}")
    text = (text or "").strip()
    if not text:
        return None
    if text.lower() == "auto":
        return "auto"
    if text.lower().endswith(".txt") or "/" in text or "\\" in text:
        raise MusicgenError(
            "form: give a form like 'i4 A8 B8 A8 o4' or 'auto'; files cannot be named here"
        )
    return form_text(parse_form(text, "form"))


def settle_form(
    model, asked: GenerationRequest, held: int = 0, most: int = inputs.MAX_BARS
) -> tuple[GenerationRequest, str]:
    """`asked` with its form's phrases (auto: drawn from its seed among the model's forms
    that leave 1 to `most` new bars after `held` prompt bars) and those new bars; the form as
    text ('' without one). A model without sections, an unknown label or a form over the
    page's limits is a one-line error."""
    if asked.form is None:
        return asked, ""
    if not has_sections(model):
        raise MusicgenError(
            "form: this model writes no song sections (no form control); leave the form "
            "empty, or choose a model that writes whole songs"
        )
    phrases = asked.form if asked.form != "auto" else _draw(model, asked.seed, held, most)
    for p in phrases:
        model.tokenizer.section_ids(p.label, p.bars, density=p.density)  # its one line
    total = sum(p.bars for p in phrases)
    if total <= held:
        raise MusicgenError(f"form: its {total} bars end inside the prompt ({held} bars)")
    if total - held > most:
        raise MusicgenError(
            f"form: {total - held} new bars, more than the {most} the page writes at once"
        )
    return asked.settled(form=phrases, bars=total - held), form_text(phrases)


def _draw(model, seed: int, held: int, most: int) -> list[Phrase]:
    """One of the model's training forms that fits (`settle_form`), drawn from `seed`."""
    from musicgen.generation.controls.form_plan import draw_form

    forms = model_forms(model.source)
    fits = [
        f for f in forms if held < sum(p.bars for p in parse_form(f, "form auto")) <= held + most
    ]
    if not fits:
        raise MusicgenError(
            f"form auto: none of this model's {len(forms)} song forms fits the {most} bars the "
            f"page writes at once{f' after a {held}-bar prompt' if held else ''}; type a form"
        )
    return draw_form(fits, seed)


def preview(chords, form, bars) -> str:
    """The chord box's progression over the bars it forces (a form's, else the bars
    slider's), with the form's sections, before anything is generated; a line saying what is
    wrong, else nothing for empty boxes."""
    try:
        text, shape = inputs.check_chords(chords), check_form(form)
        count = inputs.whole("bars", inputs.or_page("bars", bars), 1, inputs.MAX_BARS)
        phrases = None if shape in (None, "auto") else parse_form(shape)
        head = _form_line(shape, phrases)
        if text is None:
            return head
        prog = _progression(text, shape, phrases)
    except MusicgenError as exc:
        return f"⚠ {exc}"
    if prog is None:
        return head + " Each section takes its chords from its first bar."
    labels = prog.labels()
    if shape == "auto":  # the form drawn sets the length: the progression once
        count = len(labels)
    count = sum(p.bars for p in phrases) if phrases else count
    starts = {s.bar: s.label for s in place(phrases)} if phrases else {}
    again = " (the progression repeats)" if count > len(labels) or shape == "auto" else ""
    table = _table([labels[k % len(labels)] for k in range(count)], starts)
    return (head + "\n\n" if head else "") + f"**The chords, bar by bar**{again}:\n\n" + table


def _form_line(shape: str | None, phrases: list[Phrase] | None) -> str:
    if shape == "auto":
        return "**Form**: one of the model's song forms, drawn anew each take (it sets the length)."
    if not phrases:
        return ""
    return (
        f"**Form**: {', '.join(f'{section_name(p.label)} {p.bars}' for p in phrases)}, "
        f"{sum(p.bars for p in phrases)} bars (the form sets the length)."
    )


def _progression(text: str, shape: str | None, phrases) -> Progression | None:
    """The chords over the song's bars; None for chords per section under `auto` (the
    sections are drawn with the seed)."""
    per_section = parse_section_chords(text)
    if per_section is None:
        return parse_progression(text)
    if shape is None:
        raise MusicgenError("chords: chords per section ('A: ...; B: ...') need a song form")
    return None if phrases is None else per_section.over(phrases)


def _table(cells: list[str], starts: dict[int, str]) -> str:
    """Bars eight a row: a row of bar numbers (with the section a bar starts), one of chords."""
    out = []
    for first in range(0, len(cells), 8):
        row = cells[first : first + 8]
        names = {bar: section_name(label) for bar, label in starts.items()}
        heads = [f"{first + i + 1}" + (f" {names[first + i]}" if first + i in names else "")
                 for i in range(len(row))]  # fmt: skip
        out += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(row),
                "| " + " | ".join(row) + " |", ""]  # fmt: skip
    return "\n".join(out)


class BarProgress:
    """The sampler's progress hook (steps; a bar-limited call counts the share of bars the
    slowest piece has written) shown as bars written with the time left at the rate so far.
    `bars`: what the job writes, which the job sets once it knows (a form decides it); None
    shows a share."""

    def __init__(self, progress: Callable, bars: int | None = None):
        self.progress, self.bars = progress, bars
        self.last, self.start = 0.0, time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and done < total:
            return
        self.last = now
        share = done / max(total, 1)
        left = (now - self.start) * (1 - share) / share if share > 0 else None
        eta = "" if left is None else f", about {left:.0f} s left"
        if not self.bars:
            self.progress(share, desc=f"writing{eta}")
            return
        written = min(int(share * self.bars), self.bars)
        self.progress((written, self.bars), desc=f"bar {written} of {self.bars}{eta}", unit="bars")
