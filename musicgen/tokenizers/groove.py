"""Groove2Groove multi-track tokenizer: NoteOn/NoteOff(track, pitch) + TimeShift, 12 ticks per beat.

The vocabulary is the SPE paper's groove experiment's (794 tokens) plus our padding id 0; the
layout is in `groove_grammar.py`. Tracks are found by role (bass, drums, one accompaniment track;
docs/tokenization.md says how) and merged per role; bars are 4 beats from the first bar with a
note, and TimeShifts are split at bar lines so `bar_starts` works on generated ids too. Ids carry
no tempo: `decode(ids, tempo=...)` writes the one given, else 120 qpm.
"""

from __future__ import annotations

import functools
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.tokenizers.base import PAD_ID, TimeTables, Tokenizer
from musicgen.tokenizers.groove_grammar import (
    BOS_ID,
    DRUMS,
    EOS_ID,
    MAX_SHIFT,
    N_TRACKS,
    NOTE_OFF,
    NOTE_ON,
    TICKS_PER_BEAT,
    TRACK_NAMES,
    VOCAB_SIZE,
    GrooveGrammar,
    GrooveTables,
    time_shift,
)
from musicgen.tokenizers.groove_notes import (  # noqa: F401  (re-exported)
    NoteArray,
    _quantise,
    _where,
    is_bass,
    load_score,
    resolve_overlaps,
)
from musicgen.tokenizers.options import GrooveOptions, as_dict, options_from, parse_options


class GrooveTokenizer(Tokenizer):
    """MIDI <-> Groove2Groove ids (see the module docstring for roles, bars and tempo)."""

    name = "groove"
    bos_id = BOS_ID
    eos_id = EOS_ID

    def __init__(self, options: dict[str, Any] | GrooveOptions | None = None):
        if not isinstance(options, GrooveOptions):
            options = options_from(GrooveOptions, dict(options or {}), "groove")
        opts = as_dict(options)
        self.options = opts
        self.tables = GrooveTables()
        self._names = self.tables.names()
        self._ids = {n: i for i, n in enumerate(self._names)}
        self.ticks_per_bar = int(opts["beats_per_bar"]) * TICKS_PER_BEAT

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def token_name(self, token_id: int) -> str:
        if not 0 <= int(token_id) < VOCAB_SIZE:
            raise MusicgenError(f"tokenizer: id {token_id} outside the vocabulary (0..794)")
        return self._names[int(token_id)]

    def token_id(self, name: str) -> int:
        if name not in self._ids:
            raise MusicgenError(f"tokenizer: unknown groove token '{name}'")
        return self._ids[name]

    # --- roles ------------------------------------------------------------------------------

    def roles(
        self, src: str | Path | symusic.Score, rng: np.random.Generator | None = None
    ) -> list[NoteArray]:
        """Quantised, overlap-free notes of bass, drums, third (each (n, 3)), times from 0 of
        the first bar that has a note. Raises MusicgenError when no track has notes."""
        where = _where(src)
        score = load_score(src)
        tracks = [t for t in score.tracks if len(t.notes) > 0]
        if not tracks:
            raise MusicgenError(f"{where}: no usable track (no notes in any track)")
        groups: list[list[Any]] = [[], [], []]
        others = []
        for t in tracks:
            if t.is_drum:
                groups[DRUMS].append(t)
            elif is_bass(t):
                groups[0].append(t)
            else:
                others.append(t)
        if others:
            if self.options["third_track"] == "random":
                if rng is None:
                    seed = [int(self.options["seed"]), zlib.crc32(where.encode())]
                    rng = np.random.default_rng(seed)
                groups[2].append(others[int(rng.integers(len(others)))])
            else:
                counts = [len(t.notes) for t in others]
                groups[2].append(others[int(np.argmax(counts))])  # argmax: earliest on ties
        out = []
        for group in groups:
            parts = [_quantise(t, score.tpq) for t in group]
            out.append(resolve_overlaps(np.concatenate(parts)) if parts else np.zeros((0, 3), int))
        start = min(int(n[:, 0].min()) for n in out if len(n))
        start = start // self.ticks_per_bar * self.ticks_per_bar
        for n in out:
            n[:, :2] -= start
        return out

    def tempo_of(self, src: str | Path | symusic.Score) -> float:
        """The first tempo (qpm) of a file or score, else `default_tempo`."""
        score = load_score(src)
        if len(score.tempos):
            return float(score.tempos[0].qpm)
        return float(self.options["default_tempo"])

    # --- encode / decode --------------------------------------------------------------------

    def _shifts(self, cur: int, target: int, out: list[int]) -> None:
        """Append TimeShifts from `cur` to `target`: <= 2 beats each, never across a bar line."""
        while cur < target:
            next_bar = (cur // self.ticks_per_bar + 1) * self.ticks_per_bar
            step = min(target, next_bar, cur + MAX_SHIFT) - cur
            out.append(time_shift(step))
            cur += step

    def encode(
        self, src: str | Path | symusic.Score, rng: np.random.Generator | None = None
    ) -> list[int]:
        """BOS, then at each tick the NoteOffs then the NoteOns (by track, pitch), TimeShifts
        between ticks, EOS. `rng` only matters for `third_track: random`."""
        roles = self.roles(src, rng)
        times, kinds, toks = [], [], []
        for track, n in enumerate(roles):
            if len(n) == 0:
                continue
            slot = track * 128 + n[:, 2]
            times += [n[:, 1], n[:, 0]]
            kinds += [np.zeros(len(n), np.int64), np.ones(len(n), np.int64)]
            toks += [NOTE_OFF + slot, NOTE_ON + slot]
        t, k, tok = (np.concatenate(x) for x in (times, kinds, toks))
        order = np.lexsort((tok, k, t))
        ids = [BOS_ID]
        cur = 0
        for time, token in zip(t[order].tolist(), tok[order].tolist(), strict=True):
            if time > cur:
                self._shifts(cur, time, ids)
                cur = time
            ids.append(token)
        ids.append(EOS_ID)
        return ids

    def decode(self, ids: list[int] | np.ndarray, tempo: float | None = None) -> symusic.Score:
        """Three tracks (bass, drums on channel 10, third) at `tempo` (default: `default_tempo`).
        Lenient: unmatched NoteOffs are skipped, a repeated NoteOn restarts the note, notes still
        sounding at the end (or at EOS) stop there (at least one tick long)."""
        o = self.options
        scale = int(o["decode_tpq"]) // TICKS_PER_BEAT
        score = symusic.Score(int(o["decode_tpq"]))
        score.tempos.append(symusic.Tempo(0, float(tempo or o["default_tempo"])))
        programs = (int(o["bass_program"]), 0, int(o["third_program"]))
        tracks = [symusic.Track(TRACK_NAMES[i], programs[i], i == DRUMS) for i in range(N_TRACKS)]
        vel = int(o["velocity"])
        tb = self.tables
        open_: dict[int, int] = {}  # slot -> onset
        cur = 0

        def close(slot: int, end: int) -> None:
            onset = open_.pop(slot)
            dur = max(end - onset, 1) * scale
            tracks[slot // 128].notes.append(symusic.Note(onset * scale, dur, slot % 128, vel))

        for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist():
            if not 0 <= i < VOCAB_SIZE or i in (PAD_ID, BOS_ID):
                continue
            if i == EOS_ID:
                break
            kind = tb.kind[i]
            if kind == GrooveTables.SHIFT:
                cur += int(tb.shift[i])
                continue
            slot = int(tb.slot[i])
            if kind == GrooveTables.ON:
                if slot in open_:
                    close(slot, cur)
                open_[slot] = cur
            elif slot in open_:
                close(slot, cur)
        for slot in sorted(open_):
            close(slot, cur)
        for tr in tracks:
            tr.notes.sort()
            score.tracks.append(tr)
        return score

    def decode_to_midi(
        self, ids: list[int] | np.ndarray, path: str | Path, tempo: float | None = None
    ) -> None:
        from musicgen.io import write_score

        write_score(self.decode(ids, tempo=tempo), path)

    # --- sequence operations ----------------------------------------------------------------

    @functools.lru_cache(maxsize=64)  # noqa: B019  (one tokenizer lives for the whole run)
    def _transpose_table(self, k: int) -> np.ndarray:
        """id -> id with pitched (non-drum) notes moved by k; -1 where a pitch leaves 0..127."""
        tb = self.tables
        table = np.arange(VOCAB_SIZE, dtype=np.int64)
        pitched = (tb.track >= 0) & (tb.track != DRUMS)
        new = tb.pitch + k
        inside = (new >= 0) & (new < 128)
        table[pitched] = np.where(inside[pitched], table[pitched] + k, -1)
        return table

    def bar_starts(self, ids: np.ndarray) -> np.ndarray:
        """Index of the first token at or after each bar line (time accumulated from the first
        token; BOS/EOS/PAD are never starts; a token after a long silence starts one bar; the
        NoteOffs closing the piece on its last bar line start none)."""
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(arr) == 0:
            return np.zeros(0, dtype=np.int64)
        arr = np.clip(arr, 0, VOCAB_SIZE - 1)
        shift = self.tables.shift[arr]
        before = np.cumsum(shift) - shift  # time before each token
        bar = before // self.ticks_per_bar
        new = np.ones(len(arr), dtype=bool)
        new[1:] = bar[1:] > bar[:-1]
        kind = self.tables.kind[arr]
        special = kind == GrooveTables.SPECIAL
        if special[0]:  # BOS: bar 0 starts at the next token
            new[1:2] = True
        # a "bar" of only the final NoteOffs (notes ending on the last bar line) is no bar
        moves = (kind == GrooveTables.ON) | (kind == GrooveTables.SHIFT)
        moves_later = np.flip(np.cumsum(np.flip(moves))) > 0
        return np.flatnonzero(new & ~special & moves_later)

    def bar_counter(self) -> _GrooveBarCounter:
        return _GrooveBarCounter(self.tables, self.ticks_per_bar)

    def drop_tracks(self, ids: np.ndarray, rng: Any, p: float) -> np.ndarray:
        """Remove each present track's notes with probability p, never all of them; TimeShifts
        are merged back into the encoder's canonical form. `rng`: numpy Generator or
        random.Random (only `.random()` is used)."""
        arr = np.asarray(ids)
        a = arr.astype(np.int64)
        tb = self.tables
        safe = np.clip(a, 0, VOCAB_SIZE - 1)
        notes = tb.track[safe]
        present = [int(x) for x in np.unique(notes[tb.kind[safe] == GrooveTables.ON])]
        if p <= 0 or not present:
            return arr.copy()
        drop = [rng.random() < p for _ in present]
        if all(drop):
            drop[min(int(rng.random() * len(present)), len(present) - 1)] = False
        dropped = {t for t, d in zip(present, drop, strict=True) if d}
        if not dropped:
            return arr.copy()
        out: list[int] = []
        cur = emitted = 0
        for i, trk in zip(a.tolist(), notes.tolist(), strict=True):
            sh = int(tb.shift[i]) if 0 <= i < VOCAB_SIZE else 0
            if sh:
                cur += sh
                continue
            if trk in dropped:
                continue
            if cur > emitted:
                self._shifts(emitted, cur, out)
                emitted = cur
            out.append(i)
        if cur > emitted:
            self._shifts(emitted, cur, out)
        return np.asarray(out, dtype=arr.dtype)

    def grammar(self) -> GrooveGrammar:
        return GrooveGrammar()

    # --- musical time -----------------------------------------------------------------------

    def time_tables(self) -> TimeTables:
        """Time is the sum of the TimeShifts (12 ticks per beat) since the first bar line."""
        zeros = np.zeros(VOCAB_SIZE, np.int64)
        return TimeTables(
            bar=zeros,
            position=np.full(VOCAB_SIZE, -1, np.int64),
            shift=self.tables.shift.astype(np.int64).copy(),
            positions_per_bar=self.ticks_per_bar,
            positions_per_beat=TICKS_PER_BEAT,
            note=(self.tables.kind == GrooveTables.ON).astype(np.int64),
        )

    def note_end_mask(self) -> np.ndarray:
        return self.tables.kind == GrooveTables.OFF

    # --- serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {"name": self.name, **self.options, "vocab_size": VOCAB_SIZE}

    @classmethod
    def from_dict(cls, data: dict) -> GrooveTokenizer:
        """From a YAML config or a stored tokenizer.json (typed options, see options.py)."""
        options = parse_options(GrooveOptions, data, ("vocab_size",), "groove")
        if data.get("vocab_size", VOCAB_SIZE) != VOCAB_SIZE:
            raise MusicgenError(
                f"tokenizer: stored groove vocab_size {data['vocab_size']!r} != {VOCAB_SIZE}"
            )
        return cls(options)


class _GrooveBarCounter:
    """`bar_starts` one id at a time: the running time gives the bar of each token; a bar's first
    token is a start once some NoteOn or TimeShift follows at or after it (until then pending)."""

    def __init__(self, tables: GrooveTables, ticks_per_bar: int) -> None:
        self.tables, self.tpb = tables, ticks_per_bar
        self.n, self.time, self.bar, self.first_special = 0, 0, -1, False
        self.pending: list[int] = []
        self.starts: list[int] = []

    def push(self, token_id: int) -> None:
        tok = min(max(int(token_id), 0), VOCAB_SIZE - 1)
        kind, bar = int(self.tables.kind[tok]), self.time // self.tpb
        new = self.n == 0 or bar > self.bar or (self.n == 1 and self.first_special)
        if self.n == 0:
            self.first_special = kind == GrooveTables.SPECIAL
        if new and kind != GrooveTables.SPECIAL:
            self.pending.append(self.n)
        if kind in (GrooveTables.ON, GrooveTables.SHIFT):
            self.starts.extend(self.pending)
            self.pending.clear()
        self.time += int(self.tables.shift[tok])
        self.bar, self.n = bar, self.n + 1
