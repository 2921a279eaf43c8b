"""The studio's page: a gr.Blocks wired to `jobs` (which does the work and the checks).

The page's two actions are Gradio API endpoints, `generate` and `continue` (same inputs as the
widgets, in the order below), so a `gradio_client` script can drive the studio; both share one
concurrency group sized to the machine (`concurrency`). Every endpoint argument may be left
out: None means the page's own value (`inputs.PAGE`) or the chosen model's own sampling
setting, which is what the page shows; the sampling widgets open empty so that the API's
defaults are None, and the page fills them with the model's values as it loads.
Every page has its own `jobs.Session` (gr.State: folder, pieces, stop flags); its files are
deleted when the page closes, and closing or reloading it stops its jobs (`Actions.left`).
Stop keeps what a job wrote. Bad input raises `gr.Error` with the library's one-line message;
the server keeps running. The actions themselves (`Actions`, and the outputs each ends with)
are in `actions.py`; this module lays the page out and wires them.
"""

from __future__ import annotations

import functools
import inspect
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
from starlette.middleware import Middleware

from musicgen.errors import SEED_MAX, MusicgenError
from musicgen.generation.request import SPECS
from musicgen.studio import controls, inputs, jobs
from musicgen.studio.actions import (  # noqa: F401 (re-exported: the page's actions)
    PROGRESS,
    SETTINGS,
    WORDS,
    Actions,
    _player,
    _show,
    _summary,
)
from musicgen.studio.guard import Guard
from musicgen.studio.player import PLAYER_CSS, PLAYHEAD_JS
from musicgen.studio.running import page_line

TITLE = "musicgen studio"
INTRO = (
    "Pick a model, then **generate** pieces from scratch or upload a MIDI file and "
    "**continue** it. Each piece comes with a player, its chords and downloads (MIDI, WAV); "
    "**Continue this piece** takes it on, and the pieces made on this page stay in the list "
    "below to compare."
)


# Piano-roll pictures are 3:1; the list of pieces shows four a row at that shape, two on a
# phone. The variations sit side by side and stack on a narrow window.
CSS = (
    """
#history .grid-container { grid-template-columns: repeat(4, minmax(0, 1fr)) !important; }
#history .thumbnail-item { aspect-ratio: 3 / 1 !important; }
@media (max-width: 600px) {
  #history .grid-container { grid-template-columns: repeat(2, minmax(0, 1fr)) !important; }
  .gradio-container { padding: 4px !important; }
}
"""
    + PLAYER_CSS
)
# Each action's inputs by name, in the order the page sends them: the handlers take them by
# keyword (`_by_name`) and the click's components are looked up by the same names (`_inputs`).
LOOKS = ("chords", "form", "tempo", "transpose")
GENERATE = ("model", "bars", "num", "seed", *inputs.SAMPLING, *LOOKS, "session")
CONTINUE = ("model", "prompt", "mode", "prompt_bars", "seconds", "new_bars", "num", "seed",
            *inputs.SAMPLING, *LOOKS, "session")  # fmt: skip


def _page_error(exc: Exception) -> gr.Error:
    """A MusicgenError as its one line; any other exception as a line that says it is a bug
    (its traceback on the server's stderr)."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, MusicgenError):
        return gr.Error(page_line(str(exc)), print_exception=False)
    traceback.print_exception(exc, file=sys.stderr)
    return gr.Error(
        page_line(f"internal error ({type(exc).__name__}: {exc}); this is a bug in musicgen"),
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


def _by_name(action: Callable, names: tuple[str, ...]) -> Callable:
    """`action` (an async method taking its inputs by keyword) as gradio calls it: with the
    page's inputs `names` in order (each None when left out), then the request and the
    progress tracker. Gradio and an API client read that signature; the sampling options
    arrive as keywords, so a new option shifts nothing."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    sig = inspect.Signature(
        [inspect.Parameter(n, kind, default=None) for n in names]
        + [inspect.Parameter("request", kind, default=None, annotation=gr.Request)]
        + [inspect.Parameter("progress", kind, default=PROGRESS)]
    )

    async def run(*args, **kwargs):
        return await action(**sig.bind(*args, **kwargs).arguments)

    run.__signature__ = sig
    run.__annotations__ = {"request": gr.Request}  # gradio finds the request by type hint
    run.__name__ = run.__qualname__ = action.__name__
    return run


def raw(component):
    """`component` handing its value to the studio's checks as sent: a typed or scripted 'abc',
    None or 1.5 gets the one-line message naming the parameter (`inputs.whole`), not Gradio's
    rounding (seed 1.5 would become 2) or its multi-line preprocessing error."""
    component.preprocess = lambda payload: payload
    return component


def _sampling_widget(name: str) -> gr.components.Component:
    """A sampling option's widget: a slider over the request's span for it (inside its range,
    `request.SPECS`), else a number box. It opens empty (None: the model's own, which the
    page fills in as it loads): the API's default for it is then None too."""
    spec = SPECS[name]
    label = f"{WORDS.get(name, name)} ({spec.range.note})"
    elem_id = name.replace("_", "-")
    if spec.widget is None:
        return gr.Number(None, label=label, precision=0, minimum=spec.range.low, elem_id=elem_id)
    low, high, step = spec.widget
    slider = gr.Slider(low, high, value=None, step=step, label=label, elem_id=elem_id, buttons=[])
    slider.value = None  # a slider fills an empty value with its minimum: keep it empty
    return slider


def _continue_tab(ui: SimpleNamespace) -> None:
    """The Continue tab: the prompt file and how much of it, the new bars (inside gr.Tabs)."""
    with gr.Tab("Continue", id="continue"):
        with gr.Row():
            ui.prompt = gr.File(label="prompt (MIDI)", file_types=[".mid", ".midi"],
                                type="filepath", elem_id="prompt-file")  # fmt: skip
            ui.prompt_roll = gr.Image(label="the prompt as the model reads it",
                                      type="filepath", interactive=False,
                                      elem_id="prompt-roll")  # fmt: skip
        with gr.Row():
            ui.mode = gr.Radio(["bars", "seconds"], value=inputs.PAGE["mode"],
                               label="prompt length in", elem_id="mode")  # fmt: skip
            ui.prompt_bars = gr.Slider(1, inputs.MAX_PROMPT_BARS,
                                       value=inputs.PAGE["prompt_bars"], step=1,
                                       label="prompt bars", elem_id="prompt-bars")  # fmt: skip
            ui.seconds = gr.Slider(0.5, inputs.MAX_SECONDS, value=inputs.PAGE["seconds"],
                                   step=0.5, label="prompt seconds")  # fmt: skip
            ui.new_bars = gr.Slider(1, inputs.MAX_NEW_BARS, value=inputs.PAGE["new_bars"],
                                    step=1, label="new bars", elem_id="new-bars")  # fmt: skip
        with gr.Row():
            ui.cont_btn = gr.Button("Continue", variant="primary", elem_id="continue")
            ui.cont_stop = gr.Button("Stop", variant="stop", elem_id="stop-continue")


def _controls(models: jobs.ModelCache, default: str) -> SimpleNamespace:
    """The model choice, the musician's settings, the two tabs and the folded advanced
    settings (inside an open gr.Blocks)."""
    ui = SimpleNamespace()
    gr.Markdown(f"# {TITLE}\n{INTRO}")
    with gr.Row():
        choices = [(models.title(label), label) for label in models.choices]
        ui.model = gr.Dropdown(choices, value=default, label="model", scale=2, elem_id="model")
        ui.status = gr.Markdown(elem_id="status")
    ui.summary = gr.Markdown(models.summary(default), elem_id="summary")
    with gr.Accordion("about this model (its card)", open=False):
        ui.card = gr.Markdown(models.card(default))
    ui.chords = gr.Textbox(
        label="chords, one a bar (e.g. Am F C G; '|' between bars: C | G D; x2 at the end of a "
        "line repeats it)",
        visible=False, elem_id="chords", lines=1,
    )  # fmt: skip
    ui.form = gr.Textbox(label=controls.FORM_LABEL, info=controls.FORM_INFO, visible=False,
                         elem_id="form", lines=1)  # fmt: skip
    ui.progression = gr.Markdown(elem_id="progression")
    with gr.Row():
        ui.num = gr.Slider(1, inputs.MAX_NUM, value=inputs.PAGE["num"], step=1,
                           label="variations", elem_id="num")  # fmt: skip
        ui.tempo = gr.Number(
            inputs.PAGE["tempo"], label="tempo (beats a minute; 0: the piece's own)",
            elem_id="tempo",
        )  # fmt: skip
        ui.transpose = gr.Slider(-inputs.MAX_TRANSPOSE, inputs.MAX_TRANSPOSE,
                                 value=inputs.PAGE["transpose"], step=1,
                                 label="transpose (semitones)", elem_id="transpose")  # fmt: skip
    with gr.Tabs(selected="generate") as ui.tabs:
        with gr.Tab("Generate", id="generate"):
            ui.bars = gr.Slider(1, inputs.MAX_BARS, value=inputs.PAGE["bars"], step=1,
                                label="bars (a song form sets its own)",
                                elem_id="bars")  # fmt: skip
            with gr.Row():
                ui.gen_btn = gr.Button("Generate", variant="primary", elem_id="generate")
                ui.gen_stop = gr.Button("Stop", variant="stop", elem_id="stop-generate")
        _continue_tab(ui)
    with gr.Accordion("advanced settings", open=False, elem_id="advanced"):
        with gr.Row():
            ui.seed = gr.Number(inputs.PAGE["seed"], label="seed (-1: a new one each time)",
                                precision=0, minimum=-1, maximum=SEED_MAX,
                                elem_id="seed")  # fmt: skip
            ui.sampling = [_sampling_widget(name) for name in inputs.SAMPLING]
        ui.reset = gr.Button("↺ the model's own settings", size="sm", elem_id="reset-sampling")
    numbers = (ui.num, ui.seed, *ui.sampling, ui.bars, ui.prompt_bars, ui.seconds, ui.new_bars,
               ui.tempo, ui.transpose)  # fmt: skip
    for component in numbers:
        raw(component)
    return ui


def _results(ui: SimpleNamespace) -> None:
    """The variations side by side (player, audio, downloads, 'Continue this piece'), the
    shown piece's choice and the page's list."""
    ui.message = gr.Markdown(label="message", elem_id="message")
    ui.roll = gr.Image(
        label="piano roll", type="filepath", interactive=False, visible=False, elem_id="roll"
    )  # fmt: skip (the API's picture; the page draws players)
    ui.slots, ui.players, ui.audios, ui.files, ui.take = [], [], [], [], []
    with gr.Row(elem_id="variations", equal_height=False):
        for k in range(inputs.MAX_NUM):
            with gr.Column(visible=False, min_width=300, elem_id=f"variation-{k}") as slot:
                ui.slots.append(slot)
                ui.players.append(gr.HTML(elem_id=f"player-{k}"))
                # the browser's own player (no waveform to decode before it plays)
                ui.audios.append(gr.Audio(
                    label="listen", type="filepath", interactive=False, elem_id=f"audio-{k}",
                    waveform_options=gr.WaveformOptions(show_recording_waveform=False),
                ))  # fmt: skip
                ui.files.append(gr.File(label="download", file_count="multiple",
                                        interactive=False, elem_id=f"downloads-{k}"))  # fmt: skip
                ui.take.append(gr.Button("Continue this piece", size="sm",
                                         elem_id=f"continue-this-{k}"))  # fmt: skip
    ui.pieces = gr.Dropdown([], label="show a piece made on this page", elem_id="piece")
    ui.history = gr.Gallery(label="pieces made on this page", columns=4, object_fit="contain",
                            height=240, allow_preview=False, elem_id="history")  # fmt: skip


def _inputs(ui: SimpleNamespace, names: tuple[str, ...]) -> list[gr.components.Component]:
    """The page's components for an action's inputs, by name (the sampling ones by option)."""
    by_name = {**vars(ui), **dict(zip(inputs.SAMPLING, ui.sampling, strict=True))}
    return [by_name[name] for name in names]


def _wire(page: gr.Blocks, ui: SimpleNamespace, act: Actions) -> None:
    """Events: the two public endpoints in one concurrency group, the rest private."""
    private = {"api_visibility": "private"}
    shown = [ui.session, ui.roll, ui.audios[0], ui.files[0], ui.pieces, ui.history, *ui.players,
             *ui.audios[1:], *ui.files[1:], *ui.slots, ui.message]  # fmt: skip
    model_out = [ui.summary, ui.card, ui.chords, ui.form, *ui.sampling, ui.status]
    page.load(_guarded(act.on_model), [ui.model], model_out, **private)
    ui.model.change(_guarded(act.on_model), [ui.model], model_out, **private)
    ui.reset.click(_guarded(act.reset), [ui.model], ui.sampling, **private)
    gen = ui.gen_btn.click(
        _guarded(_by_name(act.generate, GENERATE)), _inputs(ui, GENERATE), shown,
        api_name="generate", concurrency_id="sampling", show_progress_on=[ui.message],
    )  # fmt: skip
    prompt = [ui.prompt, ui.mode, ui.prompt_bars, ui.seconds]
    cont = ui.cont_btn.click(
        _guarded(_by_name(act.continue_, CONTINUE)), _inputs(ui, CONTINUE), shown,
        api_name="continue", concurrency_id="sampling", show_progress_on=[ui.message],
    )  # fmt: skip
    # Stop does not cancel a running job (it ends with what was written), only waiting ones
    for btn in (ui.gen_stop, ui.cont_stop):
        stopping = btn.click(act.stop, [ui.session], None, queue=False, **private)
        stopping.failure(None, None, None, cancels=[gen, cont], queue=False, **private)
    for trigger in (ui.chords.change, ui.form.change, ui.bars.release):
        trigger(controls.preview, [ui.chords, ui.form, ui.bars], ui.progression, **private)
    previewed = [ui.session, ui.prompt_roll]
    for trigger in (ui.prompt.upload, ui.mode.change, ui.prompt_bars.release, ui.seconds.release):
        trigger(_guarded(act.preview), [ui.model, *prompt, ui.session], previewed, **private)
    for k, btn in enumerate(ui.take):
        btn.click(
            _guarded(act.take_on(k)),
            [ui.model, ui.session],
            [ui.prompt, ui.tabs, ui.mode, ui.prompt_bars],
            **private,
        ).then(_guarded(act.preview), [ui.model, *prompt, ui.session], previewed, **private)
    ui.pieces.input(act.pick, [ui.pieces, ui.session], shown, **private)
    ui.history.select(act.select, [ui.session], shown, **private)
    page.unload(act.left)


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
        act = Actions(models, default)
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
    made = gradio_folders_to_make()  # before the page: building it makes them
    page = build(models, root, default)
    page.temp_made = made  # ours to remove when the studio stops
    # a prompt handed over by 'Continue this piece' is read where it lies, but gr.File's
    # preprocessing opens a temporary file in Gradio's cache folder first: it must exist
    temp = Path(gr.utils.get_upload_folder())
    temp.mkdir(parents=True, exist_ok=True)
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
            head=PLAYHEAD_JS,
        )
    except OSError as exc:
        if "port" not in str(exc):
            raise
        raise MusicgenError(
            f"port: {port} is in use on {host} (another program listens there); give another --port"
        ) from None
    return page


GRADIO_HISTORY = "vibe_edit_history"  # a folder Gradio's app makes in its temp folder


def gradio_folders_to_make() -> list[Path]:
    """The folders Gradio's app will make outside the studio's own (its temp folder, read when
    Gradio was imported, and the history folder in it) that do not exist yet."""
    import gradio.routes

    temp = Path(getattr(gradio.routes, "DEFAULT_TEMP_DIR", "") or gr.utils.get_upload_folder())
    return [p for p in (temp, temp / GRADIO_HISTORY) if not p.exists()][:1]


def local_url(page: gr.Blocks) -> str:
    return str(page.local_url or "").rstrip("/") + "/"
