"""One generation request: every option of a call with its default, range and help, in one table.

`GenerationRequest` is what `Model.pieces` runs. Everything that asks for a generation derives
from its fields: the API's keyword arguments (`GenerationRequest.build`), the flags of `musicgen
generate` and `continue` (`add_flags`, `from_args`) and the studio's widgets (`widget`). Its
sampling fields are derived from the options' declarations (`generation.api.options`). A value is
checked once, when the request is built; the sampler trusts it.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import secrets
from dataclasses import InitVar, dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

from musicgen.errors import SEED_MAX, MusicgenError, check_int
from musicgen.generation.api.finish import LEAD_PROGRAM
from musicgen.generation.api.options import OPTIONS, RANGES, SamplingOptions, check, paper_defaults
from musicgen.generation.controls.form_plan import (
    SectionChords,
    parse_section_chords,
    read_form_arg,
)
from musicgen.generation.controls.progression import (
    Progression,
    check_chord_path,
    looks_like_file,
    parse_progression,
)
from musicgen.generation.rules.base import MELODY_VOICE, Need
from musicgen.generation.rules.in_key import PITCH_CLASSES
from musicgen.limits import (
    MAX_BATCH,
    MAX_NEW_BARS,
    MAX_NEW_TOKENS,
    Range,
    check_in_range,
    describe_range,
)

BAR_TOKEN_CAP = 512  # with `bars` and no `max_tokens`: at most this many sampled ids per bar
GENERATE_MAX_TOKENS = 2048  # from scratch without `bars` or `max_tokens`
CONTINUE_MAX_TOKENS = 1024  # a continuation without `bars` or `max_tokens`
TEMPO_QPM = (20.0, 300.0)  # a tempo a request may set (beats a minute)
MAX_TRANSPOSE = 48  # semitones up or down (four octaves; the notes' range bounds it too)
SCRATCH_BARS = 16  # bars of a piece from scratch where a caller asks for none (API, studio, demo)
BATCH_SIZE = 8  # sequences decoded together


@dataclass(frozen=True)
class Spec:
    """A field's help, range (None: no number) and command-line form. `flag`: its flag where it
    is not `--name`; `cli_default`: the commands' default where it differs from the API's;
    `widget`: the studio's slider (low, high, step), inside the range."""

    help: str
    range: Range | None = None
    flag: str = ""
    cli_default: Any = None
    widget: tuple[float, float, float] | None = None


def _field(default, help: str, rng: Range | None = None, **spec) -> Any:
    return field(default=default, metadata={"spec": Spec(help, rng, **spec)})


def _whole(low: int, high: int | None) -> Range:
    return Range(low, high, integer=True)


def _whole_field(default, help: str, low: int, high: int | None, **spec) -> Any:
    return _field(default, help, _whole(low, high), **spec)


def _option_field(name: str) -> tuple[str, Any, Any]:
    """A sampling option's request field (`generation.api.options`): None, the model's default."""
    o = OPTIONS[name]
    if o.range is None:  # a switch, on by default: --no-NAME turns it off
        return name, bool, _field(o.default, o.help, flag="--no-" + name.replace("_", "-"))
    return name, o.kind | None, _field(None, o.help, o.range, widget=o.slider)


_FIELDS = [
    ("num", int, _whole_field(1, "pieces to write", 1, None, cli_default=4)),
    ("bars", int | None, _whole_field(None, "stop each piece after N new bars", 1, MAX_NEW_BARS)),
    (
        "max_tokens",
        int | None,
        _whole_field(
            None,
            "the most ids sampled after the prompt, per piece (default {default}; with {bars}, "
            f"{BAR_TOKEN_CAP} per bar)",
            1,
            MAX_NEW_TOKENS,
        ),
    ),
    ("seed", int | None, _whole_field(None, "random seed (default: drawn, printed)", 0, SEED_MAX)),
    (
        "batch_size",
        int,
        _whole_field(BATCH_SIZE, f"pieces decoded together ({BATCH_SIZE})", 1, MAX_BATCH),
    ),
    *(_option_field(name) for name in OPTIONS),
    (
        "legato",
        bool,
        _field(
            True,
            "write the melody's notes at the lengths the model drew: none held over a "
            "sixteenth's rest to the next (models with a melody voice; docs/generation.md, "
            "'The melody line')",
            flag="--no-legato",
        ),
    ),
    (
        "chords",
        Any,
        _field(
            None,
            'force a chord progression at the new bars: "C G Am F" (one chord a bar, repeated; '
            '"C | G | Am F" for bars of 1, 2 or 4 chords, "xN" at a line\'s end repeats the '
            "line, inside it the bar), or a POP909 chord_midi.txt or a .mid (its detected "
            "chords), read at the song's own bars (REMI checkpoints; docs/generation.md, "
            "'Chord control')",
        ),
    ),
    (
        "form",
        Any,
        _field(
            None,
            "force a song form: phrases with a label and a length in bars, e.g. 'i4A8B8A8B8o4' "
            "(sets the bars), 'auto' (one of the training songs' forms), or a POP909 "
            "human_label*.txt (models with section tokens; docs/generation.md, 'Form control')",
        ),
    ),
    (
        "tempo",
        float | None,
        _field(
            None,
            "the piece's tempo in beats (quarter notes) a minute, held from its first bar to "
            "its last (the prompt's own tempo changes go; default: the prompt's or the model's)",
            Range(TEMPO_QPM[0], TEMPO_QPM[1]),
        ),
    ),
    (
        "transpose",
        int | None,
        _whole_field(
            None,
            "move every pitched note by N semitones (drums stay; refused if a note would leave "
            "MIDI's 0..127)",
            -MAX_TRANSPOSE,
            MAX_TRANSPOSE,
        ),
    ),
    (
        "melody_program",
        int | None,
        _whole_field(
            None,
            "the Melody track's General MIDI instrument, 0..127 (0-based; default "
            f"{LEAD_PROGRAM}, a flute: a lead heard over the piano; models with a melody voice)",
            0,
            127,
        ),
    ),
    ("bars_name", InitVar[str], "bars"),
]


class _Request:
    """The methods of `GenerationRequest` (its fields are derived: `_FIELDS`)."""

    def __post_init__(self, bars_name: str) -> None:
        for f in dataclasses.fields(self):
            value = _check(f.name, getattr(self, f.name), bars_name)
            object.__setattr__(self, f.name, value)
        if isinstance(self.chords, SectionChords) and self.form is None:
            raise MusicgenError(
                "chords: a progression per phrase ('A: ...; B: ...') needs a form (form=)"
            )
        for o in OPTIONS.values():
            if o.needs and getattr(self, o.name) is not None and getattr(self, o.needs) is None:
                raise MusicgenError(
                    f"{o.name}: has an effect only with {o.needs}; give {o.needs} too, or "
                    f"leave {o.name} out"
                )

    @classmethod
    def build(cls, bars_name: str = "bars", **fields) -> GenerationRequest:
        """A request from keyword arguments; an unknown name is a one-line error."""
        unknown = sorted(set(fields) - set(NAMES))
        if unknown:
            raise MusicgenError(f"{unknown[0]}: unknown option (known: {', '.join(NAMES)})")
        return cls(**fields, bars_name=bars_name)

    def check_model(self, tokenizer) -> None:
        """Refuse, in one line, an option given a value other than its default on a model
        that lacks what it acts on (`MODEL_NEEDS`: a melody voice, phrase labels, pitched
        notes): it would change nothing. The default itself passes."""
        for name, (need, default) in MODEL_NEEDS.items():
            value = getattr(self, name)
            if value is not None and value != default and not need.has(tokenizer):
                raise MusicgenError(
                    f"{name}: this model has no {need.what}, so it would change nothing "
                    "(leave it out)"
                )

    def seeded(self) -> GenerationRequest:
        """This request with a seed: its own, or a fresh one (printed and stored, so any piece
        can be made again; drawn here, so not checked again)."""
        if self.seed is not None:
            return self
        return self.settled(seed=secrets.randbelow(2**31))

    def max_new(self, default: int) -> int:
        """The most ids sampled after the prompt, per piece: `max_tokens`, else `BAR_TOKEN_CAP`
        per requested bar, else `default`."""
        if self.max_tokens is not None:
            return self.max_tokens
        return min(BAR_TOKEN_CAP * self.bars, MAX_NEW_TOKENS) if self.bars else default

    def sampling(self) -> dict[str, Any]:
        """The sampler's options this request gives (not None)."""
        return {k: getattr(self, k) for k in SAMPLER if getattr(self, k) is not None}

    def options(self, tokenizer_name: str, model: dict | None = None) -> SamplingOptions:
        """THE sampling defaults, resolved: each option's declared default, or its paper
        setting for this tokenizer (`Option.paper`), then the model's own (`model`: its config's
        `sample` section, checked when the model was loaded, `options.check_sample`; None keeps
        the paper's), then this request's. Nothing is checked again."""
        values = paper_defaults(tokenizer_name)
        values.update({k: v for k, v in (model or {}).items() if v is not None and k in SAMPLER})
        values.update(self.sampling())
        return SamplingOptions(**values)

    def settled(self, **values) -> GenerationRequest:
        """This request with values the generation worked out for it (a drawn seed, a form's
        bars, a form's chords per phrase), taken as they are: they are not checked again."""
        out = copy.copy(self)
        for name, value in values.items():
            object.__setattr__(out, name, value)
        return out


GenerationRequest = make_dataclass(
    "GenerationRequest",
    _FIELDS,
    bases=(_Request,),
    frozen=True,
    namespace={
        "__doc__": "What to sample: how many pieces, how long, how (None: the model's "
        "default), under which control. `bars_name`: what the caller calls `bars` in "
        "messages (`new_bars` continuing). One field per sampling option (`OPTIONS`).",
        "__module__": __name__,
    },
)


# What each option needs of the model (`rules.base.Need`), with the default that may pass
# without it: the sampling options' own declarations, and the melody's legato.
MODEL_NEEDS: dict[str, tuple[Need, Any]] = {
    name: (o.model, o.default) for name, o in OPTIONS.items() if o.model
} | {
    "legato": (MELODY_VOICE, True),
    "melody_program": (MELODY_VOICE, None),
    "transpose": (PITCH_CLASSES, 0),
}

SPECS: dict[str, Spec] = {f.name: f.metadata["spec"] for f in dataclasses.fields(GenerationRequest)}
NAMES = tuple(SPECS)
SAMPLER = tuple(f.name for f in dataclasses.fields(SamplingOptions))  # what the sampler reads
_REQUIRED = ("num", "batch_size")  # None is not "not given" for these
SWITCHES = tuple(n for n, spec in SPECS.items() if spec.flag.startswith("--no-"))  # on: default


def _check(name: str, value, bars_name: str):
    """One field's value checked (and normalised: 2 -> 2.0 for a float option)."""
    where = bars_name if name == "bars" else name
    if name in SWITCHES:
        if not isinstance(value, bool):
            raise MusicgenError(f"{name}: must be True or False, got {value!r}")
        return value
    if name == "chords":
        return _check_chords(value)
    if name == "form":
        return None if value is None else read_form_arg(value)
    rng = SPECS[name].range
    if name in RANGES:
        return check(name, value, where)
    if not rng.integer:  # a number of its own (the tempo)
        return check_in_range(where, value, rng)
    if value is None and name in _REQUIRED:
        raise MusicgenError(f"{where}: must be >= {rng.low:g}, got None")
    return check_int(where, value, int(rng.low), rng.high)


def _check_chords(chords):
    """A progression given as text, parsed once here (its repeats and length; the model's
    vocabulary is checked once it is loaded); a file only for its kind and size (it is read once
    the model's tokenizer is known)."""
    if chords is None or isinstance(chords, (Progression, SectionChords)):
        return chords
    if isinstance(chords, Path) or (isinstance(chords, str) and looks_like_file(chords)):
        check_chord_path(Path(chords))
        return Path(chords)
    if isinstance(chords, str) and (per_section := parse_section_chords(chords)) is not None:
        return per_section
    if isinstance(chords, str) or (
        isinstance(chords, (list, tuple)) and all(isinstance(x, str) for x in chords)
    ):
        return parse_progression(chords)
    raise MusicgenError("chords: give a string, a list of chord symbols or a file path")


def default_options(tokenizer_name: str, model: dict | None = None, **given) -> SamplingOptions:
    """The sampling options for a tokenizer and a model's `sample` section, with those `given`
    (None: not given) checked and applied (`GenerationRequest.options`)."""
    return GenerationRequest.build(**given).options(tokenizer_name, model)


# ---------------------------------------------------------------------------------------------
# the command line and the studio, derived from the fields


def flag(name: str) -> str:
    return SPECS[name].flag or "--" + name.replace("_", "-")


def help_text(name: str, **values) -> str:
    """A field's help with its range (`limits.describe_range`) where it is a sampling number."""
    spec = SPECS[name]
    text = spec.help.format(**values) if values else spec.help
    if name in RANGES:
        return f"{text}: {describe_range(spec.range)}"
    return text


def add_flags(parser: argparse.ArgumentParser, continuation: bool = False) -> None:
    """The request's flags on a command (`--bars` is `--new-bars` continuing; `--bars` and
    `--max-tokens` exclude each other from scratch). Each flag's value lands under its field's
    name (`new_bars` for `--new-bars`), None where not given."""
    length = parser if continuation else parser.add_mutually_exclusive_group()
    bars = "--new-bars" if continuation else "--bars"
    length.add_argument(bars, type=int, default=None, help=help_text("bars"))
    default = CONTINUE_MAX_TOKENS if continuation else GENERATE_MAX_TOKENS
    length.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help=help_text("max_tokens", default=default, bars=bars),
    )
    for name in NAMES:
        spec = SPECS[name]
        if name in ("bars", "max_tokens"):
            continue
        if name in SWITCHES:
            parser.add_argument(flag(name), dest=name, action="store_false", help=spec.help)
            continue
        kind = float if spec.range is not None and not spec.range.integer else int
        kind = str if name in ("chords", "form") else kind
        shown = (
            f"{help_text(name)} (default {spec.cli_default})"
            if spec.cli_default
            else help_text(name)
        )
        parser.add_argument(flag(name), type=kind, default=spec.cli_default, help=shown)


def from_args(args: argparse.Namespace, continuation: bool = False) -> GenerationRequest:
    """The request a command line gives (every value checked here, before a model is loaded)."""
    values = {name: getattr(args, name) for name in NAMES if name != "bars"}
    values["bars"] = args.new_bars if continuation else args.bars
    given = {k: v for k, v in values.items() if v is not None}  # None: the request's default
    return GenerationRequest(**given, bars_name="new_bars" if continuation else "bars")


def flags() -> dict[str, str]:
    """Parameter -> flag, for the CLI's messages (`max_tokens: ...` -> `--max-tokens: ...`)."""
    return {name: flag(name) for name in NAMES} | {"new_bars": "--new-bars"}
