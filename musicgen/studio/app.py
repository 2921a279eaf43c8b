"""The studio's page: a gr.Blocks wired to `jobs` (which does the work and the checks).

The page's two actions are Gradio API endpoints, `generate` and `continue` (same inputs as the
widgets, in the order below), so a `gradio_client` script can drive the studio; both share one
concurrency group sized to the machine (`concurrency`). Every endpoint argument may be left
out: None means the page's own value (`inputs.PAGE`) or the chosen model's own sampling
setting, which is what the page shows; the sampling widgets open empty so that the API's
defaults are None, and the page fills them with the model's values as it loads.
Every page has its own `jobs.Session` (gr.State: folder, pieces, stop flags), kept for its
browser across reloads (`keep.Kept`, a key in a gr.BrowserState) and deleted once idle;
closing or reloading a page stops its jobs (`Actions.left`).
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

from musicgen.errors import MusicgenError
from musicgen.studio import controls, inputs, jobs, layout, words
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
from musicgen.studio.keep import release
from musicgen.studio.player import PLAYER_CSS, PLAYHEAD_JS
from musicgen.studio.running import page_line

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
LOOKS = ("chords", "form", "tempo", "transpose", "melody")
GENERATE = ("model", "bars", "num", "seed", *inputs.SAMPLING, *LOOKS, "session")
CONTINUE = ("model", "prompt", "mode", "prompt_bars", "seconds", "new_bars", "num", "seed",
            *inputs.SAMPLING, *LOOKS, "session")  # fmt: skip
REGENERATE = ("model", "section", "first_bar", "last_bar", "seed", *inputs.SAMPLING, "tempo",
              "transpose", "melody", "session")  # fmt: skip


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


def _inputs(ui: SimpleNamespace, names: tuple[str, ...]) -> list[gr.components.Component]:
    """The page's components for an action's inputs, by name (the sampling ones by option)."""
    by_name = {**vars(ui), **dict(zip(inputs.SAMPLING, ui.sampling, strict=True))}
    by_name |= {"section": ui.redo_section, "first_bar": ui.from_bar, "last_bar": ui.to_bar}
    return [by_name[name] for name in names]


def _wire(page: gr.Blocks, ui: SimpleNamespace, act: Actions) -> None:
    """Events: the two public endpoints in one concurrency group, the rest private."""
    private = {"api_visibility": "private"}
    shown = [ui.session, ui.roll, ui.audios[0], ui.files[0], ui.pieces, ui.history, *ui.players,
             *ui.audios[1:], *ui.files[1:], *ui.slots, ui.redo_section, ui.message]  # fmt: skip
    model_out = [ui.summary, ui.card, ui.chords, ui.form, *ui.sampling, ui.status, ui.builder]
    page.load(_guarded(act.on_model), [ui.model], model_out, **private)
    page.load(_guarded(act.restore), [ui.keep, ui.session], [ui.keep, *shown], **private)
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
    redo = ui.redo.click(
        _guarded(_by_name(act.regenerate, REGENERATE)), _inputs(ui, REGENERATE), shown,
        concurrency_id="sampling", show_progress_on=[ui.message], **private,
    )  # fmt: skip
    ui.undo.click(_guarded(act.undo), [ui.session], shown, **private)
    # Stop does not cancel a running job (it ends with what was written), only waiting ones
    for btn in (ui.gen_stop, ui.cont_stop):
        stopping = btn.click(act.stop, [ui.session], None, queue=False, **private)
        stopping.failure(None, None, None, cancels=[gen, cont, redo], queue=False, **private)
    for trigger in (ui.chords.change, ui.form.change, ui.bars.release):
        trigger(controls.preview, [ui.chords, ui.form, ui.bars], ui.progression, **private)
    add = [ui.form, ui.section, ui.section_bars]
    ui.add_section.click(_guarded(words.add_section), add, ui.form, **private)
    ui.clear_form.click(lambda: "", None, ui.form, **private)
    previewed = [ui.session, ui.prompt_roll]
    # the mode on a user's change only (`input`): 'Continue this piece' sets it and previews
    # once itself (two previews at once leave Gradio's image hidden)
    for trigger in (ui.prompt.upload, ui.mode.input, ui.prompt_bars.release, ui.seconds.release):
        trigger(_guarded(act.preview), [ui.model, *prompt, ui.session], previewed, **private)
    for k, btn in enumerate(ui.take):
        btn.click(
            _guarded(act.take_on(k)),
            [ui.model, ui.session],
            [ui.prompt, ui.tabs, ui.mode, ui.prompt_bars, ui.form],
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
    with gr.Blocks(title=layout.TITLE, analytics_enabled=False, delete_cache=(600, 3600)) as page:
        session = gr.State(jobs.Session(root), delete_callback=release,
                           time_to_live=inputs.SESSION_IDLE_S)  # fmt: skip
        keep = gr.BrowserState(None, storage_key="musicgen-studio-pieces")
        ui = layout.controls(models, default)
        layout.results(ui)
        ui.session, ui.keep = session, keep
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
