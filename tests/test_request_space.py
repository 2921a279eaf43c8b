"""The request space, sampled (issue 66): any combination of model, form, chords, prompt
(extending the piece from its end too), lengths, sampling options, tempo, transposition and
melody instrument either is refused in one line (`MusicgenError`) or gives a piece whose written
MIDI reads back (pretty_midi, and musicgen's own prompt reader) and whose bars and phrase
markers keep to the request.

Tiny untrained models and short pieces (`max_tokens`), a bounded number of examples for
`make test`; `REQUEST_SPACE_EXAMPLES=10000` runs a long search. The studio's handler
(`jobs.run_generate` / `run_continue`, what `Actions` runs) gives the same outcome for every
request the page can send (`studio_can_ask`): the same one-line refusal (where several fields
are bad, each side may name a different one of them), or the same written MIDI. Not covered
yet: whether each option acted (the output differs from the run without it).
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings
from pathlib import Path

import pretty_midi
import pytest
import symusic

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from musicgen.errors import EmptyPiece, MusicgenError  # noqa: E402
from musicgen.tokenizers.form import parse_form, place  # noqa: E402
from tests.paths import ROOT  # noqa: E402

SONG = ROOT / "data" / "demo" / "pop909_005.mid"
SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"
EXAMPLES = int(os.environ.get("REQUEST_SPACE_EXAMPLES", "30"))
PAGE_SIZES = {"bars", "new_bars", "seconds"}  # the page's own, tighter ranges (studio.inputs)
MAX_TOKENS = 80  # per piece: short pieces keep an example near a tenth of a second

FORMS = (["A2", "i1A2", "A2B2", "auto", "i2A2"], ["A40", "A" + "9" * 50, "Q2", "/dev/zero"])
CHORDS = (["C G", "C G Am F", "A: C G; B: F", "i: N; A: C G", "A: N N; B: N"],
          ["A: C G; Z: Am", "A:C G", "C x99999", "Hm7b9"])  # fmt: skip
NUMBERS = {  # the valid values more often than the invalid ones
    "temperature": [0.5, 1.0, 1.5, 0.7, 1.2, -1.0, math.nan],
    "top_k": [0, 1, 5, 10, 20, -3],
    "top_p": [0.5, 0.9, 1.0, 0.8, 1.5],
    "repeat": [0.0, 2.0],
    "melody_range": [0.0, 1.0],
    "in_key": [0.0, 1.0],
    "guidance": [0.0, 1.0],
    "min_tokens": [0, 5],
    "chord_tones": [0.0, 2.0],
}
SOUND = {  # how the written piece sounds (`generation.api.finish`; issue 65)
    "tempo": [100.0, 60, 300, 10.0],
    "transpose": [0, 3, -12, 48, 100],
    "melody_program": [0, 73, 81, 128],
}


@pytest.fixture(scope="module")
def models(tiny_checkpoints, tmp_path_factory):
    """Three tiny models: plain REMI, REMI with melody and sections (and forms to draw), groove."""
    from conftest import make_checkpoint

    import musicgen

    folder = tmp_path_factory.mktemp("space")
    song = make_checkpoint(folder, str(SONG_TOKENS))
    (folder / "forms.json").write_text('["A2B2", "i1A2o1"]')
    return {
        "remi": musicgen.load(tiny_checkpoints["remi"]),
        "song": musicgen.load(song),
        "groove": musicgen.load(tiny_checkpoints["groove"]),
    }


def mostly_valid(valid: list, invalid: list):
    """None or a valid value, an invalid one a sixth of the time."""
    return st.one_of(st.none(), st.none(), st.sampled_from(valid), st.sampled_from(valid),
                     st.sampled_from(valid), st.sampled_from(invalid))  # fmt: skip


def requests():
    """One request: the model, how it starts (scratch or a prompt) and its fields."""
    options = st.fixed_dictionaries(
        {},
        optional={
            **{name: st.sampled_from(values) for name, values in NUMBERS.items()},
            **{name: st.sampled_from(values) for name, values in SOUND.items()},
            "grammar": st.booleans(),
            "legato": st.booleans(),
        },
    )
    prompt = st.one_of(
        st.none(),
        st.fixed_dictionaries({"bars": st.sampled_from([1, 2, 4])}),
        st.fixed_dictionaries({"prompt_bars": st.sampled_from([(0, 2), (8, 12), (3, 1)])}),
        st.fixed_dictionaries({"bars": st.sampled_from([1, 2])}),
        st.fixed_dictionaries({"seconds": st.sampled_from([2.0, 3.3, -1.0])}),
        st.fixed_dictionaries({"extend": st.just(True)}),
    )
    return st.fixed_dictionaries(
        {
            "model": st.sampled_from(["remi", "song", "song", "song", "groove"]),
            "prompt": prompt,
            "bars": st.sampled_from([None, None, 1, 2, 3, 4, 8, 0]),
            "only": st.booleans(),
            "form": mostly_valid(*FORMS),
            "chords": mostly_valid(*CHORDS),
            "seed": st.integers(0, 3),
            "options": options,
        }
    )


def run(model, r: dict):
    """The request through the API, as `generate` or `continue` would make it."""
    fields = {k: v for k, v in r["options"].items()}
    fields |= {k: r[k] for k in ("form", "chords") if r[k] is not None}
    fields |= {"seed": r["seed"], "max_tokens": MAX_TOKENS}
    if r["prompt"] is None:
        bars = {} if r["bars"] is None else {"bars": r["bars"]}
        return model.generate(**bars, **fields)
    new = {} if r["bars"] is None else {"new_bars": r["bars"]}
    return model.continue_midi(SONG, **r["prompt"], **new, only_continuation=r["only"], **fields)


def bars_of(score: symusic.Score) -> int:
    """The 4/4 bars in which a score's notes start (from time 0)."""
    last = max((n.time for t in score.tracks for n in t.notes), default=-1)
    return last // (4 * score.ticks_per_quarter) + 1


def check_piece(model, r: dict, music, folder: Path) -> None:
    """The written file reads back and keeps to the request's bars and form."""
    path = music.save(folder / "piece.mid")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pretty_midi's notes on meta events; errors still raise
        pretty_midi.PrettyMIDI(str(path))
    score = symusic.Score(str(path))
    assert score.start() >= 0
    has_notes = any(len(t.notes) for t in score.tracks)
    if has_notes:
        reread = model.prompt(path, prompt_bars=(0, bars_of(score)))  # every bar, as written
        assert reread.bars == bars_of(score)
    if "tempo" in r["options"]:  # a set tempo is held: one tempo event
        assert [round(t.qpm, 3) for t in score.tempos] == [r["options"]["tempo"]]
    if "melody_program" in r["options"]:
        assert {t.program for t in score.tracks if t.name == "Melody"} <= {
            r["options"]["melody_program"]
        }
    if r["bars"] is not None:
        held = 0 if r["prompt"] is None else prompt_end(model, r)
        if r["only"] and r["prompt"] is not None:  # the bar holding a cut in seconds is bar 0
            held = int("seconds" in r["prompt"])
        assert bars_of(score) <= held + r["bars"]
    if r["form"] is not None and r["form"] != "auto" and r["prompt"] is None:
        asked = {(s.bar, f"{s.label}{s.bars}") for s in place(parse_form(r["form"]))}
        bar = 4 * score.ticks_per_quarter
        phrases = {
            (m.time // bar, m.text) for m in score.markers if not m.text.startswith("Chord ")
        }
        assert phrases <= asked  # chord markers ("Chord Am") aside


def studio_run(model, r: dict, folder: Path) -> Path:
    """The request through the studio's handler (`jobs.run_generate` / `run_continue`, what
    `Actions.generate` and `Actions.continue_` run in their worker thread): its written MIDI."""
    from musicgen.studio import jobs

    fields = dict(r["options"]) | {k: r[k] for k in ("form", "chords") if r[k] is not None}
    fields |= {"seed": r["seed"], "max_tokens": MAX_TOKENS, "num": 1}
    session = jobs.Session(folder)
    if r["prompt"] is None:
        [piece] = jobs.run_generate(model, session, r["model"], bars=r["bars"], **fields)
    else:
        p = r["prompt"]
        length = {"mode": "seconds", "seconds": p["seconds"]} if "seconds" in p else {
            "mode": "bars", "prompt_bars": p["bars"]}  # fmt: skip
        [piece] = jobs.run_continue(model, session, r["model"], SONG, new_bars=r["bars"],
                                    **length, **fields)  # fmt: skip
    return piece.midi


def studio_can_ask(r: dict) -> bool:
    """Whether the page can send this request: it has no `prompt_bars=(start, end)` (a range
    of the prompt: API and CLI only), no continuation-only file (the page always writes the
    prompt with its continuation) and no continuation left to run to its end token (the page
    always asks for new bars, its own 4 where left out). Nor bars beside a form: on the page a
    form sets the bars (its bars box is overruled, `controls.settle_form`), where the API
    refuses bars that disagree with the form."""
    if r["form"] is not None and r["bars"] is not None:
        return False
    if set(SOUND) & set(r["options"]):  # the page applies its own tempo and transposition
        return False
    if r["prompt"] is not None and "extend" in r["prompt"]:  # not on the page yet
        return False
    if r["prompt"] is None:
        return True
    return "prompt_bars" not in r["prompt"] and not r["only"] and r["bars"] is not None


def notes(path: Path) -> list:
    score = symusic.Score(str(path))
    return sorted((t.name, t.is_drum, n.time, n.duration, n.pitch, n.velocity)
                  for t in score.tracks for n in t.notes)  # fmt: skip


def same_in_studio(model, r: dict, outcome, folder: Path) -> None:
    """The studio's handler gives the API's outcome: the same one-line refusal, or the same
    written MIDI (the same bytes, else the same notes)."""
    if not studio_can_ask(r):
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyPiece)
            midi = studio_run(model, r, folder / "studio")
    except MusicgenError as exc:
        assert isinstance(outcome, MusicgenError), f"the studio refuses what the API takes: {exc}"
        studio, api = (str(e).split(":")[0] for e in (exc, outcome))
        if str(exc) == str(outcome):
            pass
        elif studio == api and studio in PAGE_SIZES:  # the page's tighter range, same field
            assert str(exc).startswith(f"{studio}: must be"), (str(exc), str(outcome))
        elif studio == api:
            assert str(exc) == str(outcome)
        else:  # several bad fields, checked in another order: each names one the request set
            asked = {*r["options"], *r, *(r["prompt"] or {}), "new_bars", "prompt_bars"}
            assert {studio.split()[0], api.split()[0]} <= asked, (str(exc), str(outcome))
        return
    assert not isinstance(outcome, MusicgenError), (
        f"the studio takes what the API refuses: {outcome}"
    )
    api = outcome.save(folder / "api.mid")
    if midi.read_bytes() != api.read_bytes():
        assert notes(midi) == notes(api)


def prompt_end(model, r: dict) -> int:
    """The bar after the prompt, counted from the file's time 0 (a bound: leading silent bars
    skipped by `bars` count too)."""
    if "extend" in r["prompt"]:  # the whole song
        return bars_of(symusic.Score(str(SONG)))
    p = model.prompt(SONG, **r["prompt"])
    return p.first_bar + p.bars


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 100,  # the same examples in every `make test`
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(r=requests())
def test_a_request_is_refused_in_one_line_or_reads_back(models, r):
    model = models[r["model"]]
    with tempfile.TemporaryDirectory() as folder:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", EmptyPiece)
                music = run(model, r)
        except MusicgenError as exc:
            assert str(exc) and "\n" not in str(exc), repr(exc)
            event(f"refused: {str(exc).split(':')[0]}")
            same_in_studio(model, r, exc, Path(folder))
            return
        event("a piece" + (" (no new note)" if music.new_notes == 0 else ""))
        check_piece(model, r, music, Path(folder))
        same_in_studio(model, r, music, Path(folder))
