"""Every option that is taken acts (issue 66), sampled: a valid request (a model, a start from
scratch or from a prompt in bars or seconds, a form, chords, chords per phrase) with one option
moved off its default either is refused in one line that names the option, or writes another
piece than the same request without it, or is a no-op that docs/generation.md ("When an option
changes nothing") names for that input, checked on the pieces themselves. A bonus reweights
draws, and on an untrained model's short piece it may move none: such a request is tried at
three seeds, and must act or meet its no-op at one of them.

Tiny untrained models, short pieces; a bounded number of examples for `make test`;
`OPTION_SPACE_EXAMPLES=2000` runs a long search.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import pytest
import symusic

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, assume, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from musicgen.errors import EmptyPiece, MusicgenError  # noqa: E402
from musicgen.generation.rules.in_key import MIN_NOTES  # noqa: E402
from tests.test_request_space import SONG, SONG_TOKENS, bars_of  # noqa: E402

EXAMPLES = int(os.environ.get("OPTION_SPACE_EXAMPLES", "30"))
MAX_TOKENS = 80
LONGER = {"guidance": 400, "in_key": 300}  # they act from the second phrase, the 17th note
# two values off the usual defaults per option; the one that differs from the model's is used
# (the legato, an edit of the written melody, is checked where it acts by tests/test_legato.py)
VALUES = {
    "temperature": (1.5, 0.5),
    "top_k": (1, 5),
    "top_p": (0.5, 0.3),
    "repeat": (8.0, 0.0),
    "melody_range": (1, 0),
    "in_key": (8.0, 0.0),
    "guidance": (10.0, 0.0),
    "min_tokens": (100, 0),
    "chord_tones": (0.0, 8.0),
    "grammar": (False, True),
    "tempo": (60.0, 150.0),
    "transpose": (3, -2),
    "melody_program": (0, 73),
}
CONTROLS = {  # the song model's controls (the others refuse forms and chords)
    "none": {},
    "form": {"form": "A2B1A2"},
    "chords": {"chords": "C G Am F"},
    "chords per phrase": {"form": "A2B1A2", "chords": "A: C G; B: F G"},
}
STARTS = {
    "scratch": None,
    "prompt": {"bars": 2},
    "seconds": {"seconds": 3.0},
}


@pytest.fixture(scope="module")
def models(tiny_checkpoints, tmp_path_factory):
    from conftest import make_checkpoint

    import musicgen

    song = make_checkpoint(tmp_path_factory.mktemp("options"), str(SONG_TOKENS))
    return {
        "remi": musicgen.load(tiny_checkpoints["remi"]),
        "song": musicgen.load(song),
        "groove": musicgen.load(tiny_checkpoints["groove"]),
    }


def requests():
    return st.fixed_dictionaries(
        {
            "model": st.sampled_from(["remi", "song", "song", "song", "groove"]),
            "start": st.sampled_from(list(STARTS)),
            "control": st.sampled_from(list(CONTROLS)),
            "option": st.sampled_from(list(VALUES)),
            "seed": st.integers(0, 3),
        }
    )


def run(model, r: dict, option: dict) -> tuple[object, bytes]:
    """The request (with `option`, a dict of at most one field) through the API, and the
    bytes of its written MIDI."""
    control = CONTROLS[r["control"]]
    most = LONGER.get(r["option"], MAX_TOKENS)
    fields = {**control, **option, "seed": r["seed"], "max_tokens": most}
    prompt = STARTS[r["start"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyPiece)
        if prompt is None:
            music = model.generate(**({} if "form" in control else {"bars": 4}), **fields)
        else:
            new = {} if "form" in control else {"new_bars": 3}
            music = model.continue_midi(SONG, **prompt, **new, **fields)
    with tempfile.TemporaryDirectory() as folder:
        return music, music.save(Path(folder) / "piece.mid").read_bytes()


def value_for(model, name: str) -> object:
    """The first of the option's two values that is not the model's default for it."""
    if name in ("grammar", "tempo", "transpose", "melody_program"):
        default = {"grammar": True}.get(name)
    else:
        default = getattr(model.options(), name)
    return next(v for v in VALUES[name] if v != default)


def score(data: bytes) -> symusic.Score:
    return symusic.Score.from_midi(data)


def notes(data: bytes, melody: bool | None = None) -> list:
    """The piece's notes (all, or those of the Melody track or of the others)."""
    return [n for t in score(data).tracks for n in t.notes
            if melody is None or (t.name == "Melody") == melody]  # fmt: skip


def bars(data: bytes) -> int:
    return bars_of(score(data))


def no_op(model, name: str, value, r: dict, off, off_midi: bytes) -> str | None:
    """Why the option changed nothing for this input, as docs/generation.md ("When an option
    changes nothing") says, checked on the piece written without it; None: no such reason."""
    new = off.new_notes if off.new_notes is not None else len(notes(off_midi))
    if name == "min_tokens" and ("form" in CONTROLS[r["control"]] or off.stop != "end"):
        return "min_tokens: the piece did not end early"
    if name == "min_tokens" and off.sampled >= value:
        return "min_tokens: the piece was that long anyway"
    if name == "in_key" and len(notes(off_midi)) <= MIN_NOTES:
        return "in_key: too few notes to set a key"
    if name == "melody_range":
        pitches = [n.pitch for n in notes(off_midi, melody=True)]
        if not pitches or max(pitches) - min(pitches) <= value:
            return "melody_range: the melody kept within it"
    if name == "chord_tones":  # REMI only: the others refuse chords
        bar_ids = set(model.tokenizer.bar_start_ids())
        if not bar_ids & set(off.ids[max(off.prompt_len - 1, 0) :]):
            return "chord_tones: no new bar (the chords start at the first new bar)"
    labels = [p.label for p in model.tokenizer.sections(off.ids)]
    if name == "repeat" and labels and len(set(labels)) == len(labels):
        return "repeat: no phrase whose label came before"
    if name == "repeat" and not labels and bars(off_midi) <= 4:
        return "repeat: no bar 4 or 8 bars back"
    if name == "guidance" and len(model.tokenizer.sections(off.ids)) < 2:
        return "guidance: fewer than two phrases"
    if name == "melody_program" and not notes(off_midi, melody=True):
        return f"{name}: no melody"
    if name in ("chord_tones", "in_key", "transpose", "temperature", "top_p") and new == 0:
        return f"{name}: no new note"
    return None


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 100,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a failure is shown as found
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(r=requests())
def test_an_option_taken_acts_or_is_a_named_no_op(models, r):
    model = models[r["model"]]
    try:
        off, off_midi = run(model, r, {})
    except MusicgenError:
        assume(False)  # the request without the option is refused: nothing to compare
    name = r["option"]
    value = value_for(model, name)
    try:
        _, on_midi = run(model, r, {name: value})
    except MusicgenError as exc:
        assert name in str(exc).split(":")[0] and "\n" not in str(exc), str(exc)
        event(f"refused: {name}")
        return
    for seed in (r["seed"], r["seed"] + 4, r["seed"] + 8):  # a bonus may move no draw of one piece
        if seed != r["seed"]:
            r = dict(r, seed=seed)
            (off, off_midi), (_, on_midi) = run(model, r, {}), run(model, r, {name: value})
        if on_midi != off_midi:
            event(f"acted: {name}")
            return
        reason = no_op(model, name, value, r, off, off_midi)
        if reason is not None:
            event(reason)
            return
    pytest.fail(f"{name}={value!r} changed nothing, for no reason of the docs, at 3 seeds: {r}")
