"""The sampler's rules, one module each, and their registry (`RULES`).

Each rule declares its option (if any) and its effects on the one `Rule` protocol
(`rules.base`); the sampler starts every rule of `RULES` for each sequence and composes the
effects in this order (`generation.decoding.steer`). A new rule is one module plus one line
here: its option then appears in the API, the CLI, a config's `sample:`, the studio (if it
asks) and the evaluate sweep (`generation.api.options`).

- `chord_control`: a progression's Chord tokens forced; the chord tones favoured (`chord_tones`)
- `form_control`: a form's phrase tokens forced; the song ends with the form
- `min_tokens`: no end token before `min_tokens` sampled ids
- `melody_due`: under a form, a melodic bar does not close before its melody sounds
- `melody_range`: a melody keeps to `melody_range` semitones
- `opening`: a piece from scratch sounds in its first bar
- `bar_copy`: the id that continues a bar being copied gets `repeat` nats
- `in_key`: the pitches of the piece's key get `in_key` nats among the pitches
"""

from __future__ import annotations

from musicgen.generation.rules.bar_copy import BarEcho
from musicgen.generation.rules.base import ChordPlan, Controls, Option, Rule, Start
from musicgen.generation.rules.chord_control import ChordControl
from musicgen.generation.rules.form_control import FormControl
from musicgen.generation.rules.in_key import KeyKeep
from musicgen.generation.rules.melody_due import MelodyDue
from musicgen.generation.rules.melody_range import MelodyRange
from musicgen.generation.rules.min_tokens import MinTokens
from musicgen.generation.rules.opening import MusicFirst

RULES: list[type[Rule]] = [
    ChordControl,
    FormControl,
    MinTokens,
    MelodyDue,
    MelodyRange,
    MusicFirst,
    BarEcho,
    KeyKeep,
]

__all__ = [
    "RULES",
    "BarEcho",
    "ChordControl",
    "ChordPlan",
    "Controls",
    "FormControl",
    "KeyKeep",
    "MelodyDue",
    "MelodyRange",
    "MinTokens",
    "MusicFirst",
    "Option",
    "Rule",
    "Start",
]
