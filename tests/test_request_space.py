"""The request space, sampled (issue 66): any combination of model, form, chords, prompt,
lengths and sampling options either is refused in one line (`MusicgenError`) or gives a piece
whose written MIDI reads back (pretty_midi, and musicgen's own prompt reader) and whose bars and
phrase markers keep to the request.

Tiny untrained models and short pieces (`max_tokens`), a bounded number of examples for
`make test`; `REQUEST_SPACE_EXAMPLES=10000` runs a long search. Not covered yet: whether each
option acted (the output differs from the run without it) and the studio's handler giving the
same outcome (after the sampling rules become one protocol, issue 64).
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
    if r["bars"] is not None:
        held = 0 if r["prompt"] is None else prompt_end(model, r)
        if r["only"] and r["prompt"] is not None:  # the bar holding a cut in seconds is bar 0
            held = int("seconds" in r["prompt"])
        assert bars_of(score) <= held + r["bars"]
    if r["form"] is not None and r["form"] != "auto" and r["prompt"] is None:
        asked = {(s.bar, f"{s.label}{s.bars}") for s in place(parse_form(r["form"]))}
        bar = 4 * score.ticks_per_quarter
        assert {(m.time // bar, m.text) for m in score.markers} <= asked


def prompt_end(model, r: dict) -> int:
    """The bar after the prompt, counted from the file's time 0 (a bound: leading silent bars
    skipped by `bars` count too)."""
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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyPiece)
            music = run(model, r)
    except MusicgenError as exc:
        assert str(exc) and "\n" not in str(exc), repr(exc)
        event(f"refused: {str(exc).split(':')[0]}")
        return
    event("a piece" + (" (no new note)" if music.new_notes == 0 else ""))
    with tempfile.TemporaryDirectory() as folder:
        check_piece(model, r, music, Path(folder))
