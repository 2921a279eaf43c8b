"""The Groove2Groove vocabulary layout and its incremental grammar.

Layout (795 ids = the paper's 794 tokens + our padding id 0):

| ids       | tokens                                                                   |
|-----------|--------------------------------------------------------------------------|
| 0         | PAD (base.PAD_ID; not in the paper's 794)                                |
| 1, 2      | BOS (start), EOS (end)                                                   |
| 3..386    | NoteOn(track, pitch):  3 + 128 * (track - 1) + pitch, tracks 1..3        |
| 387..770  | NoteOff(track, pitch): 387 + 128 * (track - 1) + pitch                   |
| 771..794  | TimeShift(beats, offset) of 1..24 ticks (12 ticks per beat): 770 + ticks |

Tracks: 1 = bass, 2 = drums, 3 = the accompaniment instrument. The 24 TimeShifts are beats 0..1 x
offset 0..11 without the zero shift (23) plus exactly 2 beats (1): 768 + 24 + 2 = 794.
Kept separate from `groove.py` so that the sampler-facing part (masks) stays small and numpy-only.

Sampling also bounds how long a note sounds (`HOLD_TICKS`, `GrooveGrammar.sampling_mask`): a
model that loses track of a note it opened never writes its NoteOff, and the note would sound to
the piece's end. And the bass plays one note at a time (`MONO`): a new bass note first ends the
one that sounds. Validity depends on neither (a real song's long note, or two bass notes at
once, is a valid prompt).
"""

from __future__ import annotations

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.tokenizers.base import PAD_ID, Grammar

TICKS_PER_BEAT = 12
MAX_SHIFT = 2 * TICKS_PER_BEAT  # longest single TimeShift, in ticks
N_TRACKS = 3
N_PITCHES = 128
TRACK_NAMES = ("bass", "drums", "third")  # track 1, 2, 3 (index 0, 1, 2 here)
DRUMS = 1  # index of the drum track (never transposed)

BOS_ID = 1
EOS_ID = 2
NOTE_ON = 3
NOTE_OFF = NOTE_ON + N_TRACKS * N_PITCHES  # 387
TIME_SHIFT = NOTE_OFF + N_TRACKS * N_PITCHES  # 771: id of the 1-tick shift
VOCAB_SIZE = TIME_SHIFT + MAX_SHIFT  # 795 (794 paper tokens + PAD)

BAR_TICKS = 4 * TICKS_PER_BEAT
HOLD_TICKS = (BAR_TICKS, 1, BAR_TICKS)
"""The longest a sampled note of each track (bass, drums, third) sounds, in ticks. Pitched parts:
1 bar (no bass note and 0.4 % of the piano notes of the POP909 trio set are longer; the
model's forgotten notes otherwise drone on). Drums: 1 tick, the length of every drum note of
the trio sets (a drum's length is not heard; a longer one leaves the model off its data)."""
MONO = (True, False, False)
"""The tracks (bass, drums, third) a sampled note of which waits for the track's sounding note to
end: the bass. No bass note of the POP909 trio set (319,615 in its three splits) sounds past
the next bass onset, but a sampled bass note often did (half of them, held a median 2.4 beats
against the songs' 1.05): the model starts the next note and has forgotten the last."""


def note_on(track: int, pitch: int) -> int:
    """Id of NoteOn for track index 0..2 (bass, drums, third)."""
    return NOTE_ON + track * N_PITCHES + pitch


def time_shift(ticks: int) -> int:
    """Id of a TimeShift of 1..24 ticks."""
    return TIME_SHIFT + ticks - 1


class GrooveTables:
    """Per-id lookup arrays (built once): kind, track, pitch, shift length."""

    SPECIAL, ON, OFF, SHIFT = 0, 1, 2, 3

    def __init__(self) -> None:
        ids = np.arange(VOCAB_SIZE)
        self.kind = np.full(VOCAB_SIZE, self.SPECIAL, dtype=np.int8)
        self.kind[(ids >= NOTE_ON) & (ids < NOTE_OFF)] = self.ON
        self.kind[(ids >= NOTE_OFF) & (ids < TIME_SHIFT)] = self.OFF
        self.kind[ids >= TIME_SHIFT] = self.SHIFT
        note = np.where(self.kind == self.ON, ids - NOTE_ON, ids - NOTE_OFF)
        is_note = (self.kind == self.ON) | (self.kind == self.OFF)
        self.track = np.where(is_note, note // N_PITCHES, -1).astype(np.int64)
        self.pitch = np.where(is_note, note % N_PITCHES, -1).astype(np.int64)
        self.shift = np.where(self.kind == self.SHIFT, ids - TIME_SHIFT + 1, 0).astype(np.int64)
        # slot = track * 128 + pitch (the sounding-note index), -1 for non-notes
        self.slot = np.where(is_note, note, -1).astype(np.int64)
        self.kind_list: list[int] = self.kind.tolist()  # plain lists: fast scalar access
        self.slot_list: list[int] = self.slot.tolist()

    def name(self, i: int) -> str:
        if i == PAD_ID:
            return "PAD"
        if i == BOS_ID:
            return "BOS"
        if i == EOS_ID:
            return "EOS"
        k = self.kind[i]
        if k == self.ON or k == self.OFF:
            head = "NoteOn" if k == self.ON else "NoteOff"
            return f"{head}_{TRACK_NAMES[self.track[i]]}_{self.pitch[i]}"
        beats, offset = divmod(int(self.shift[i]), TICKS_PER_BEAT)
        return f"TimeShift_{beats}_{offset}"

    def names(self) -> list[str]:
        return [self.name(i) for i in range(VOCAB_SIZE)]


class GrooveGrammar(Grammar):
    """Valid sequences: BOS, then NoteOn / NoteOff / TimeShift, then EOS with nothing sounding.

    - NoteOn(track, pitch) only when that pitch is not sounding on that track;
    - NoteOff(track, pitch) only when it is sounding;
    - TimeShifts always (time only moves forward by construction);
    - EOS only when nothing sounds; nothing at all after EOS; PAD and a second BOS never.
    The allowed mask is kept up to date in O(1) per `advance`; `allowed()` copies it (O(vocab)).
    `hold`: the longest a sampled note of each track sounds, in ticks; `mono`: the tracks whose
    sampled notes wait for the track's sounding note to end (`sampling_mask`, `redirects`).
    """

    def __init__(
        self, hold: tuple[int, int, int] = HOLD_TICKS, mono: tuple[bool, bool, bool] = MONO
    ) -> None:
        if len(hold) != N_TRACKS or min(hold) < 1:
            raise MusicgenError(f"groove grammar: hold needs 3 tick counts >= 1, got {hold!r}")
        if len(mono) != N_TRACKS:
            raise MusicgenError(f"groove grammar: mono needs 3 flags, got {mono!r}")
        self.hold = tuple(int(h) for h in hold)
        self.mono = tuple(bool(m) for m in mono)
        self._time = 0  # ticks so far
        self._due: dict[int, int] = {}  # sounding slot -> tick by which a sampled id ends it
        self.tables = _TABLES
        self.errors = 0
        self._sounding = np.zeros(N_TRACKS * N_PITCHES, dtype=bool)
        self._n_sounding = 0
        self._started = False
        self._finished = False
        self._mask = np.zeros(VOCAB_SIZE, dtype=bool)
        self._mask[BOS_ID] = True

    def _open_mask(self) -> None:
        """The mask right after BOS (nothing sounding)."""
        self._mask[:] = False
        self._mask[NOTE_ON:NOTE_OFF] = True
        self._mask[TIME_SHIFT:] = True
        self._mask[EOS_ID] = True

    def allowed(self) -> np.ndarray:
        return self._mask.copy()

    def finished(self) -> bool:
        return self._finished

    def sounding(self) -> list[tuple[int, int]]:
        """(track index, pitch) of the notes currently held."""
        return [divmod(int(s), N_PITCHES) for s in np.flatnonzero(self._sounding)]

    def advance(self, token_id: int) -> bool:
        i = int(token_id)
        ok = 0 <= i < VOCAB_SIZE and bool(self._mask[i])
        if not ok:
            self.errors += 1
        if self._finished or not 0 <= i < VOCAB_SIZE:
            return ok
        if not self._started:
            if i == BOS_ID:
                self._started = True
                self._open_mask()
            return ok
        kind = self.tables.kind_list[i]
        if kind == GrooveTables.SHIFT:
            self._time += i - TIME_SHIFT + 1
        elif kind == GrooveTables.ON:
            self._set(self.tables.slot_list[i], True)
        elif kind == GrooveTables.OFF:
            self._set(self.tables.slot_list[i], False)
        elif i == EOS_ID:
            self._finished = True
            self._mask[:] = False
        return ok

    def _set(self, slot: int, on: bool) -> None:
        """Mark a slot sounding (on) or released and flip its two mask entries."""
        if self._sounding[slot] == on:
            return  # an invalid repeat (already counted as an error): state unchanged
        self._sounding[slot] = on
        self._n_sounding += 1 if on else -1
        if on:
            self._due[slot] = self._time + self.hold[slot // N_PITCHES]
        else:
            del self._due[slot]
        self._mask[NOTE_ON + slot] = not on
        self._mask[NOTE_OFF + slot] = on
        self._mask[EOS_ID] = self._n_sounding == 0

    def sampling_mask(self) -> np.ndarray | None:
        """What a sampled id may be beside `allowed()`: no TimeShift carries a note past its
        `hold` bound, a note at its bound is ended before anything else (the NoteOffs that
        come first at a tick in the encoder's order), and a `mono` track starts no note while
        one of its notes sounds. None while nothing sounds."""
        if not self._due:
            return None
        left = min(self._due.values()) - self._time
        mask = np.ones(VOCAB_SIZE, dtype=bool)
        if left <= 0:
            mask[:] = False
            mask[[NOTE_OFF + s for s, end in self._due.items() if end <= self._time]] = True
            return mask
        mask[TIME_SHIFT + left :] = False  # shifts of more than `left` ticks
        for track in self._mono_held():
            mask[NOTE_ON + track * N_PITCHES : NOTE_ON + (track + 1) * N_PITCHES] = False
        return mask

    def _mono_held(self) -> list[int]:
        """The `mono` tracks with a note sounding."""
        return [t for t in range(N_TRACKS) if self.mono[t] and self._held(t).any()]

    def _held(self, track: int) -> np.ndarray:
        return self._sounding[track * N_PITCHES : (track + 1) * N_PITCHES]

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per track with notes sounding: its NoteOffs of silent pitches -> its sounding notes'
        NoteOffs, and on a `mono` track its NoteOns too (a new note ends the last first; the
        model then draws the note it wanted at the same tick). The groove models know far
        better when a part's note ends than which pitch is held (docs/tokenization.md has the
        numbers); renormalising that mass over every allowed id instead leaves the held note
        sounding on."""
        out = []
        for track in range(N_TRACKS):
            held = self._held(track)
            if held.any():
                base = NOTE_OFF + track * N_PITCHES
                sources = base + np.flatnonzero(~held)
                if self.mono[track]:
                    ons = NOTE_ON + track * N_PITCHES + np.arange(N_PITCHES)
                    sources = np.concatenate([sources, ons])
                out.append((sources, base + np.flatnonzero(held)))
        return out

    def completion(self) -> list[int]:
        if self._finished:
            return []
        head = [] if self._started else [BOS_ID]
        offs = [NOTE_OFF + int(s) for s in np.flatnonzero(self._sounding)]
        return head + offs + [EOS_ID]


_TABLES = GrooveTables()
