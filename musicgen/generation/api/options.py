"""Every sampling option, gathered from where it is declared (`OPTIONS`), and what derives from
them: `SamplingOptions` (what the sampler reads), `RANGES`, `check` and `describe` (the
sampling line of the cards, the demo and the style benchmark's table).

Plain decoding declares its own (`filters.DECODING`), each rule its one (`rules.RULES`), the
phrase guidance its weight (`guidance.GUIDANCE`). The request (`generation.api.request`: the API
and the CLI flags), a model config's `sample:` (`config.SampleConfig`), the studio's widgets and
the evaluate sweep are built from `OPTIONS`; no other module lists the names.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from musicgen.errors import MusicgenError
from musicgen.generation.decoding.filters import DECODING
from musicgen.generation.decoding.guidance import GUIDANCE
from musicgen.generation.rules import RULES, Option
from musicgen.limits import Range, check_in_range

OPTIONS: dict[str, Option] = {
    o.name: o for o in (*DECODING, *(r.option for r in RULES if r.option), GUIDANCE)
}
RANGES: dict[str, Range] = {name: o.range for name, o in OPTIONS.items() if o.range}
NUMBERS = tuple(RANGES)  # the options a number sets (every one but the `grammar` switch)
STUDIO = tuple(name for name, o in OPTIONS.items() if o.studio)  # the page's own widgets
SWEEP = tuple(name for name, o in OPTIONS.items() if o.short)  # what `evaluate form` may vary


def paper_defaults(tokenizer_name: str) -> dict[str, Any]:
    """The options whose paper setting for this tokenizer replaces their default
    (`Option.paper`; none for a tokenizer no paper used)."""
    out = {}
    for name, option in OPTIONS.items():
        paper = dict(option.paper)
        if tokenizer_name in paper:
            out[name] = paper[tokenizer_name]
    return out


def check(name: str, value, where: str | None = None):
    """`value` checked against its option's range (`limits.check_in_range`); None passes."""
    return check_in_range(where or name, value, RANGES[name])


def describe(values) -> str:
    """The options that declare a `card` format, as a card writes them ("T = 1.2, top-p 0.9"):
    each where its value is not the default (`card_always`: always). `values`: a
    `SamplingOptions` or a dict of values by name (an option it lacks is at its default)."""
    get = values.get if isinstance(values, dict) else lambda name, d: getattr(values, name, d)
    parts = []
    for o in OPTIONS.values():
        value = get(o.name, o.default) if o.card else None
        if value is not None and (o.card_always or value != o.default):
            parts.append(o.card.format(value))
    return ", ".join(parts)


def check_sample(sample: dict, where: str = "config: sample") -> dict:
    """A model config's `sample:` section (`config.SampleConfig`) checked against the options:
    a known sampling number each, inside its range; one-line errors name `where.name`."""
    for name, value in sample.items():
        if name not in RANGES:
            known = ", ".join(RANGES)
            raise MusicgenError(f"{where}: unknown option '{name}' (valid: {known})")
        check(name, value, f"{where}.{name}")
    return sample


class _Validated:
    """What `SamplingOptions` adds to its derived fields."""

    def validate(self):
        """Types and ranges of options built by hand (a request's are checked when it is
        built), named as the API's parameters: a bool, a string, NaN or inf is an error, not
        a silent 1 or an empty distribution."""
        for name in NUMBERS:
            if getattr(self, name) is None:
                raise MusicgenError(f"{name}: must be a number, got None")
            setattr(self, name, check(name, getattr(self, name)))
        if not isinstance(self.grammar, bool):
            raise MusicgenError(f"grammar: must be True or False, got {self.grammar!r}")
        return self


def _fields() -> list[tuple[str, Any, Any]]:
    return [(o.name, o.kind, dataclasses.field(default=o.default)) for o in OPTIONS.values()]


SamplingOptions = dataclasses.make_dataclass(
    "SamplingOptions",
    _fields(),
    bases=(_Validated,),
    namespace={
        "__doc__": "What the sampler reads, resolved: one field per option of `OPTIONS`, its "
        "default the declared one (plain sampling; a generation's come from "
        "`GenerationRequest.options`). 0 turns a rule off.",
        "__module__": __name__,
    },
)
