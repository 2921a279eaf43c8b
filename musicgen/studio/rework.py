"""Working on a piece already made, as a songwriter does: extend it from its end (the whole piece
plus new bars, `generation.api.extend`), write one section of it again
(`generation.api.regenerate`), and the page's section choices for that.

Both run the library's own steps (the prompt of the bars before the new ones, the form placed
after them, the file put back together around the new bars, its sound finished once) through
the studio's job path (`jobs.run_pieces`), so Stop keeps the whole bars written, a page that
leaves stops the job, and the disk budget holds, as for every other job. The result is a new piece;
the piece it came from is pushed on the session's undo history (`keep.push_undo`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.generation.api import Model
from musicgen.generation.api.extend import end_prompt, form_after, whole
from musicgen.generation.api.finish import finish
from musicgen.generation.api.prompt import encode_song
from musicgen.generation.api.regenerate import before_prompt, rewrite, section_bars
from musicgen.studio.controls import check_form, settle_form
from musicgen.studio.inputs import (
    MAX_NEW_BARS,
    MAX_NUM,
    check_chords,
    given,
    or_page,
    random_seed,
    request,
)
from musicgen.studio.inputs import whole as whole_number
from musicgen.studio.jobs import bars_text, run_pieces
from musicgen.studio.keep import push_undo
from musicgen.studio.pieces import render, sound
from musicgen.studio.session import Piece, Session
from musicgen.studio.words import section_name
from musicgen.tokenizers.form import read_markers

BARS_CHOICE = ("bars a to b below", "bars")  # the section choice that reads the two bar boxes


def run_extend(model: Model, session: Session, model_label: str, path, *, new_bars=None,
               num=None, seed=None, chords=None, form=None, tempo=None, transpose=None,
               melody=None, progress=None, cancel: threading.Event | None = None,
               **sampling_given) -> list[Piece]:  # fmt: skip
    """`num` versions of the piece at `path` extended by `new_bars` bars (a `form`: that of
    the new bars, which sets them), each the whole piece, markers kept, then the new bars."""
    new_bars = whole_number("new_bars", or_page("new_bars", new_bars), 1, MAX_NEW_BARS, True)
    num = whole_number("num", or_page("num", num), 1, MAX_NUM) or 1
    asked = request(
        "new_bars", num=num, bars=new_bars, seed=random_seed(seed), chords=check_chords(chords),
        form=check_form(form), **sound(tempo, transpose, melody), **sampling_given,
    ).seeded()  # fmt: skip
    asked, shape = settle_form(model, asked, 0, MAX_NEW_BARS)
    prompt, total = end_prompt(model, path, asked)
    sampled = form_after(asked, model.source, prompt.bars).settled(tempo=None, transpose=None)
    original = symusic.Score(str(path))
    name = Path(path).name
    info = {"model": model_label, "prompt": name, "extend": True, "new_bars": asked.bars}
    info |= {"seed": asked.seed, **given(asked)} | ({"form": shape} if shape else {})
    label = f"{model_label} extends {name} ({bars_text(total)}) by {bars_text(asked.bars)}"
    label += (f" in form {shape}" if shape else "") + f", seed {asked.seed}"
    out = []
    made = run_pieces(model, session, sampled, progress, cancel, prompt)
    for i, (music, stopped) in enumerate(made):
        music.score = whole(original, music.score, prompt, total)
        finish(music.score, asked, keep=True)
        end = "" if stopped is None else f", stopped at new bar {stopped} of {asked.bars}"
        end += ", no new note" if music.new_notes == 0 else ""  # said, never silent
        piece = render(music, session, "ext", f"{label}, piece {i + 1}{end}", info, model,
                       float(total * prompt.beats), prompt.beats)  # fmt: skip
        piece.stopped_at = stopped
        piece.bars = total + (asked.bars if stopped is None else stopped)
        out.append(piece)
    push_undo(session, path, out)
    return out


def run_regenerate(model: Model, session: Session, model_label: str, path, span, *, seed=None,
                   tempo=None, transpose=None, melody=None, progress=None,
                   cancel: threading.Event | None = None,
                   **sampling_given) -> Piece | None:  # fmt: skip
    """The piece at `path` with bars `span` ((a, b), 0-based, b excluded) written again, the
    rest kept (`generation.api.regenerate`); None where Stop came before a whole bar."""
    tok = model.tokenizer
    if tok.name != "remi":
        raise MusicgenError(f"regenerate: needs a REMI model (this model's is '{tok.name}')")
    ids = encode_song(tok, path)
    total = len(tok.bar_starts(np.asarray(ids, dtype=np.int64)))
    a, b = section_bars(Path(path), total, bars=(span[0], min(span[1], total)))
    asked = request("new_bars", num=1, seed=random_seed(seed), **sound(tempo, transpose, melody),
                    **sampling_given).seeded().settled(bars=b - a)  # fmt: skip
    prompt = before_prompt(model, Path(path), ids, a, b - a)
    sampled = form_after(asked, model.source, prompt.bars) if prompt else asked
    sampled = sampled.settled(tempo=None, transpose=None)
    original = symusic.Score(str(path))
    name = Path(path).name
    info = {"model": model_label, "prompt": name, "regenerate": f"{a}:{b}", "seed": asked.seed}
    info |= given(asked)
    label = f"{model_label} writes bars {a + 1}-{b} of {name} again, seed {asked.seed}"
    made = run_pieces(model, session, sampled, progress, cancel, prompt)
    if not made:
        return None
    music, stopped = made[0]
    music.score = rewrite(original, music.score, prompt, (a, b))
    finish(music.score, asked, keep=True)
    end = "" if stopped is None else f", stopped at bar {stopped} of {b - a}"
    piece = render(music, session, "redo", label + end, info, model)
    piece.stopped_at, piece.bars = stopped, total
    push_undo(session, path, [piece])
    return piece


def section_choices(piece: Piece | None) -> list[tuple[str, str]]:
    """The sections of `piece` a songwriter may write again, as the player names them
    ('Chorus, bars 7-10'), each with its bars ('6:10', 0-based, end excluded), then the
    choice of bars typed in (`BARS_CHOICE`)."""
    try:
        phrases = read_markers(symusic.Score(str(piece.midi))) if piece is not None else []
    except (OSError, RuntimeError, ValueError):  # its file gone or unreadable: bars only
        phrases = []
    out = []
    for s in phrases:
        end = s.bar + s.bars if piece.bars is None else min(s.bar + s.bars, piece.bars)
        if 0 <= s.bar < end:
            out.append((f"{section_name(s.label)}, bars {s.bar + 1}-{end}", f"{s.bar}:{end}"))
    return [*out, BARS_CHOICE]


def chosen_span(choice, first, last) -> tuple[int, int]:
    """The bars (0-based, end excluded) a section choice names ('6:10'), or, for
    `BARS_CHOICE`, bars `first` to `last` as the page counts them (from 1, both included)."""
    if choice and choice != BARS_CHOICE[1]:
        a, _, b = str(choice).partition(":")
        if a.isdigit() and b.isdigit():
            return int(a), int(b)
        raise MusicgenError(f"section: choose one of the piece's sections, got {choice!r}")
    a = whole_number("from bar", first, 1, None, True)
    b = whole_number("to bar", last, 1, None, True)
    if b < a:
        raise MusicgenError(f"to bar: must be at least the first bar ({a}), got {b}")
    return a - 1, b
