"""What the studio does, without the page: its jobs through the generation API.

The page (`app.py`) only turns widgets into these calls and their results into widgets, so this
module and the ones it draws on are what the tests drive without a browser: `models.py` (which
models a page may reach), `session.py` (a page's folder, pieces and stop flags), `pieces.py`
(how a result is written). Every job calls the public generation API (`musicgen.load`,
`Model.pieces`, `Model.prompt`) with its `progress=` and `cancel=` hooks, exactly as the CLI
does. Every value and upload is checked first (`inputs.py`: size, MIDI header, parse,
`musicgen.limits`, notes). The names of those modules that the page and the tests use are
importable from here too.
"""

from __future__ import annotations

import threading
from pathlib import Path

from musicgen.errors import Cancelled
from musicgen.generation.api import Model
from musicgen.generation.api.finish import finish
from musicgen.generation.api.render import piano_roll
from musicgen.measures.metrics import load_notes, notes_from_score
from musicgen.studio.controls import check_form, settle_form
from musicgen.studio.inputs import (
    MAX_BARS,
    MAX_NEW_BARS,
    MAX_NUM,
    check_chords,
    check_upload,
    given,
    or_page,
    prompt_length,
    random_seed,
    request,
    whole,
)
from musicgen.studio.models import (
    DEFAULT_MODEL,
    SUMMARIES,
    TITLES,
    ModelCache,
    has_chord_tokens,
    model_choices,
    model_defaults,
    page_defaults,
    sampling_defaults,
    shipped_models,
)
from musicgen.studio.partial import Recorder, kept_pieces
from musicgen.studio.pieces import chords_per_bar, render, save_audio, sound
from musicgen.studio.session import (
    MAX_SESSION_PIECES,
    SESSIONS,
    Piece,
    Session,
    check_disk,
    folder_bytes,
)

__all__ = [
    "DEFAULT_MODEL", "MAX_SESSION_PIECES", "SESSIONS", "SUMMARIES", "TITLES",
    "ModelCache", "Piece", "Session", "check_disk", "chords_per_bar", "sound",
    "folder_bytes", "has_chord_tokens", "model_choices", "model_defaults", "page_defaults",
    "prompt_preview", "render", "run_continue", "run_generate", "sampling_defaults",
    "save_audio", "shipped_models",
]  # fmt: skip


def run_generate(
    model: Model,
    session: Session,
    model_label: str,
    *,
    bars=None,
    num=None,
    seed=None,
    chords=None,
    form=None,
    tempo=None,
    transpose=None,
    melody=None,
    progress=None,
    cancel: threading.Event | None = None,
    **sampling_given,
) -> list[Piece]:
    """`num` pieces of `bars` bars from scratch, rendered into the session (None: the page's
    value, `inputs.PAGE`; a sampling option None: the model's own); a `form` sets the bars
    (`controls`). `cancel` set by Stop ends the sampler at its next step and keeps the whole
    bars written; set because the page or the request is gone, it ends the job with nothing
    kept."""
    bars = whole("bars", or_page("bars", bars), 1, MAX_BARS, required=True)
    num = whole("num", or_page("num", num), 1, MAX_NUM) or 1
    asked = request(
        num=num, bars=bars, seed=random_seed(seed), chords=check_chords(chords),
        form=check_form(form), **sound(tempo, transpose, melody), **sampling_given,
    ).seeded()  # fmt: skip
    asked, shape = settle_form(model, asked)
    seed, bars = asked.seed, asked.bars
    info = {"model": model_label, "bars": bars, "seed": seed, **given(asked)}
    info |= {"form": shape} if shape else {}
    out = []
    for i, (music, stopped) in enumerate(run_pieces(model, session, asked, progress, cancel)):
        what = bars_text(bars) if stopped is None else f"stopped at bar {stopped} of {bars}"
        what = f"form {shape}, {what}" if shape else what
        what += ", no new note" if music.new_notes == 0 else ""  # said, never silent
        label = f"{model_label}, seed {seed}, piece {i + 1}, {what}"
        piece = render(music, session, "gen", label, info, model)
        piece.stopped_at, piece.bars = stopped, bars if stopped is None else stopped
        out.append(piece)
    return out


def run_pieces(model: Model, session: Session, asked, progress, cancel, prompt=None):
    """The request's pieces (`Model.pieces`) under a stop flag of the session's, each with the
    new bars it holds when Stop ended the job (None when it finished), its sound finished as
    the library finishes a piece (`finish`: chord markers, instruments, tempo); a stopped
    piece with no whole new bar is dropped. A flag set because the page or request is gone
    re-raises."""
    check_disk(session)
    if hasattr(progress, "bars"):  # the page's hook shows bars: the ones this job writes
        progress.bars = asked.bars
    flag = session.start_job(cancel)
    recorder = Recorder()
    try:
        hooks = {"progress": progress, "cancel": flag, "grammar_wrap": recorder}
        return [(m, None) for m in model.pieces(asked, prompt=prompt, **hooks)]
    except Cancelled:
        if getattr(flag, "left", False) or not hasattr(model, "tokenizer"):
            raise
        kept = kept_pieces(model, recorder, asked.num, asked.seed, prompt)
        kept = [k for k in kept if k.bars > 0]
        for k in kept:
            written = (model.tokenizer, k.music.ids, prompt)
            finish(k.music.score, asked, written=written)
        return [(k.music, k.bars) for k in kept]
    finally:
        session.end_job(flag)


def run_continue(
    model: Model,
    session: Session,
    model_label: str,
    path,
    *,
    mode=None,
    prompt_bars=None,
    seconds=None,
    new_bars=None,
    num=None,
    seed=None,
    chords=None,
    form=None,
    tempo=None,
    transpose=None,
    melody=None,
    progress=None,
    cancel: threading.Event | None = None,
    **sampling_given,
) -> list[Piece]:
    """`num` continuations of the uploaded prompt, rendered into the session (None: the page's
    value or the model's own, as `run_generate`); `chords`: the progression of the new bars;
    `form`: the song's, the prompt its first bars (it sets the new bars). Mode 'end': the
    whole piece extended from its end (`rework.run_extend`; `form` that of the new bars)."""
    check_upload(path, model.tokenizer.name)
    if or_page("mode", mode) == "end":
        from musicgen.studio.rework import run_extend

        return run_extend(
            model, session, model_label, path, new_bars=new_bars, num=num, seed=seed,
            chords=chords, form=form, tempo=tempo, transpose=transpose, melody=melody,
            progress=progress, cancel=cancel, **sampling_given,
        )  # fmt: skip
    length = prompt_length(
        or_page("mode", mode), or_page("prompt_bars", prompt_bars), or_page("seconds", seconds)
    )
    new_bars = whole("new_bars", or_page("new_bars", new_bars), 1, MAX_NEW_BARS, required=True)
    num = whole("num", or_page("num", num), 1, MAX_NUM) or 1
    asked = request(
        "new_bars", num=num, bars=new_bars, seed=random_seed(seed), chords=check_chords(chords),
        form=check_form(form), **sound(tempo, transpose, melody), **sampling_given,
    ).seeded()  # fmt: skip
    prompt = model.prompt(path, **length)
    asked, shape = settle_form(model, asked, prompt.bars, MAX_NEW_BARS)
    new_bars = asked.bars
    what = bars_text(length["bars"]) if "bars" in length else f"{length['seconds']:g} s"
    name = Path(path).name
    info = {"model": model_label, "prompt": name, **length, "new_bars": new_bars}
    info |= {"seed": asked.seed, **given(asked)} | ({"form": shape} if shape else {})
    label = f"{model_label} continues {what} of {name}" + (f" in form {shape}" if shape else "")
    label += f", seed {asked.seed}"
    made = run_pieces(model, session, asked, progress, cancel, prompt)
    return _continued(made, session, model, prompt, label, info, new_bars)


def _continued(made, session: Session, model: Model, prompt, label: str, info: dict, new_bars):
    """The rendered continuations, each saying where Stop cut it or that it has no new note."""
    out = []
    for i, (music, stopped) in enumerate(made):
        end = "" if stopped is None else f", stopped at new bar {stopped} of {new_bars}"
        end += ", no new note" if music.new_notes == 0 else ""  # said, never silent
        piece = render(music, session, "cont", f"{label}, piece {i + 1}{end}", info, model,
                       prompt.end_tick / prompt.notes.ticks_per_quarter, prompt.beats)  # fmt: skip
        piece.stopped_at = stopped
        piece.bars = prompt.bars + (new_bars if stopped is None else stopped)
        out.append(piece)
    return out


def bars_text(n: int) -> str:
    """'1 bar', '4 bars': how a label counts bars."""
    return f"{n} bar" if n == 1 else f"{n} bars"


def prompt_preview(model: Model, session: Session, path, mode="bars", bars=2, seconds=None):
    """The piano roll (PNG path) of the prompt exactly as the model will be fed it; mode
    'end': the whole piece, which the new bars will follow."""
    check_upload(path, model.tokenizer.name)
    folder = session.dir()
    stem = session.next_stem("prompt")
    if mode == "end":
        title = f"{Path(path).name}: the whole piece; the new bars follow its end"
        return piano_roll(load_notes(Path(path)), folder / f"{stem}.png", title=title)
    prompt = model.prompt(path, **prompt_length(mode, bars, seconds))
    title = f"the opening of {Path(path).name}: {bars_text(prompt.bars)}, as the model hears it"
    return piano_roll(notes_from_score(prompt.notes), folder / f"{stem}.png", title=title)
