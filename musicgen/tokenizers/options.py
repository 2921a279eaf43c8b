"""Typed tokenizer settings, checked like the run config (musicgen/config.py).

`RemiOptions` and `GrooveOptions` are what a tokenizer YAML (configs/tokenizer/*.yaml) or a
stored tokenizer.json may set. Unknown keys, null or mistyped values and out-of-range sizes are
one-line `MusicgenError`s ("tokenizer: num_tempos: must be >= 1 and <= 1024, got 100000000"),
raised before any vocabulary is built: a size of 10**8 would otherwise hang building tables.
`load_tokenizer` and `build_tokenizer` put the file's name in front.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from musicgen.errors import MusicgenError, check_choice, check_range, check_seed

LABEL = "tokenizer"
CHORD_QUALITIES = [
    "min",
    "maj",
    "dim",
    "aug",
    "sus2",
    "sus4",
    "7dom",
    "7min",
    "7maj",
    "7halfdim",
    "7dim",
]  # 11 qualities x 12 roots = 132 chord tokens


@dataclass
class RemiOptions:
    """The paper's pop-piano vocabulary in miditok's terms (docs/tokenization.md)."""

    pitch_range: list[int] = field(default_factory=lambda: [21, 108])  # 88 keys, inclusive
    positions_per_beat: int = 4  # 16 positions per 4/4 bar; durations 1..16 sub-beats
    max_duration_beats: int = 4
    num_velocities: int = 24
    tempo_range: list[int | float] = field(default_factory=lambda: [32, 224])
    num_tempos: int = 65  # 32, 35, ..., 224: steps of 3 bpm
    chord_qualities: list[str] = field(default_factory=lambda: list(CHORD_QUALITIES))
    # Expressive piano: note offs moved to the sustain pedal's release before tokenizing
    fold_pedal: bool = False
    # a pitch sounds once per onset: same-position duplicates merge (docs/tokenization.md)
    merge_duplicates: bool = True
    # the melody as its own voice: MelodyPitch_p tokens for the notes of a track named Melody
    melody: bool = False
    # phrases as tokens: Section_<label> SectionBars_<n> after the Bar where a phrase starts
    sections: bool = False
    # with sections: each phrase's density after its length, SectionDensity_k (k = 1..8 by its
    # notes a bar, tokenizers.form.density_level), which the model learns to play and can be given
    densities: bool = False
    # with sections: Recall_Start / Recall_End, which mark a returning phrase's last telling
    # placed in the model's context (tokenizers.recall); never written, never predicted
    recall: bool = False

    def check(self) -> RemiOptions:
        from miditok.constants import CHORD_MAPS

        _pair("pitch_range", self.pitch_range, 0, 127)
        _pair("tempo_range", self.tempo_range, 1, 1000)
        check_range(f"{LABEL}: positions_per_beat", self.positions_per_beat, 1, 64)
        check_range(f"{LABEL}: max_duration_beats", self.max_duration_beats, 1, 64)
        check_range(f"{LABEL}: num_velocities", self.num_velocities, 1, 127)
        check_range(f"{LABEL}: num_tempos", self.num_tempos, 1, 1024)
        for q in self.chord_qualities:
            check_choice(f"{LABEL}: chord_qualities", q, list(CHORD_MAPS))
        if len(set(self.chord_qualities)) != len(self.chord_qualities):
            raise MusicgenError(f"{LABEL}: chord_qualities: a quality appears twice")
        if self.densities and not self.sections:
            raise MusicgenError(
                f"{LABEL}: densities needs sections (they follow a phrase's tokens)"
            )
        if self.recall and not self.sections:
            raise MusicgenError(f"{LABEL}: recall needs sections (it recalls phrases by label)")
        return self


@dataclass
class GrooveOptions:
    """Decoding choices of the groove tokenizer (its 795-id vocabulary is fixed)."""

    bass_program: int = 33  # GM program of the decoded bass track (33 = fingered electric bass)
    third_program: int = 0  # GM program of the decoded accompaniment track (0 = acoustic piano)
    default_tempo: float = 120.0  # qpm written by decode() when no tempo is given
    beats_per_bar: int = 4  # bar length for bar_starts / bar-aligned TimeShifts
    velocity: int = 90  # velocity of decoded notes (the vocabulary has none)
    third_track: str = "most_notes"  # most_notes | random: which remaining track plays role 3
    seed: int = 0  # seed of the per-file draw when third_track = random
    decode_tpq: int = 480  # ticks per quarter of decoded scores (a multiple of 12)

    def check(self) -> GrooveOptions:
        check_range(f"{LABEL}: bass_program", self.bass_program, 0, 127)
        check_range(f"{LABEL}: third_program", self.third_program, 0, 127)
        check_range(f"{LABEL}: default_tempo", self.default_tempo, 1, 1000)
        check_range(f"{LABEL}: beats_per_bar", self.beats_per_bar, 1, 64)
        check_range(f"{LABEL}: velocity", self.velocity, 1, 127)
        check_choice(f"{LABEL}: third_track", self.third_track, ("most_notes", "random"))
        check_seed(f"{LABEL}: seed", self.seed)
        check_range(f"{LABEL}: decode_tpq", self.decode_tpq, 12, 9600)
        if self.decode_tpq % 12:
            raise MusicgenError(
                f"{LABEL}: decode_tpq: must be a multiple of 12 (the token grid), "
                f"got {self.decode_tpq}"
            )
        return self


def _pair(name: str, value: list, low: float, high: float) -> None:
    if len(value) != 2 or value[0] > value[1]:
        raise MusicgenError(f"{LABEL}: {name}: must be [low, high] with low <= high, got {value}")
    for v in value:
        check_range(f"{LABEL}: {name}", v, low, high)


def parse_options(cls: type, data: dict, extra: tuple[str, ...], kind: str) -> Any:
    """`cls` from a tokenizer description: its option keys at the top level (YAML) and/or
    under `options` (tokenizer.json), beside the `extra` bookkeeping keys; unknown keys,
    types and ranges checked."""
    if not isinstance(data, dict):
        raise MusicgenError(f"{LABEL}: must be a mapping, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in (*names, *extra, "name", "options")]
    if unknown:
        raise MusicgenError(
            f"{LABEL}: unknown {kind} option '{unknown[0]}'; valid: {', '.join(names)}"
        )
    nested = data.get("options") or {}
    if not isinstance(nested, dict):
        raise MusicgenError(f"{LABEL}: 'options' must be a mapping, got {nested!r}")
    merged = {**nested, **{k: v for k, v in data.items() if k in names}}
    return options_from(cls, merged, kind)


def options_from(cls: type, values: dict, kind: str) -> Any:
    """`cls` from a flat dict of option values (types and ranges checked)."""
    from musicgen.config import from_dict

    for f in dataclasses.fields(cls):
        if f.type in (bool, "bool") and f.name in values and not isinstance(values[f.name], bool):
            raise MusicgenError(f"{LABEL}: {f.name} must be true or false, got {values[f.name]!r}")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in values if k not in names]
    if unknown:
        raise MusicgenError(
            f"{LABEL}: unknown {kind} option '{unknown[0]}'; valid: {', '.join(names)}"
        )
    return from_dict(cls, values, label=LABEL).check()


def as_dict(options: Any) -> dict:
    return dataclasses.asdict(options)
