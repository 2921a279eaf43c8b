"""The studio page's widgets, laid out for a songwriter (inside an open gr.Blocks): the model,
then Generate / Continue (on the first screen of a phone), the song (form builder, form,
chords, bar-by-bar preview), the sound, one folded "Advanced" with what each setting does to
the music, the model's card, and the results. Wired to the actions by `studio.app`; every
label in `words` (plain words, held to `words.JARGON` by the tests)."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

from musicgen.errors import SEED_MAX
from musicgen.generation.api.request import SPECS
from musicgen.studio import inputs, jobs, rework, words

TITLE = "musicgen studio"
INTRO = "Write a song from scratch, or upload a MIDI file to continue it."


def raw(component):
    """`component` handing its value to the studio's checks as sent: a typed or scripted 'abc',
    None or 1.5 gets the one-line message naming the parameter (`inputs.whole`), not Gradio's
    rounding (seed 1.5 would become 2) or its multi-line preprocessing error."""
    component.preprocess = lambda payload: payload
    return component


def _sampling_widget(name: str) -> gr.components.Component:
    """A sampling option's widget: a slider over the request's span for it (inside its range,
    `request.SPECS`), else a number box, labelled with what it does to the music. It opens
    empty (None: the model's own, which the page fills in as it loads): the API's default
    for it is then None too."""
    spec = SPECS[name]
    label, info = words.SAMPLING.get(name, (name, ""))
    elem_id = name.replace("_", "-")
    if spec.widget is None:
        return gr.Number(None, label=label, info=info, precision=0, minimum=spec.range.low,
                         elem_id=elem_id)  # fmt: skip
    low, high, step = spec.widget
    slider = gr.Slider(low, high, value=None, step=step, label=label, info=info,
                       elem_id=elem_id, buttons=[])  # fmt: skip
    slider.value = None  # a slider fills an empty value with its minimum: keep it empty
    return slider


def _tabs(ui: SimpleNamespace) -> None:
    """Generate (its bars and buttons) and Continue (the file, how much of it, the new bars)."""
    with gr.Tabs(selected="generate") as ui.tabs:
        with gr.Tab("Generate", id="generate"):
            ui.bars = gr.Slider(1, inputs.MAX_BARS, value=inputs.PAGE["bars"], step=1,
                                label="Bars (a song form sets its own)",
                                elem_id="bars")  # fmt: skip
            with gr.Row():
                ui.gen_btn = gr.Button("Generate", variant="primary", elem_id="generate",
                                       min_width=100)  # fmt: skip
                ui.gen_stop = gr.Button("Stop", variant="stop", elem_id="stop-generate",
                                        min_width=100)  # fmt: skip
        with gr.Tab("Continue", id="continue"):
            with gr.Row():
                ui.prompt = gr.File(label="MIDI file to continue", file_types=[".mid", ".midi"],
                                    type="filepath", elem_id="prompt-file")  # fmt: skip
                ui.prompt_roll = gr.Image(label="What the model will hear",
                                          type="filepath", interactive=False,
                                          elem_id="prompt-roll")  # fmt: skip
            with gr.Row():
                ui.mode = gr.Radio(words.MODES, value=inputs.PAGE["mode"],
                                   label="What the model hears first", elem_id="mode")  # fmt: skip
                ui.prompt_bars = gr.Slider(1, inputs.MAX_PROMPT_BARS,
                                           value=inputs.PAGE["prompt_bars"], step=1,
                                           label="Bars of it to use",
                                           elem_id="prompt-bars")  # fmt: skip
                ui.seconds = gr.Slider(0.5, inputs.MAX_SECONDS, value=inputs.PAGE["seconds"],
                                       step=0.5, label="Seconds of it to use")  # fmt: skip
                ui.new_bars = gr.Slider(1, inputs.MAX_NEW_BARS, value=inputs.PAGE["new_bars"],
                                        step=1, label="Bars to add",
                                        elem_id="new-bars")  # fmt: skip
            with gr.Row():
                ui.cont_btn = gr.Button("Continue", variant="primary", elem_id="continue")
                ui.cont_stop = gr.Button("Stop", variant="stop", elem_id="stop-continue")


def _song(ui: SimpleNamespace) -> None:
    """The song: the form builder (a section and its bars, added in order), the form it
    writes, then the chords it lays out, and their preview bar by bar. The builder and the
    form show for a model that writes sections only (`Actions.on_model`)."""
    with gr.Row(visible=False, elem_id="form-builder") as ui.builder:
        ui.section = gr.Dropdown(list(words.BUILDER), value="Verse", label="Section",
                                 elem_id="section", min_width=120)  # fmt: skip
        ui.section_bars = gr.Number(8, label="Its bars", precision=0, minimum=1,
                                    maximum=32, elem_id="section-bars", min_width=80)  # fmt: skip
        ui.add_section = gr.Button("Add section", size="sm", elem_id="add-section")
        ui.clear_form = gr.Button("Clear form", size="sm", elem_id="clear-form")
    ui.form = gr.Textbox(label=words.FORM_LABEL, info=words.form_info(False), visible=False,
                         elem_id="form", lines=1)  # fmt: skip
    ui.chords = gr.Textbox(label=words.CHORDS_LABEL, info=words.CHORDS_INFO, visible=False,
                           elem_id="chords", lines=1)  # fmt: skip
    ui.progression = gr.Markdown(elem_id="progression")
    with gr.Row():
        ui.num = gr.Slider(1, inputs.MAX_NUM, value=inputs.PAGE["num"], step=1,
                           label="Versions to write at once", elem_id="num")  # fmt: skip
        ui.tempo = gr.Number(inputs.PAGE["tempo"], label="Tempo (beats a minute; 0: its own)",
                             elem_id="tempo")  # fmt: skip
        ui.transpose = gr.Slider(-inputs.MAX_TRANSPOSE, inputs.MAX_TRANSPOSE,
                                 value=inputs.PAGE["transpose"], step=1,
                                 label="Transpose (semitones)", elem_id="transpose")  # fmt: skip
        ui.melody = gr.Dropdown(list(words.INSTRUMENTS.items()), value=words.INSTRUMENTS["Flute"],
                                label=words.MELODY_LABEL, elem_id="melody")  # fmt: skip


def controls(models: jobs.ModelCache, default: str) -> SimpleNamespace:
    """The model choice, Generate / Continue, the song, the folded Advanced settings and the
    model's card (inside an open gr.Blocks)."""
    ui = SimpleNamespace()
    gr.Markdown(f"# {TITLE}\n{INTRO}")
    choices = [(models.title(label), label) for label in models.choices]
    ui.model = gr.Dropdown(choices, value=default, label="Model", elem_id="model")
    ui.status = gr.Markdown(elem_id="status")
    ui.summary = gr.Markdown(models.summary(default), elem_id="summary")
    _tabs(ui)
    _song(ui)
    with gr.Accordion("Advanced", open=False, elem_id="advanced"):
        ui.seed = gr.Number(inputs.PAGE["seed"], label=words.TAKE[0], info=words.TAKE[1],
                            precision=0, minimum=-1, maximum=SEED_MAX,
                            elem_id="seed")  # fmt: skip
        ui.sampling = [_sampling_widget(name) for name in inputs.SAMPLING]
        ui.reset = gr.Button("↺ the model's own settings", size="sm", elem_id="reset-sampling")
    with gr.Accordion("About this model", open=False, elem_id="about"):
        ui.card = gr.Markdown(elem_id="card")  # the musician's card, as the model loads
    numbers = (ui.num, ui.seed, *ui.sampling, ui.bars, ui.prompt_bars, ui.seconds, ui.new_bars,
               ui.tempo, ui.transpose, ui.section_bars)  # fmt: skip
    for component in numbers:
        raw(component)
    return ui


def _rework(ui: SimpleNamespace) -> None:
    """Undo, and writing one section of the shown piece again (one of its sections, or bars
    from..to as the player counts them)."""
    with gr.Row(elem_id="rework", equal_height=True):
        ui.redo_section = gr.Dropdown([rework.BARS_CHOICE], value=rework.BARS_CHOICE[1],
                                      label="Write again", elem_id="redo-section",
                                      min_width=200)  # fmt: skip
        ui.from_bar = raw(gr.Number(1, label="From bar", precision=0, minimum=1,
                                    elem_id="from-bar", min_width=80))  # fmt: skip
        ui.to_bar = raw(gr.Number(4, label="To bar", precision=0, minimum=1, elem_id="to-bar",
                                  min_width=80))  # fmt: skip
        ui.redo = gr.Button("Write it again", size="sm", elem_id="redo", min_width=100)
        ui.undo = gr.Button("Undo", size="sm", elem_id="undo", min_width=80)


def results(ui: SimpleNamespace) -> None:
    """The variations side by side (player, audio, downloads, 'Continue this piece'), undo
    and writing a section again, the shown piece's choice and the page's list."""
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
                    label="Listen", type="filepath", interactive=False, elem_id=f"audio-{k}",
                    waveform_options=gr.WaveformOptions(show_recording_waveform=False),
                ))  # fmt: skip
                ui.files.append(gr.File(label="Download", file_count="multiple",
                                        interactive=False, elem_id=f"downloads-{k}"))  # fmt: skip
                ui.take.append(gr.Button("Continue this piece", size="sm",
                                         elem_id=f"continue-this-{k}"))  # fmt: skip
    _rework(ui)
    ui.pieces = gr.Dropdown([], label="Show a piece made on this page", elem_id="piece")
    ui.history = gr.Gallery(label="Pieces made on this page", columns=4, object_fit="contain",
                            height=240, allow_preview=False, elem_id="history")  # fmt: skip
