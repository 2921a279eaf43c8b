"""The REMI grammar: which token may follow, as precomputed boolean masks (no re-parsing).

Order: BOS, then bars; a bar is `Bar` followed by positions strictly increasing inside it; after a
`Position` come Tempo, Chord or note events; a note is the triple Pitch, Velocity, Duration
(miditok's order) and must be complete before anything else; a pitch sounds at most once per
position (`unique_pitches`, the tokenizer's `merge_duplicates`), as melody or as accompaniment;
a phrase's `Section` label and its `SectionBars` length (and, in a vocabulary with densities,
its `SectionDensity`) come right after its `Bar`, before the bar's first position; EOS ends the
sequence (allowed after a bar, a position or a complete event).
Sampling writes the melody as one line: once a melody note is at a position, no other melody
pitch is drawn there (`sampling_mask`, a rule of sampling only: a prompt or a scored song is
never judged by it; how often POP909's melodies break it: docs/generation.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from musicgen.tokenizers.base import Grammar

PITCH_CLASSES = ["C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B"]


# a token name's kind (before its "_") -> its family in `RemiTables`
FAMILY_OF_KIND = {
    "PAD": "SPECIAL", "BOS": "SPECIAL", "EOS": "SPECIAL", "Bar": "BAR", "Position": "POSITION",
    "Tempo": "TEMPO", "Chord": "CHORD", "Pitch": "PITCH", "Velocity": "VELOCITY",
    "Duration": "DURATION", "MelodyPitch": "PITCH", "Section": "SECTION",
    "SectionBars": "SECTION_BARS", "SectionDensity": "SECTION_DENSITY", "Recall": "RECALL",
}  # fmt: skip


@dataclass
class RemiTables:
    """Per-id lookup arrays derived from the vocabulary names (built once per tokenizer)."""

    SPECIAL = 0
    BAR = 1
    POSITION = 2
    TEMPO = 3
    CHORD = 4
    PITCH = 5
    VELOCITY = 6
    DURATION = 7
    OTHER = 8
    SECTION = 9  # a phrase's label (Section_A)
    SECTION_BARS = 10  # its length in bars (SectionBars_8)
    SECTION_DENSITY = 11  # its density level (SectionDensity_3)
    RECALL = 12  # Recall_Start / Recall_End: a recalled phrase in the context (never written)

    family: np.ndarray  # (V,) int8: one of the constants above
    pitch: np.ndarray  # (V,) MIDI pitch of Pitch tokens, -1 elsewhere
    position: np.ndarray  # (V,) position index of Position tokens, -1 elsewhere
    value: np.ndarray  # (V,) numeric value of Velocity / Duration (beats) / Tempo tokens
    melody: np.ndarray  # (V,) bool: a melody Pitch (MelodyPitch_p; family PITCH)
    twin: np.ndarray  # (V,) the same pitch in the other voice (itself where there is none)
    chord: dict[int, tuple[int, str]] = field(default_factory=dict)  # id -> (root, quality)
    pitch_to_id: dict[int, int] = field(default_factory=dict)  # accompaniment pitches
    melody_to_id: dict[int, int] = field(default_factory=dict)  # melody pitches
    chord_to_id: dict[tuple[int, str], int] = field(default_factory=dict)
    section_to_id: dict[str, int] = field(default_factory=dict)
    section_bars_to_id: dict[int, int] = field(default_factory=dict)
    section_density_to_id: dict[int, int] = field(default_factory=dict)
    label: dict[int, str] = field(default_factory=dict)  # Section id -> its label

    @classmethod
    def build(cls, names: list[str]) -> RemiTables:
        fams = {kind: getattr(cls, fam) for kind, fam in FAMILY_OF_KIND.items()}
        n = len(names)
        t = cls(
            family=np.full(n, cls.OTHER, dtype=np.int8),
            pitch=np.full(n, -1, dtype=np.int64),
            position=np.full(n, -1, dtype=np.int64),
            value=np.zeros(n, dtype=np.float64),
            melody=np.zeros(n, dtype=bool),
            twin=np.arange(n, dtype=np.int64),
        )
        for i, name in enumerate(names):
            kind, _, arg = name.partition("_")
            fam = fams.get(kind, cls.OTHER)
            t.family[i] = fam
            if fam == cls.PITCH:
                t.pitch[i] = int(arg)
                t.melody[i] = kind == "MelodyPitch"
                (t.melody_to_id if t.melody[i] else t.pitch_to_id)[int(arg)] = i
            elif fam == cls.SECTION:
                t.section_to_id[arg] = i
                t.label[i] = arg
            elif fam == cls.SECTION_BARS:
                t.value[i] = int(arg)
                t.section_bars_to_id[int(arg)] = i
            elif fam == cls.SECTION_DENSITY:
                t.value[i] = int(arg)
                t.section_density_to_id[int(arg)] = i
            elif fam == cls.POSITION:
                t.position[i] = int(arg)
            elif fam in (cls.VELOCITY, cls.TEMPO):
                t.value[i] = float(arg)
            elif fam == cls.DURATION:
                beat, sub, res = (int(x) for x in arg.split("."))
                t.value[i] = beat + sub / res
            elif fam == cls.CHORD:
                root, _, quality = arg.partition(":")
                key = (PITCH_CLASSES.index(root), quality)
                t.chord[i] = key
                t.chord_to_id[key] = i
        for pitch, i in t.melody_to_id.items():
            j = t.pitch_to_id.get(pitch)
            if j is not None:
                t.twin[i], t.twin[j] = j, i
        return t

    def mask(self, *families: int) -> np.ndarray:
        return np.isin(self.family, families)


# parser states
START, AFTER_BOS, AFTER_BAR, AFTER_POS, IN_POS, AFTER_PITCH, AFTER_VEL, DONE = range(8)
AFTER_SECTION, AFTER_SECTION_BARS, AFTER_SECTION_DENSITY = 8, 9, 10


class RemiGrammar(Grammar):
    """Incremental REMI checker; `allowed()` picks one of a few precomputed masks, less the
    pitches already played at the current position."""

    def __init__(
        self, t: RemiTables, bos: int, eos: int, bar: int, unique_pitches: bool = True
    ) -> None:
        self.t, self.bos, self.eos, self.bar = t, bos, eos, bar
        self.state, self.pos, self.errors = START, -1, 0
        self.unique_pitches = unique_pitches
        self._played: list[int] = []  # Pitch ids already at the current position
        self._melody_here = False  # a melody note is at the current position
        self._accompaniment = ~t.melody  # what a position with its melody note may still draw
        v = len(t.family)
        one = {i: np.eye(1, v, i, dtype=bool)[0] for i in (bos, eos, bar)}
        positions = t.family == RemiTables.POSITION
        self._positions, self._tempos = positions, t.family == RemiTables.TEMPO
        events = t.mask(RemiTables.TEMPO, RemiTables.CHORD, RemiTables.PITCH)
        # pos_after[p + 1]: positions strictly after p (p = -1 right after a Bar)
        n_pos = int(t.position.max()) + 1
        pos_after = [positions & (t.position > p) for p in range(-1, n_pos)]
        sections = t.family == RemiTables.SECTION
        densities = t.family == RemiTables.SECTION_DENSITY
        opens_bar = one[bar] | positions | one[eos]  # what may follow a phrase's tokens
        self._masks: dict[tuple[int, int], np.ndarray] = {
            (START, -1): one[bos],
            (AFTER_BOS, -1): one[bar],
            (AFTER_BAR, -1): one[bar] | positions | one[eos] | sections,
            (AFTER_SECTION, -1): t.family == RemiTables.SECTION_BARS,
            (AFTER_SECTION_BARS, -1): densities if densities.any() else opens_bar,
            (AFTER_SECTION_DENSITY, -1): opens_bar,
            (AFTER_PITCH, -1): t.family == RemiTables.VELOCITY,
            (AFTER_VEL, -1): t.family == RemiTables.DURATION,
            (AFTER_POS, -1): events | one[eos],
            (DONE, -1): np.zeros(v, dtype=bool),
        }
        for p in range(-1, n_pos):  # -1: IN_POS reached without a Position (invalid input)
            self._masks[(IN_POS, p)] = events | pos_after[p + 1] | one[bar] | one[eos]
        vel_ids = np.flatnonzero(t.family == RemiTables.VELOCITY)
        dur_ids = np.flatnonzero(t.family == RemiTables.DURATION)
        self._fill_vel = int(vel_ids[np.argsort(t.value[vel_ids])[len(vel_ids) // 2]])
        one_beat = dur_ids[np.isclose(t.value[dur_ids], 1.0)]
        self._fill_dur = int(one_beat[0] if len(one_beat) else dur_ids[0])
        bars_ids = np.flatnonzero(t.family == RemiTables.SECTION_BARS)
        self._fill_bars = [int(bars_ids[0])] if len(bars_ids) else []
        density_ids = np.flatnonzero(densities)
        self._fill_density = [int(density_ids[len(density_ids) // 2])] if len(density_ids) else []

    @property
    def position(self) -> int:
        """The position in the current bar (-1 before its first Position)."""
        return self.pos

    def place(self, mask: np.ndarray, position: int, token_id: int) -> np.ndarray:
        """`mask` narrowed so that `token_id`, an event written at the head of a position (a
        Chord: after the Position and its Tempo, before the notes), comes at `position` of the
        current bar: there, only a Tempo (right after the Position) or it; before it, no later
        position, no Bar and no end."""
        if self.state in (AFTER_POS, IN_POS) and self.pos == position:
            mask &= self._tempos if self.state == AFTER_POS else np.zeros_like(mask)
            mask[token_id] = True
            return mask
        mask &= ~(self._positions & (self.t.position > position))
        mask[self.bar] = mask[self.eos] = False
        return mask

    def _key(self) -> tuple[int, int]:
        return (IN_POS, self.pos) if self.state == IN_POS else (self.state, -1)

    def sampling_mask(self) -> np.ndarray | None:
        """One melody note per position: after it, no other melody pitch."""
        return self._accompaniment if self._melody_here else None

    def allowed(self) -> np.ndarray:
        mask = self._masks[self._key()].copy()
        if self.state == IN_POS:
            mask[self._played] = False
        return mask

    def advance(self, token_id: int) -> bool:
        token_id = int(token_id)
        ok = 0 <= token_id < len(self.t.family) and bool(self._masks[self._key()][token_id])
        ok = ok and not (self.state == IN_POS and token_id in self._played)
        if not ok:
            self.errors += 1
            if not 0 <= token_id < len(self.t.family):
                return False
        fam = self.t.family[token_id]
        if token_id == self.bos:
            self.state = AFTER_BOS
        elif token_id == self.eos:
            self.state = DONE
        elif fam == RemiTables.BAR:
            self.state, self.pos = AFTER_BAR, -1
            self._played.clear()
            self._melody_here = False
        elif fam == RemiTables.POSITION:
            self.state, self.pos = AFTER_POS, int(self.t.position[token_id])
            self._played.clear()
            self._melody_here = False
        elif fam in (RemiTables.TEMPO, RemiTables.CHORD, RemiTables.DURATION):
            self.state = IN_POS
        elif fam == RemiTables.PITCH:
            self.state = AFTER_PITCH
            self._melody_here |= bool(self.t.melody[token_id])
            if self.unique_pitches:
                self._played += [token_id, int(self.t.twin[token_id])]
        elif fam == RemiTables.VELOCITY:
            self.state = AFTER_VEL
        elif fam == RemiTables.SECTION:
            self.state = AFTER_SECTION
        elif fam == RemiTables.SECTION_BARS:
            self.state = AFTER_SECTION_BARS
        elif fam == RemiTables.SECTION_DENSITY:
            self.state = AFTER_SECTION_DENSITY
        return ok

    def finished(self) -> bool:
        return self.state == DONE

    def completion(self) -> list[int]:
        tail = {
            START: [self.bos, self.bar],
            AFTER_BOS: [self.bar],
            AFTER_PITCH: [self._fill_vel, self._fill_dur],
            AFTER_VEL: [self._fill_dur],
            AFTER_SECTION: self._fill_bars + self._fill_density,
            AFTER_SECTION_BARS: self._fill_density,
            DONE: None,
        }.get(self.state, [])
        return [] if tail is None else [*tail, self.eos]
