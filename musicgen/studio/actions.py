"""The studio page's actions (`Actions`: generate, continue, write a section again, undo,
preview, take on, pick, stop, a page left) on the studio's models, each page's state coming in
as `session`, and the outputs every action ends with (`_show`). Laid out and wired by
`studio.app`, which re-exports these names."""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable

import gradio as gr

from musicgen.errors import MusicgenError
from musicgen.generation.api.options import OPTIONS
from musicgen.studio import controls, inputs, jobs, rework, words
from musicgen.studio.cards import musician_card
from musicgen.studio.keep import Kept, undo
from musicgen.studio.player import meta, svg
from musicgen.studio.running import JobFlag, PageJobs

# gradio finds a parameter whose default is a gr.Progress and passes a tracker in its place;
# track_tqdm also follows the sampler's tqdm bar (an API without `progress=`).
PROGRESS = gr.Progress(track_tqdm=True)
# The sampling widgets in a musician's words (declared with each option, `Option.words`; the
# request's own range beside them), and the names the summary line gives them: the page's own
# labels (`words.SAMPLING`: adventure, focus...), the seed as the take number.
WORDS = {name: OPTIONS[name].words or name for name in inputs.SAMPLING}
SETTINGS = {name: words.SAMPLING.get(name, (name,))[0].lower() for name in inputs.SAMPLING}
TAKE = words.TAKE[0].lower()


def _show(session: jobs.Session, pieces: list[jobs.Piece], message: str = ""):
    """The outputs every action ends with: the first piece's picture, audio and downloads (the
    API's first three), its choice, the page's list, the side-by-side variations (player,
    audio, downloads, visibility), the sections of the first piece to write again, and a
    message last."""
    session.shown = list(pieces[: inputs.MAX_NUM])
    gallery = [(str(p.png), p.label) for p in session.pieces]
    labels = [p.label for p in session.pieces]
    first = session.shown[0] if session.shown else None
    pick = gr.update(choices=labels, value=first.label if first else None)
    slots = [session.shown[k] if k < len(session.shown) else None for k in range(inputs.MAX_NUM)]
    players = [_player(p, k) for k, p in enumerate(slots)]
    audios = [str(p.audio) if p and p.audio else None for p in slots]
    files = [[str(f) for f in p.files()] if p else None for p in slots]
    shown = [gr.update(visible=p is not None) for p in slots]
    png = str(first.png) if first else None
    choices = rework.section_choices(first)
    sections = gr.update(choices=choices, value=choices[0][1])
    return (session, png, audios[0], files[0], pick, gallery, *players, *audios[1:], *files[1:],
            *shown, sections, message)  # fmt: skip


def _player(piece: jobs.Piece | None, k: int) -> str:
    """Slot k's player: the piece's roll following the audio player of the same slot."""
    if piece is None or piece.roll is None:
        return ""
    head = html.escape(piece.label.split(": ", 1)[-1])
    about = html.escape(meta(piece.roll))
    about = f" <span class='mg-meta'>{about}</span>" if about else ""
    return f"<div class='mg-title'><b>{head}</b>{about}</div>" + svg(piece.roll, f"audio-{k}")


def _summary(pieces: list[jobs.Piece], seconds: float, settings: dict) -> str:
    """What a job made: how many pieces, its seed and the sampling it used (the model's own
    where the request left them out), or where Stop ended it."""
    seeds = sorted({p.seed for p in pieces if p.seed is not None})
    used = ", ".join(f"{SETTINGS[k]} {v:g}" for k, v in settings.items())
    stopped = [p.stopped_at for p in pieces if p.stopped_at is not None]
    if stopped:
        return (
            f"Stopped at bar {max(stopped)}: {len(pieces)} piece(s) kept with the bars written "
            f"({TAKE} {', '.join(map(str, seeds))}; {used})"
        )
    if not pieces:
        return "Stopped before a bar was finished: nothing to keep."
    seeds_text = ", ".join(map(str, seeds))
    return f"{len(pieces)} piece(s) in {seconds:.1f} s ({TAKE} {seeds_text}; {used})"


class Actions:
    """The page's actions on this studio's models (each page's state comes in as `session`)."""

    def __init__(self, models: jobs.ModelCache, default: str):
        self.models = models
        self.default = default
        self.page: gr.Blocks | None = None  # set once built: whose queue says a client left
        self.jobs = PageJobs()  # each page's running jobs, by its session hash
        self.kept = Kept()  # each browser's pieces, kept across reloads

    def flag(self, request: gr.Request | None) -> JobFlag:
        """A new job's stop flag, also set when the request's client has disconnected."""
        session_hash = getattr(request, "session_hash", None)
        return JobFlag(lambda: session_hash is not None and self._gone(session_hash))

    def _gone(self, session_hash: str) -> bool:
        """Whether Gradio's queue has marked every running event of this client as dead (its
        event stream closed); False where the queue is not readable."""
        queue = getattr(self.page, "_queue", None)
        events = [
            event
            for job in (getattr(queue, "active_jobs", None) or [])
            if job
            for event in job
            if getattr(event, "session_hash", None) == session_hash
        ]
        return bool(events) and not any(getattr(e, "alive", True) for e in events)

    async def _job(self, request, work: Callable[[JobFlag], object]):
        """`work` in a worker thread under a new flag, known by its page until it ends (so
        that closing or reloading the page stops it: `left`)."""
        key = getattr(request, "session_hash", None) or ""
        self.kept.sweep()  # browsers gone for an hour free their files
        return await self.jobs.run(key, work, self.flag(request))

    def left(self, request: gr.Request):
        """The page was closed or reloaded (Gradio's `unload`): its jobs stop, with nothing kept
        (no one to see), and the server says how many once their threads have ended, counting
        those its closed event stream stopped first (`PageJobs`)."""
        stopped, ending = self.jobs.leave(getattr(request, "session_hash", None) or "")
        if stopped or ending:
            still = f"; {ending} still ending" if ending else ""
            print(f"studio: a page closed; {stopped} job(s) of it stopped{still}", file=sys.stderr)

    def settings(self, label, values: dict) -> dict:
        """The sampling a job uses: the given values, the model's own for the others."""
        given = {k: v for k, v in values.items() if v not in (None, "")}
        opts = self.models.get(label).options(**inputs.request(**given).sampling())
        return {k: getattr(opts, k) for k in inputs.SAMPLING}

    def on_model(self, label):
        """The summary, card, chord and form boxes (each emptied for a model it does not
        control: a hidden box must not send anything), sampling defaults and form builder of
        the chosen model: a control the model cannot use is hidden."""
        label = label or self.default
        model = self.models.get(label)
        chords, form = jobs.has_chord_tokens(model), controls.has_sections(model)
        defaults = jobs.sampling_defaults(model)
        info = words.form_info(controls.has_densities(model))
        return (
            self.models.summary(label),
            musician_card(self.models, label),
            gr.update(visible=True) if chords else gr.update(visible=False, value=""),
            gr.update(visible=True, info=info) if form else gr.update(visible=False, value=""),
            *(defaults[name] for name in inputs.SAMPLING),
            f"**{self.models.title(label)}** is ready",
            gr.update(visible=form),
        )

    def reset(self, label):
        """↺: every sampling setting back to the chosen model's own."""
        defaults = jobs.sampling_defaults(self.models.get(label or self.default))
        return tuple(defaults[name] for name in inputs.SAMPLING)

    async def generate(self, model=None, bars=None, num=None, seed=None, chords=None, form=None,
                       tempo=None, transpose=None, melody=None, session=None,
                       request: gr.Request = None, progress=PROGRESS, **sampling):  # fmt: skip
        """Pieces from scratch. Every argument may be left out (None): the page's value, or
        the chosen model's own sampling; a form sets the bars."""
        label = model or self.default
        start = time.perf_counter()

        def work(flag):
            pieces = jobs.run_generate(
                self.models.get(label), session, self.models.title(label), bars=bars, num=num,
                seed=seed, chords=chords, form=form, tempo=tempo, transpose=transpose,
                melody=melody, progress=controls.BarProgress(progress), cancel=flag, **sampling,
            )  # fmt: skip
            used = self.settings(label, sampling)
            return _show(session, pieces, _summary(pieces, time.perf_counter() - start, used))

        return await self._job(request, work)

    async def continue_(self, model=None, prompt=None, mode=None, prompt_bars=None,
                        seconds=None, new_bars=None, num=None, seed=None, chords=None,
                        form=None, tempo=None, transpose=None, melody=None, session=None,
                        request: gr.Request = None, progress=PROGRESS, **sampling):  # fmt: skip
        """Continuations of `prompt` (a MIDI file; mode 'end': the whole file extended from
        its end, undo-able); the others as `generate`'s."""
        label = model or self.default
        start = time.perf_counter()

        def work(flag):
            pieces = jobs.run_continue(
                self.models.get(label), session, self.models.title(label), prompt, mode=mode,
                prompt_bars=prompt_bars, seconds=seconds, new_bars=new_bars, num=num, seed=seed,
                chords=chords, form=form, tempo=tempo, transpose=transpose, melody=melody,
                progress=controls.BarProgress(progress), cancel=flag, **sampling,
            )  # fmt: skip
            used = self.settings(label, sampling)
            return _show(session, pieces, _summary(pieces, time.perf_counter() - start, used))

        return await self._job(request, work)

    async def regenerate(self, model=None, section=None, first_bar=None, last_bar=None,
                         seed=None, tempo=None, transpose=None, melody=None, session=None,
                         request: gr.Request = None, progress=PROGRESS, **sampling):  # fmt: skip
        """The shown piece with one section (or bars first..last, from 1) written again: a
        new piece, undo-able."""
        label = model or self.default
        start = time.perf_counter()
        piece = session.shown[0] if session is not None and session.shown else None
        if piece is None:
            raise MusicgenError("section: no piece shown to write a section of")
        span = rework.chosen_span(section, first_bar, last_bar)

        def work(flag):
            made = rework.run_regenerate(
                self.models.get(label), session, self.models.title(label), piece.midi, span,
                seed=seed, tempo=tempo, transpose=transpose, melody=melody,
                progress=controls.BarProgress(progress), cancel=flag, **sampling,
            )  # fmt: skip
            pieces = [made] if made else []
            used = self.settings(label, sampling)
            return _show(session, pieces, _summary(pieces, time.perf_counter() - start, used))

        return await self._job(request, work)

    def undo(self, session):
        """Undo: the piece before the last extend or rewrite shown again (none: said so)."""
        piece = undo(session)
        if piece is None:
            return _show(session, session.shown, "Nothing to undo.")
        return _show(session, [piece], f"Back to {piece.id}.")

    def preview(self, label, prompt, mode, prompt_bars, seconds, session):
        if prompt is None:
            return session, None
        model = self.models.get(label or self.default)
        return session, str(jobs.prompt_preview(model, session, prompt, mode, prompt_bars, seconds))

    def take_on(self, k: int) -> Callable:
        """'Continue this piece' of slot k: the piece becomes the Continue tab's file, to be
        extended from its end (mode 'end': the whole piece, then the bars to add); the form
        box is emptied (the piece has its form: one given now is that of the new bars)."""

        def take(label, session):
            piece = session.shown[k] if k < len(session.shown) else None
            if piece is None:
                raise MusicgenError("continue: no piece here to continue")
            return str(piece.midi), gr.Tabs(selected="continue"), "end", gr.update(), ""

        return take

    def restore(self, key, session):
        """A page opened: the pieces its browser made before (a reload, a reopened tab) are
        its again, the last shown (`keep.Kept`); the key goes back to the browser."""
        key, session = self.kept.restore(key, session)
        last = session.shown or session.pieces[-1:]
        kept = len(session.pieces)
        note = f"{kept} piece(s) kept from before this page was reloaded" if kept else ""
        return (key, *_show(session, last, note))

    def pick(self, label, session):
        piece = session.find(label)
        return _show(session, [piece] if piece else [])

    def select(self, session, evt: gr.SelectData):
        index = evt.index if isinstance(evt.index, int) else 0
        pieces = session.pieces[index : index + 1]
        return _show(session, pieces)

    def stop(self, session):
        """Stop: the page's running jobs end at their next step and keep what they wrote.
        With none running, it fails unseen, so that the page's waiting jobs are cancelled
        (`_wire`: the Stop buttons' `failure`)."""
        if not session.stop():
            raise gr.Error("nothing running", visible=False, print_exception=False)
        gr.Info("stopping: the bars written so far are kept")
