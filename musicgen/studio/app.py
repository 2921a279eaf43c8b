"""The studio's page: a gr.Blocks wired to `jobs` (which does the work and the checks).

The page's two actions are Gradio API endpoints, `generate` and `continue` (same inputs as the
widgets, in the order below), so a `gradio_client` script can drive the studio; both share one
concurrency group sized to the machine (`concurrency`). Every page has its own `jobs.Session`
(gr.State: folder, pieces, stop flag); its files are deleted when the page closes.
Bad input raises `gr.Error` with the library's one-line message; the server keeps running.
"""

from __future__ import annotations

import functools
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
from starlette.middleware import Middleware

from musicgen.errors import SEED_MAX, MusicgenError
from musicgen.generation.request import SCRATCH_BARS, SPECS
from musicgen.studio import inputs, jobs
from musicgen.studio.guard import Guard
from musicgen.studio.running import JobFlag, in_thread

TITLE = "musicgen studio"
INTRO = (
    "Pick a model, then **generate** pieces from scratch or upload a MIDI file and "
    "**continue** it. Each piece comes as a piano roll, audio and downloads (MIDI, WAV); "
    "the pieces made on this page stay in the list below to compare."
)


# Piano rolls are 3:1; the list of pieces shows four a row at that shape.
CSS = """
#history .grid-container { grid-template-columns: repeat(4, minmax(0, 1fr)) !important; }
#history .thumbnail-item { aspect-ratio: 3 / 1 !important; }
"""
# gradio finds a parameter whose default is a gr.Progress and passes a tracker in its place;
# track_tqdm also follows the sampler's tqdm bar (an API without `progress=`).
PROGRESS = gr.Progress(track_tqdm=True)


def _page_error(exc: Exception) -> gr.Error:
    """A MusicgenError as its one line; any other exception as a line that says it is a bug
    (its traceback on the server's stderr)."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, MusicgenError):
        return gr.Error(str(exc), print_exception=False)
    traceback.print_exception(exc, file=sys.stderr)
    return gr.Error(
        f"internal error ({type(exc).__name__}: {exc}); this is a bug in musicgen",
        print_exception=False,
    )


def _guarded(fn: Callable) -> Callable:
    """Run a page action (plain or async); its errors become one line in the page."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)  # gradio reads the signature (gr.Progress) through __wrapped__
        async def run_async(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:
                raise _page_error(exc) from None

        return run_async

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise _page_error(exc) from None

    return run


PROGRESS_EVERY_S = 0.2  # the API reports every decoding step; the page needs a few a second


def _progress_hook(progress: gr.Progress) -> Callable[[int, int], None]:
    last = [0.0]

    def hook(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or done >= total:
            last[0] = now
            progress((int(done), int(total)), desc="sampling", unit="ids")

    return hook


def _show(session: jobs.Session, piece: jobs.Piece | None, message: str = ""):
    """The outputs every action ends with: the shown piece, the page's list, a message."""
    gallery = [(str(p.png), p.label) for p in session.pieces]
    labels = [p.label for p in session.pieces]
    if piece is None:
        return session, None, None, None, gr.update(choices=labels), gallery, message
    files = [str(f) for f in piece.files()]
    audio = str(piece.audio) if piece.audio else None
    pick = gr.update(choices=labels, value=piece.label)
    return session, str(piece.png), audio, files, pick, gallery, message


def _summary(pieces: list[jobs.Piece], seconds: float) -> str:
    seeds = sorted({p.seed for p in pieces if p.seed is not None})
    return f"{len(pieces)} piece(s) in {seconds:.1f} s (seed {', '.join(map(str, seeds))})"


class Actions:
    """The page's actions on this studio's models (each page's state comes in as `session`)."""

    def __init__(self, models: jobs.ModelCache):
        self.models = models
        self.page: gr.Blocks | None = None  # set once built: whose queue says a client left

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

    def on_model(self, label):
        """The card, the chord box and the sampling defaults of the chosen model."""
        model = self.models.get(label)
        chords = jobs.has_chord_tokens(model)
        defaults = jobs.sampling_defaults(model)
        tokens = f"{model.tokenizer.name} tokens" + (", chord tokens" if chords else "")
        return (
            self.models.card(label),
            gr.update(visible=chords, interactive=True),
            *(defaults[name] for name in inputs.SAMPLING),
            f"**{label}** loaded ({tokens})",
        )

    async def generate(self, label, bars, num, seed, temperature, top_k, top_p, repeat, chords,
                       session, request: gr.Request, progress=PROGRESS):  # fmt: skip
        start = time.perf_counter()

        def work(flag):
            pieces = jobs.run_generate(
                self.models.get(label), session, label, bars=bars, num=num, seed=seed,
                chords=chords, temperature=temperature, top_k=top_k, top_p=top_p, repeat=repeat,
                progress=_progress_hook(progress), cancel=flag,
            )  # fmt: skip
            return _show(session, pieces[0], _summary(pieces, time.perf_counter() - start))

        return await in_thread(work, self.flag(request))

    async def continue_(self, label, prompt, mode, prompt_bars, seconds, new_bars, num, seed,
                        temperature, top_k, top_p, repeat, session, request: gr.Request,
                        progress=PROGRESS):  # fmt: skip
        start = time.perf_counter()

        def work(flag):
            pieces = jobs.run_continue(
                self.models.get(label), session, label, prompt, mode=mode,
                prompt_bars=prompt_bars, seconds=seconds, new_bars=new_bars, num=num, seed=seed,
                temperature=temperature, top_k=top_k, top_p=top_p, repeat=repeat,
                progress=_progress_hook(progress), cancel=flag,
            )  # fmt: skip
            return _show(session, pieces[0], _summary(pieces, time.perf_counter() - start))

        return await in_thread(work, self.flag(request))

    def preview(self, label, prompt, mode, prompt_bars, seconds, session):
        if prompt is None:
            return session, None
        model = self.models.get(label)
        return session, str(jobs.prompt_preview(model, session, prompt, mode, prompt_bars, seconds))

    def pick(self, label, session):
        return _show(session, session.find(label))

    def select(self, session, evt: gr.SelectData):
        index = evt.index if isinstance(evt.index, int) else 0
        return _show(session, session.pieces[index] if index < len(session.pieces) else None)

    def stop(self, session):
        if session.stop():
            gr.Info("stopped")


def raw(component):
    """`component` handing its value to the studio's checks as sent: a typed or scripted 'abc',
    None or 1.5 gets the one-line message naming the parameter (`inputs.whole`), not Gradio's
    rounding (seed 1.5 would become 2) or its multi-line preprocessing error."""
    component.preprocess = lambda payload: payload
    return component


def _sampling_widget(name: str, value) -> gr.components.Component:
    """A sampling option's widget: a slider over the request's span for it (inside its range,
    `request.SPECS`), else a number box."""
    spec = SPECS[name]
    label = f"{name.replace('_', '-')} ({spec.range.note})"
    if spec.widget is None:
        return gr.Number(value, label=label, precision=0, minimum=spec.range.low)
    low, high, step = spec.widget
    return gr.Slider(low, high, value=value, step=step, label=label, elem_id=name.replace("_", "-"))


def _controls(models: jobs.ModelCache, default: str) -> SimpleNamespace:
    """The model choice, the sampling fields and the two tabs (inside an open gr.Blocks)."""
    ui = SimpleNamespace()
    defaults = jobs.page_defaults(models, default)  # the page opens on this model
    gr.Markdown(f"# {TITLE}\n{INTRO}")
    with gr.Row():
        ui.model = gr.Dropdown(list(models.choices), value=default, label="model", scale=1)
        ui.status = gr.Markdown()
    with gr.Accordion("model card", open=False):
        ui.card = gr.Markdown(models.card(default))
    with gr.Row():
        ui.num = gr.Slider(1, inputs.MAX_NUM, value=1, step=1, label="pieces")
        ui.seed = gr.Number(-1, label="seed (-1: random)", precision=0, minimum=-1,
                        maximum=SEED_MAX, elem_id="seed")  # fmt: skip
        ui.sampling = [_sampling_widget(name, defaults[name]) for name in inputs.SAMPLING]
    with gr.Tabs():
        with gr.Tab("Generate"):
            ui.bars = gr.Slider(1, inputs.MAX_BARS, value=SCRATCH_BARS, step=1, label="bars",
                                elem_id="bars")  # fmt: skip
            ui.chords = gr.Textbox(
                label="chord progression (chord symbols, e.g. C G Am F; '|' between bars)",
                visible=False,
            )
            with gr.Row():
                ui.gen_btn = gr.Button("Generate", variant="primary", elem_id="generate")
                ui.gen_stop = gr.Button("Stop", variant="stop", elem_id="stop-generate")
        with gr.Tab("Continue"):
            with gr.Row():
                ui.prompt = gr.File(label="prompt (MIDI)", file_types=[".mid", ".midi"],
                                    type="filepath", elem_id="prompt-file")  # fmt: skip
                ui.prompt_roll = gr.Image(label="the prompt as the model reads it",
                                          type="filepath", interactive=False,
                                          elem_id="prompt-roll")  # fmt: skip
            with gr.Row():
                ui.mode = gr.Radio(["bars", "seconds"], value="bars", label="prompt length in")
                ui.prompt_bars = gr.Slider(1, inputs.MAX_PROMPT_BARS, value=2, step=1,
                                           label="prompt bars")  # fmt: skip
                ui.seconds = gr.Slider(0.5, inputs.MAX_SECONDS, value=8, step=0.5,
                                       label="prompt seconds")  # fmt: skip
                ui.new_bars = gr.Slider(1, inputs.MAX_NEW_BARS, value=4, step=1,
                                        label="new bars", elem_id="new-bars")  # fmt: skip
            with gr.Row():
                ui.cont_btn = gr.Button("Continue", variant="primary", elem_id="continue")
                ui.cont_stop = gr.Button("Stop", variant="stop", elem_id="stop-continue")
    numbers = (ui.num, ui.seed, *ui.sampling, ui.bars, ui.prompt_bars, ui.seconds, ui.new_bars)
    for component in numbers:
        raw(component)
    return ui


def _results(ui: SimpleNamespace) -> None:
    """The shown piece (roll, player, downloads), its choice and the page's list."""
    ui.message = gr.Markdown(label="message", elem_id="message")
    with gr.Row():
        ui.roll = gr.Image(label="piano roll", type="filepath", interactive=False, scale=2,
                           elem_id="roll")  # fmt: skip
        with gr.Column(scale=1):
            ui.pieces = gr.Dropdown([], label="piece", elem_id="piece")
            # the browser's own player (no waveform to decode before it plays)
            ui.audio = gr.Audio(
                label="listen", type="filepath", interactive=False, elem_id="audio",
                waveform_options=gr.WaveformOptions(show_recording_waveform=False),
            )  # fmt: skip
            ui.files = gr.File(label="download", file_count="multiple", interactive=False,
                               elem_id="downloads")  # fmt: skip
    ui.history = gr.Gallery(label="pieces made on this page", columns=4, object_fit="contain",
                            height=240, allow_preview=False, elem_id="history")  # fmt: skip


def _wire(page: gr.Blocks, ui: SimpleNamespace, act: Actions) -> None:
    """Events: the two public endpoints in one concurrency group, the rest private."""
    private = {"api_visibility": "private"}
    shown = [ui.session, ui.roll, ui.audio, ui.files, ui.pieces, ui.history, ui.message]
    model_out = [ui.card, ui.chords, *ui.sampling, ui.status]
    page.load(_guarded(act.on_model), [ui.model], model_out, **private)
    ui.model.change(_guarded(act.on_model), [ui.model], model_out, **private)
    sampling = [ui.num, ui.seed, *ui.sampling]
    gen = ui.gen_btn.click(
        _guarded(act.generate), [ui.model, ui.bars, *sampling, ui.chords, ui.session], shown,
        api_name="generate", concurrency_id="sampling", show_progress_on=[ui.roll],
    )  # fmt: skip
    prompt = [ui.prompt, ui.mode, ui.prompt_bars, ui.seconds]
    cont = ui.cont_btn.click(
        _guarded(act.continue_), [ui.model, *prompt, ui.new_bars, *sampling, ui.session], shown,
        api_name="continue", concurrency_id="sampling", show_progress_on=[ui.roll],
    )  # fmt: skip
    for btn in (ui.gen_stop, ui.cont_stop):
        btn.click(act.stop, [ui.session], None, cancels=[gen, cont], queue=False, **private)
    for trigger in (ui.prompt.upload, ui.mode.change, ui.prompt_bars.release, ui.seconds.release):
        trigger(_guarded(act.preview), [ui.model, *prompt, ui.session],
                [ui.session, ui.prompt_roll], **private)  # fmt: skip
    ui.pieces.input(act.pick, [ui.pieces, ui.session], shown, **private)
    ui.history.select(act.select, [ui.session], shown, **private)


def build(models: jobs.ModelCache, root: Path, default: str | None = None) -> gr.Blocks:
    """The page, for the models in `models` (the only ones it can reach); each page's files go
    to a folder of its own under `root`."""
    default = default if default in models.choices else next(iter(models.choices))
    # uploads and Gradio's copies older than an hour go (results are served from the pages'
    # own folders, never copied: `gr.set_static_paths` in `launch`)
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(600, 3600)) as page:
        session = gr.State(jobs.Session(root), delete_callback=jobs.Session.close,
                           time_to_live=inputs.SESSION_IDLE_S)  # fmt: skip
        ui = _controls(models, default)
        _results(ui)
        ui.session = session
        act = Actions(models)
        _wire(page, ui, act)
    act.page = page
    return page


def launch(
    models: jobs.ModelCache,
    root: Path,
    host: str = "127.0.0.1",
    port: int = 7860,
    concurrency: int = 1,
    default: str | None = None,
    max_upload_mb: float = inputs.MAX_UPLOAD_MB,
    auth: list[tuple[str, str]] | None = None,
) -> gr.Blocks:
    """Start the server (returns at once; `page.block_thread()` waits). Results are served from
    the pages' folders only (`guard.Guard`), uploads are capped at `max_upload_mb` and taken
    only as MIDI; `auth`: the (user, password) pairs a login asks for."""
    page = build(models, root, default)
    page.queue(default_concurrency_limit=concurrency, max_size=64)
    sessions = root / jobs.SESSIONS
    sessions.mkdir(parents=True, exist_ok=True, mode=0o700)
    gr.set_static_paths([str(sessions)])  # served where they are written: never copied
    guard = Middleware(Guard, root=root, server_mb=inputs.SERVER_MB)
    try:
        page.launch(
            server_name=host,
            server_port=port,
            prevent_thread_lock=True,
            max_file_size=int(max_upload_mb * 1e6),
            allowed_paths=[str(sessions)],
            app_kwargs={"middleware": [guard]},
            auth=auth or None,
            share=False,
            ssr_mode=False,
            quiet=True,
            show_error=True,
            inbrowser=False,
            css=CSS,
        )
    except OSError as exc:
        if "port" not in str(exc):
            raise
        raise MusicgenError(
            f"port: {port} is in use on {host} (another program listens there); give another --port"
        ) from None
    return page


def local_url(page: gr.Blocks) -> str:
    return str(page.local_url or "").rstrip("/") + "/"
