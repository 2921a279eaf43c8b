"""REMI tokens for (pop) piano, built on miditok's REMI and configured after the SPE paper.

Every non-drum track is merged into one piano part before tokenizing (POP909's MELODY, BRIDGE and
PIANO tracks become one stream), time signatures are ignored (every bar is 4/4, 16 positions).
With `melody: true` the notes of a track named Melody keep their voice as `MelodyPitch_p` tokens
(in place of `Pitch_p`: no longer sequences) and decode to a Melody track beside the Piano; with
`sections: true` a phrase's label and length follow the `Bar` where it starts (tokenizers.form),
and with `densities: true` its density level after them. These families are appended after
miditok's vocabulary, so the ids of a plain REMI are unchanged.
The miditok configuration is embedded in `to_dict()`, so a checkpoint alone rebuilds the exact
vocabulary. See docs/tokenization.md for the vocabulary and where it differs from the paper.
The miditok configuration, the tracks a score is reduced to (piano, melody), the appended token
names and the merge of doubled notes are in `remi_prepare.py` (re-exported here); what a control
and the musical clock read of the vocabulary (chord ids, pitch-class masks, time tables) is the
`RemiControls` mixin in `remi_controls.py`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import symusic
from miditok import REMI, TokSequence
from miditok.constants import SCORE_LOADING_EXCEPTION

from musicgen.errors import MusicgenError
from musicgen.limits import check_score
from musicgen.tokenizers.base import PAD_ID, Tokenizer
from musicgen.tokenizers.chords import ChordSpan, chord_grid_events, insert_chords
from musicgen.tokenizers.form import (
    DENSITY_LEVELS,
    MAX_SECTION_BARS,
    SECTION_LABELS,
    Section,
    add_markers,
    density_level,
)
from musicgen.tokenizers.options import RemiOptions, as_dict, options_from, parse_options
from musicgen.tokenizers.pedal import fold_pedal
from musicgen.tokenizers.recall import strip_recall
from musicgen.tokenizers.remi_controls import RemiControls
from musicgen.tokenizers.remi_grammar import RemiGrammar, RemiTables
from musicgen.tokenizers.remi_prepare import (  # noqa: F401 (re-exported: the helpers' old home)
    SPECIAL_TOKENS,
    _miditok_config,
    _only,
    extra_names,
    melody_track,
    merge_duplicates,
    merge_piano,
)

SECTION_FAMILIES = (RemiTables.SECTION, RemiTables.SECTION_BARS)  # what a form forces
PHRASE_FAMILIES = (*SECTION_FAMILIES, RemiTables.SECTION_DENSITY)  # every phrase token


class RemiTokenizer(RemiControls, Tokenizer):
    """Pop-piano REMI: Bar, Position, Tempo, Chord, then Pitch/Velocity/Duration per note."""

    name = "remi"

    def __init__(self, options: dict[str, Any] | RemiOptions | None = None):
        if not isinstance(options, RemiOptions):
            options = options_from(RemiOptions, dict(options or {}), "REMI")
        self.options = as_dict(options)
        self._mt = REMI(_miditok_config(self.options))
        vocab = self._mt.vocab
        self._names = [""] * len(vocab)
        for tok, i in vocab.items():
            self._names[i] = tok
        self._names += extra_names(self.options)
        self._ids = {name: i for i, name in enumerate(self._names)}
        if self._names[PAD_ID] != "PAD_None":
            raise MusicgenError("tokenizer: miditok did not put PAD at id 0")
        self.bos_id = vocab["BOS_None"]
        self.eos_id = vocab["EOS_None"]
        self.bar_id = vocab["Bar_None"]
        self.tables = RemiTables.build(self._names)

    # --- vocabulary -------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self._names)

    def token_name(self, token_id: int) -> str:
        if not 0 <= int(token_id) < len(self._names):
            raise MusicgenError(
                f"token id {token_id} is outside the vocabulary (0..{len(self._names) - 1})"
            )
        return self._names[int(token_id)]

    def token_id(self, name: str) -> int:
        try:
            return self._ids[name]
        except KeyError:
            raise MusicgenError(f"unknown REMI token '{name}'") from None

    @property
    def velocities(self) -> np.ndarray:
        """The velocity bins (what a decoded note's velocity can be)."""
        return np.asarray(self._mt.velocities)

    # --- encode / decode --------------------------------------------------------------------

    def load_score(self, src: str | Path | symusic.Score) -> symusic.Score:
        if isinstance(src, symusic.Score):
            return src
        path = Path(src)
        if path.is_dir():
            raise MusicgenError(f"{path}: is a directory, not a MIDI file")
        try:
            score = symusic.Score(str(path))
        except SCORE_LOADING_EXCEPTION as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise MusicgenError(f"{path}: cannot read MIDI ({msg})") from None
        check_score(score, str(path))  # before miditok allocates per bar
        return score

    def encode(
        self,
        src: str | Path | symusic.Score,
        chords: list[ChordSpan] | None = None,
        sections: list[Section] | None = None,
    ) -> list[int]:
        """With `chords` (annotations), their Chord tokens replace miditok's detected ones;
        with `sections` (the phrases on this score's bars), their tokens follow their bars."""
        where = "score" if isinstance(src, symusic.Score) else str(src)
        score = self.load_score(src)
        if self.options["fold_pedal"]:
            score = fold_pedal(score)
        melody = melody_track(score) if self.options["melody"] else None
        merged = merge_piano(score)
        if len(merged.tracks[0].notes) == 0:
            raise MusicgenError(f"{where}: no notes (outside drum tracks)")
        ids = [self.bos_id, *self._miditok_ids(merged, where), self.eos_id]
        if self.options["merge_duplicates"]:
            ids = merge_duplicates(ids, self.tables)
        if melody is not None and len(melody.notes):
            ids = self._mark_melody(ids, self._miditok_ids(_only(merged, melody), where))
        if chords is not None:
            ids = self._annotated_chords(ids, merged, chords)
        if sections:
            ids = self.insert_sections(ids, sections, where)
        if not np.any(self.tables.family[np.asarray(ids)] == RemiTables.PITCH):
            raise MusicgenError(f"{where}: no notes inside the piano range")
        return ids

    def _miditok_ids(self, score: symusic.Score, where: str) -> list[int]:
        try:
            seqs = self._mt.encode(score)
        except (ValueError, IndexError, RuntimeError) as exc:
            raise MusicgenError(f"{where}: cannot tokenize ({exc})") from None
        return list((seqs[0] if isinstance(seqs, list) else seqs).ids)

    def _note_keys(self, ids: list[int]) -> list[tuple[int, int, int]]:
        """(bar, position, pitch) of each Pitch token, in order."""
        t, bar, pos, keys = self.tables, -1, 0, []
        for i in ids:
            fam = t.family[i]
            if fam == RemiTables.BAR:
                bar, pos = bar + 1, 0
            elif fam == RemiTables.POSITION:
                pos = int(t.position[i])
            elif fam == RemiTables.PITCH:
                keys.append((bar, pos, int(t.pitch[i])))
        return keys

    def _mark_melody(self, ids: list[int], melody_ids: list[int]) -> list[int]:
        """Pitch tokens of notes the melody track plays (same bar, position and pitch, as
        miditok quantised both) become MelodyPitch tokens."""
        melody = set(self._note_keys(melody_ids))
        keys = iter(self._note_keys(ids))
        t, out = self.tables, list(ids)
        for k, i in enumerate(ids):
            if t.family[i] == RemiTables.PITCH and next(keys) in melody:
                out[k] = t.melody_to_id[int(t.pitch[i])]
        return out

    def section_ids(
        self, label: str, bars: int, where: str = "form", density: int | None = None
    ) -> list[int]:
        """The ids that open a phrase: Section_<label> SectionBars_<bars> (longer phrases are
        written as the longest length the vocabulary has), then SectionDensity_<density> where
        one is given and the vocabulary has densities (none given: the model draws it)."""
        t = self.tables
        if not t.section_to_id:
            raise MusicgenError(f"{where}: this model has no section tokens (no form control)")
        if label not in t.section_to_id:
            raise MusicgenError(
                f"{where}: unknown phrase label '{label}' (known: {' '.join(SECTION_LABELS)})"
            )
        ids = [
            t.section_to_id[label],
            t.section_bars_to_id[min(max(int(bars), 1), MAX_SECTION_BARS)],
        ]
        if density is not None:
            if not t.section_density_to_id:
                raise MusicgenError(
                    f"{where}: this model has no density tokens (phrase {label}{bars}@{density})"
                )
            ids.append(t.section_density_to_id[min(max(int(density), 1), DENSITY_LEVELS)])
        return ids

    def section_mask(self) -> np.ndarray:
        """bool[vocab]: the ids a form forces (Section and SectionBars; a density, when none is
        given, is the model's to draw)."""
        return np.isin(self.tables.family, SECTION_FAMILIES)

    def phrase_mask(self) -> np.ndarray:
        return np.isin(self.tables.family, PHRASE_FAMILIES)

    def insert_sections(
        self, ids: list[int], sections: list[Section], where: str = "form"
    ) -> list[int]:
        """Section_<label> SectionBars_<n> after the Bar token of each section's first bar; in a
        vocabulary with densities, then its SectionDensity (a section without one: the level of
        the notes `ids` hold in its bars)."""
        if self.tables.section_density_to_id:
            sections = self._with_densities(ids, sections)
        at = {int(s.bar): self.section_ids(s.label, s.bars, where, s.density) for s in sections}
        out, bar = [], -1
        for i in ids:
            out.append(i)
            if i == self.bar_id:
                bar += 1
                out += at.get(bar, [])
        return out

    def _with_densities(self, ids: list[int], sections: list[Section]) -> list[Section]:
        """`sections`, each with its density level: given, or from the notes a bar of the bars
        of it that `ids` hold (a prompt may hold the first bars of a phrase only)."""
        arr = np.asarray(ids, np.int64)
        bar = np.cumsum(arr == self.bar_id) - 1  # the bar of each id
        starts = bar[self.tables.family[arr] == RemiTables.PITCH]  # a note per Pitch id
        held = int(bar.max()) + 1 if len(bar) else 0
        out = []
        for s in sections:
            n = min(s.bars, held - s.bar)
            if s.density is None and n > 0:
                notes = np.count_nonzero((starts >= s.bar) & (starts < s.bar + n))
                s = Section(s.bar, s.label, s.bars, density_level(notes / n))
            out.append(s)
        return out

    def melody_pitches(self) -> np.ndarray | None:
        t = self.tables
        return np.where(t.melody, t.pitch, -1) if t.melody.any() else None

    def seed_ids(self) -> dict[int, int]:
        """A melody pitch starts from its accompaniment pitch."""
        return {i: int(self.tables.twin[i]) for i in np.flatnonzero(self.tables.melody)}

    def sections(self, ids: list[int] | np.ndarray) -> list[Section]:
        """The phrases written in `ids` (bar counted from the first Bar)."""
        t, bar, out = self.tables, -1, []
        arr = [int(i) for i in np.asarray(ids).reshape(-1)]
        for k, i in enumerate(arr):
            if i == self.bar_id:
                bar += 1
            elif t.family[i] == RemiTables.SECTION and k + 1 < len(arr):
                n = arr[k + 1]
                if t.family[n] == RemiTables.SECTION_BARS:
                    d = arr[k + 2] if k + 2 < len(arr) else None
                    dense = None
                    if d is not None and t.family[d] == RemiTables.SECTION_DENSITY:
                        dense = int(t.value[d])
                    out.append(Section(bar, t.label[i], int(t.value[n]), dense))
        return out

    def _annotated_chords(
        self, ids: list[int], score: symusic.Score, chords: list[ChordSpan]
    ) -> list[int]:
        ppb = int(self._mt.config.max_num_pos_per_beat)
        events, _ = chord_grid_events(
            score, chords, self.tables, self._mt.config.chord_maps, ppb, 4 * ppb
        )  # every bar is 4/4: 4 beats of `ppb` positions
        return insert_chords(ids, events, self.tables, self.bar_id)

    def decode(self, ids: list[int] | np.ndarray) -> symusic.Score:
        """A Piano track; with melody notes in `ids`, a Melody track first; with phrase
        tokens, a marker per phrase ("A8", `form.add_markers`)."""
        ids = strip_recall(self, ids)  # a model's context: its recalled phrases are not music
        score = self._decode_notes(ids)
        add_markers(score, self.sections(ids))
        return score

    def _decode_notes(self, ids: list[int] | np.ndarray) -> symusic.Score:
        t = self.tables
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        arr = arr[(arr >= 0) & (arr < self.vocab_size)]
        arr = arr[
            ~np.isin(t.family[arr], (RemiTables.SPECIAL, RemiTables.RECALL, *PHRASE_FAMILIES))
        ]
        in_melody = self._note_members(arr, t.melody[arr])
        if not in_melody.any():
            return self._mt.decode([TokSequence(ids=arr.tolist())])
        in_piano = self._note_members(arr, (t.family[arr] == RemiTables.PITCH) & ~t.melody[arr])
        score = self._mt.decode([TokSequence(ids=arr[~in_melody].tolist())])
        sung = self._mt.decode([TokSequence(ids=t.twin[arr[~in_piano]].tolist())])
        for track in score.tracks:
            track.name = "Piano"
        if not sung.tracks:  # melody pitches without a whole note (ids the grammar did not mask)
            return score
        melody = sung.tracks[0]
        melody.name = "Melody"
        score.tracks.insert(0, melody)
        return score

    def _note_members(self, arr: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """bool per id: a note start in `starts`, or the Velocity/Duration that follow it."""
        fam = self.tables.family[arr]
        member = starts.copy()
        vel = np.zeros_like(member)
        vel[1:] = member[:-1] & (fam[1:] == RemiTables.VELOCITY)
        dur = np.zeros_like(member)
        dur[1:] = vel[:-1] & (fam[1:] == RemiTables.DURATION)
        return member | vel | dur

    # --- sequence operations ----------------------------------------------------------------

    @functools.lru_cache(maxsize=64)  # noqa: B019  (one tokenizer lives for the whole run)
    def _transpose_table(self, k: int) -> np.ndarray:
        """id -> id shifted by k semitones; -1 where a pitch would leave the range."""
        t = self.tables
        table = np.arange(self.vocab_size, dtype=np.int64)
        pitch_ids = np.flatnonzero(t.family == RemiTables.PITCH)
        for i in pitch_ids:
            voice = t.melody_to_id if t.melody[i] else t.pitch_to_id
            table[i] = voice.get(int(t.pitch[i]) + k, -1)
        for i in np.flatnonzero(t.family == RemiTables.CHORD):
            root, quality = t.chord[i]
            table[i] = t.chord_to_id[((root + k) % 12, quality)]
        return table

    def bar_starts(self, ids: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.asarray(ids) == self.bar_id)

    def bar_counter(self) -> _RemiBarCounter:
        return _RemiBarCounter(self.bar_id)

    def grammar(self) -> RemiGrammar:
        return RemiGrammar(
            self.tables,
            self.bos_id,
            self.eos_id,
            self.bar_id,
            unique_pitches=self.options["merge_duplicates"],
        )

    # --- serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "options": dict(self.options),
            "miditok": self._mt.config.to_dict(serialize=True),
            "vocab": list(self._names),
        }

    @classmethod
    def from_dict(cls, data: dict) -> RemiTokenizer:
        """From a YAML config or a stored tokenizer.json. The vocabulary is always rebuilt from
        the typed options (a stored `miditok` block is not trusted: its sizes are unchecked),
        and must equal the stored `vocab` when there is one."""
        tok = cls(parse_options(RemiOptions, data, ("miditok", "vocab"), "REMI"))
        vocab = data.get("vocab")
        if vocab is not None and (not isinstance(vocab, list) or vocab != tok._names):
            raise MusicgenError(
                "tokenizer: the stored REMI vocabulary differs from the one miditok rebuilds "
                "(different miditok version?)"
            )
        return tok


class _RemiBarCounter:
    """A bar starts at every Bar token: one comparison per id."""

    def __init__(self, bar_id: int) -> None:
        self.bar_id, self.n = bar_id, 0
        self.starts: list[int] = []

    def push(self, token_id: int) -> None:
        if int(token_id) == self.bar_id:
            self.starts.append(self.n)
        self.n += 1
