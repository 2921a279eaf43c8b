"""The sampling rules as one protocol (`generation.rules`): a new rule is one module and one
registry line, its option declared once and seen everywhere; every rule acts under every
control; the chord tones act under a form."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import make_checkpoint
from paths import DATA, ROOT

import musicgen
from musicgen.generation.decoding.guidance import GUIDANCE
from musicgen.generation.rules import RULES

SONG = DATA / "pop909" / "001" / "001.mid"
SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"

# --- the acceptance case: chord tones under a form ---------------------------------------------

FORM_CHORDS = ["--form", "i2A4B4", "--chords", "i: C Am; A: C G Am F; B: F G C Am"]


@pytest.mark.slow
def test_the_chord_tones_act_under_a_form(tmp_path):
    """`--chord-tones 0` and `8` write different pieces with a form and chords per phrase (the
    form's wrapper used to drop the chord tones' bonus: the two were the same bytes). The same
    on a tiny model runs in the fast suite (`every_rule_acts...[chords per phrase-chord_tones]`)."""
    from musicgen.cli import main

    digests = []
    for nats in ("0", "8"):
        out = tmp_path / nats
        argv = ["generate", "--checkpoint", "pop909_sine_spe_gated", *FORM_CHORDS]
        assert (
            main([*argv, "--seed", "7", "--num", "1", "--chord-tones", nats, "--out", str(out)])
            == 0
        )
        (midi,) = sorted(out.glob("*.mid"))
        digests.append(hashlib.sha1(midi.read_bytes()).hexdigest())
    assert digests[0] != digests[1]


# --- one declaration per option ----------------------------------------------------------------

RULE_OPTIONS = [r.option for r in RULES if r.option is not None] + [GUIDANCE]


def test_a_rule_option_is_named_only_where_it_is_declared():
    """Each rule option's name (as a string, or as a flag) appears in the package only in the
    module that declares it: every surface derives it. (`measures/` names what it measures:
    its `melody_range` is a song's measured span, not the option.)"""
    declared = {o.name: _declaring_module(o.name) for o in RULE_OPTIONS}
    stray = []
    for path in sorted((ROOT / "musicgen").rglob("*.py")):
        if "measures" in path.parts:
            continue
        text = path.read_text()
        for name, home in declared.items():
            flag = "--" + name.replace("_", "-")
            said = re.search(rf"[\"']{name}[\"']|{flag}\b", text)
            if said and path != home:
                stray.append(f"{path.relative_to(ROOT)}: {name}")
    assert not stray


def _declaring_module(name: str) -> Path:
    owner = next((r for r in RULES if r.option is not None and r.option.name == name), None)
    module = sys.modules[(owner or type("G", (), {"__module__": GUIDANCE_MODULE})).__module__]
    return Path(module.__file__)


GUIDANCE_MODULE = "musicgen.generation.decoding.guidance"

TOY = """
from musicgen.generation.rules import RULES, Option, Rule
from musicgen.limits import Range

class Toy(Rule):
    option = Option("toy_nats", 0.0, Range(0.0, 5.0, note="nats; 0 = off"), "a toy rule",
                    studio=True, slider=(0.0, 5.0, 0.5), words="toy: a toy rule", short="toy",
                    card="toy bonus {:g} nats")

    @classmethod
    def start(cls, at):
        return cls() if at.value(cls.option) > 0 else None

RULES.append(Toy)
"""

SURFACES = """
import toy_rule  # the one file (and its registry line)
from musicgen.cli import build_parser
from musicgen.config import load_config
from musicgen.errors import MusicgenError
from musicgen.evaluate.form import SWEPT, sampling_label, sweep
from musicgen.generation.api.options import SamplingOptions, check_sample, describe
from musicgen.generation.api.request import GenerationRequest
from musicgen.generation.rules import Controls
from musicgen.generation.decoding.steer import Steered
from musicgen.studio import app, inputs
from musicgen.tokenizers import build_tokenizer

args = build_parser().parse_args(
    ["generate", "--checkpoint", "x", "--out", "o", "--toy-nats", "2"]
)
assert args.toy_nats == 2.0  # the CLI
request = GenerationRequest.build(toy_nats=1.5)  # the API
assert request.options("remi").toy_nats == 1.5 and SamplingOptions().toy_nats == 0.0
try:
    GenerationRequest.build(toy_nats=9)
    raise SystemExit("no range check")
except MusicgenError as exc:
    assert str(exc).startswith("toy_nats: must be >= 0 and <= 5"), exc
sample = load_config(None, ["sample.toy_nats=2.5"]).sample  # a config's sample:
assert check_sample(sample) == {"toy_nats": 2.5}
assert GenerationRequest().options("remi", sample).toy_nats == 2.5
assert "toy_nats" in inputs.SAMPLING and "toy_nats" in app.GENERATE  # the studio
assert app.WORDS["toy_nats"] == "toy: a toy rule"
sweep_args = build_parser().parse_args(
    ["evaluate", "form", "--checkpoint", "x", "--data", "d", "--toy-nats", "1", "2"]
)
runs = sweep({n: getattr(sweep_args, n) for n in SWEPT})  # the evaluate sweep
assert [sampling_label(r) for r in runs] == ["toy=1", "toy=2"], runs
assert describe(SamplingOptions(toy_nats=1.5)) == "T = 1, toy bonus 1.5 nats"  # cards, demo
assert describe(SamplingOptions()) == "T = 1"
tok = build_tokenizer("remi")
steer = Steered.start(tok, SamplingOptions(toy_nats=1.0), Controls(), [tok.bos_id], tok.grammar())
assert any(type(r).__name__ == "Toy" for r in steer.rules)  # the sampler starts it
print("ok")
"""


def test_a_toy_rule_in_one_file_reaches_every_surface(tmp_path):
    """A rule added in one module, with one registry line, is an option of the CLI, the API, a
    config's `sample:`, the studio, the evaluate sweep and the cards' sampling line, and the
    sampler starts it."""
    (tmp_path / "toy_rule.py").write_text(TOY)
    env_path = f"{tmp_path}:{ROOT}"
    out = subprocess.run(
        [sys.executable, "-c", SURFACES], capture_output=True, text=True, cwd=ROOT,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# --- every rule under every control ------------------------------------------------------------

CONTROLS = {
    "form": {"form": "A2B1A2"},
    "chords": {"chords": "C G Am F", "bars": 5, "max_tokens": 1000},
    "chords per phrase": {"form": "A2B1A2", "chords": "A: C G; B: F G"},
    "prompt": {"prompt": {"bars": 2}, "new_bars": 4},
    "seconds": {"prompt": {"seconds": 3.0}, "new_bars": 4},
    "seconds with chords": {"prompt": {"seconds": 3.0}, "new_bars": 6, "chords": "C G"},
}
# each rule's option on (off is its declared default); where it has nothing to act on it is left
# out: the chord tones need chords, the guidance phrase labels (a form)
ON = {"chord_tones": 8.0, "melody_range": 1, "repeat": 8.0, "in_key": 8.0, "guidance": 10.0}
NEEDS = {"chord_tones": "chords", "guidance": "form"}
CASES = [
    (control, name)
    for control, given in CONTROLS.items()
    for name in ON
    if NEEDS.get(name) is None or NEEDS[name] in given
]


@pytest.fixture(scope="module")
def song_model(tmp_path_factory):
    """A tiny untrained model with the whole-song vocabulary (melody, chords, phrases), keener
    on closing its bars (untrained, a bar would run to hundreds of ids) and writing no phrase
    token of its own (a form forces them)."""
    model = musicgen.load(make_checkpoint(tmp_path_factory.mktemp("song"), str(SONG_TOKENS)))
    keen = torch.zeros(model.tokenizer.vocab_size)
    keen[model.tokenizer.bar_id] = 1.0
    keen[torch.from_numpy(model.tokenizer.phrase_mask())] = -30.0
    model.model.head.register_forward_hook(lambda _m, _i, logits: logits + keen)
    return model


def _ids(model, control: str, seed: int, **sampling) -> list[int]:
    given = dict(CONTROLS[control])
    prompt = given.pop("prompt", None)
    common = {"seed": seed, "max_tokens": 600, **given, **sampling}
    if prompt is None:
        return model.generate(**common).ids
    return model.continue_midi(SONG, **prompt, **common).ids


OFF: dict[tuple[str, int], list[int]] = {}


def test_the_composition_covers_every_rule_option():
    assert set(ON) == {o.name for o in RULE_OPTIONS} - {"min_tokens"}  # a length, not a choice


@pytest.mark.parametrize("control, name", CASES)
def test_every_rule_acts_under_every_control(song_model, control, name):
    """Each rule's option changes what is written under each control it applies to (at one of
    two seeds: an untrained model hears a phrase label faintly, so the guidance may change no
    draw of one piece), and the piece stays valid."""
    for seed in (1, 2):
        on = _ids(song_model, control, seed, **{name: ON[name]})
        grammar = song_model.tokenizer.grammar()
        assert all(grammar.advance(t) for t in on)
        if (control, seed) not in OFF:  # every rule off: one piece per control and seed
            OFF[control, seed] = _ids(song_model, control, seed)
        if on != OFF[control, seed]:
            return
    pytest.fail(f"{name} changed nothing under {control}")
