"""The tokenizer and grammar interfaces every downstream module relies on.

A tokenizer turns a MIDI file (or a `symusic.Score`) into a list of integer ids and back; it never
sees torch. Its `grammar()` gives an incremental checker used by the sampler (to mask invalid
tokens), by tests (every prepared sequence is accepted) and by the evaluation (grammar error rate).
Tokenizers are chosen by name from `musicgen.tokenizers.REGISTRY` and describe themselves as a
JSON-able dict, which is stored with every prepared dataset and every checkpoint.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import symusic

PAD_ID = 0  # every tokenizer reserves id 0 for padding; the loss ignores it


class Grammar(abc.ABC):
    """Incremental validity state for one sequence being generated.

    `allowed()` is O(vocabulary) and never re-parses the prefix; `advance()` updates the state in
    O(1) (amortised). `completion()` lists the tokens that close the sequence validly (finish an
    open note triple, release sounding notes, end token) when the length budget runs out.
    """

    @abc.abstractmethod
    def allowed(self) -> np.ndarray:
        """Boolean mask of shape (vocab_size,): which ids may come next."""

    @abc.abstractmethod
    def advance(self, token_id: int) -> bool:
        """Consume one id; returns False (and records an error) if it was not allowed."""

    @abc.abstractmethod
    def finished(self) -> bool:
        """True once the end token was consumed (nothing more is allowed)."""

    @abc.abstractmethod
    def completion(self) -> list[int]:
        """Ids that, appended now, complete the sequence validly (ending with the end token)."""

    def bonus(self) -> np.ndarray | None:
        """float32 (vocab_size,): nats the sampler adds to the next id's logits (after the
        temperature), a soft rule beside the mask (the chord control's chord tones); None: none.
        A grammar that wraps another passes the inner one's on if it wants it."""
        return None

    def sampling_mask(self) -> np.ndarray | None:
        """bool (vocab_size,): which of the `allowed()` ids the sampler may draw next, a rule on
        what is written rather than on what is valid (so prompts and scored songs are never
        judged by it: the groove grammar's bound on how long a note sounds); None: all of them.
        A grammar that wraps another passes the inner one's on if it wants it."""
        return None

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(source ids, target ids) pairs: the probability the model puts on a disallowed source
        is what it means for the targets, so the sampler moves it there instead of spreading it
        over every allowed id (the groove grammar's NoteOff of a pitch not sounding: the end of
        a note of that track that is); [] for none. A wrapping grammar passes the inner one's on
        if it wants them."""
        return []

    errors: int = 0  # number of ids advanced that were not allowed
    position: int = -1  # the position in the current bar (-1: none yet), what a control reads

    def place(self, mask: np.ndarray, position: int, token_id: int) -> np.ndarray:
        """`mask` narrowed so that the event `token_id` comes next at `position` of the current
        bar (a control's forced event, e.g. a chord); grammars without such events refuse."""
        raise NotImplementedError(f"{type(self).__name__}: cannot place forced events")


@dataclass(frozen=True)
class TimeTables:
    """Per-id lookups from which a model derives every token's musical time from the ids alone.

    Time is counted in sub-beats (the tokenizer's finest grid) from the sequence's first bar:
    `onset = max(running max of key, 0) + running sum of shift`, where a token's key is
    `(bars so far - 1) * positions_per_bar + position` for a token that sets a position (REMI
    `Bar` sets position 0, `Position_p` sets p) and -1 for any other token (REMI), and `shift` is
    what a token advances time by (groove `TimeShift`). Bar index = onset // positions_per_bar,
    position in the bar = onset % positions_per_bar. See docs/model.md, "Musical position".
    """

    bar: np.ndarray  # (V,) int64: 1 for a token that opens a new bar, else 0
    position: np.ndarray  # (V,) int64: position in the bar the token sets, -1 for none
    shift: np.ndarray  # (V,) int64: sub-beats the token moves time forward by
    positions_per_bar: int
    positions_per_beat: int
    note: np.ndarray | None = None  # (V,) int64: 1 for a token that starts a note, else 0
    # (V,) int64: +1 for Recall_Start, -1 for Recall_End, else 0; the ids from one through the
    # other (a recalled phrase, tokenizers.recall) leave the time as it was
    recall: np.ndarray | None = None

    def onsets(self, ids: np.ndarray) -> np.ndarray:
        """Onset in sub-beats after reading each id (numpy form of the model's parallel rule)."""
        a = np.asarray(ids, dtype=np.int64)  # (..., N)
        keep = np.ones(a.shape, dtype=bool)
        if self.recall is not None:  # a recalled phrase leaves the song's time as it was
            marks = self.recall[a]
            closes = marks < 0
            keep = (np.cumsum(marks > 0, -1) - np.cumsum(closes, -1) + closes) <= 0
        bars = np.cumsum(self.bar[a] * keep, -1)
        pos = self.position[a]
        key = np.where((pos >= 0) & keep, (bars - 1) * self.positions_per_bar + pos, -1)
        song = np.maximum(np.maximum.accumulate(key, -1), 0) + np.cumsum(self.shift[a] * keep, -1)
        if keep.all():
            return song
        # inside a block: the bar the song is in plus the block's own running time
        opens = self.recall[a] > 0
        bars = np.cumsum(self.bar[a] * ~keep, -1)
        bars = bars - np.maximum.accumulate(np.where(opens, bars, 0), -1)
        block = np.cumsum(opens, -1) * (1 << 40)
        key = np.where(~keep & (pos >= 0), bars * self.positions_per_bar + pos + block, -1)
        own = np.maximum(np.maximum.accumulate(key, -1) - block, 0)
        return np.where(keep, song, song - song % self.positions_per_bar + own)


class Tokenizer(abc.ABC):
    """MIDI <-> ids. Subclasses set `name` and register themselves in `musicgen.tokenizers`."""

    name: str = ""
    pad_id: int = PAD_ID
    bos_id: int
    eos_id: int

    @property
    @abc.abstractmethod
    def vocab_size(self) -> int: ...

    @abc.abstractmethod
    def encode(self, src: str | Path | symusic.Score) -> list[int]:
        """A whole piece as ids, starting with `bos_id` and ending with `eos_id`.

        Raises `MusicgenError` naming the file for unreadable input or a piece with no notes.
        """

    @abc.abstractmethod
    def decode(self, ids: list[int] | np.ndarray) -> symusic.Score:
        """Ids (padding, BOS/EOS allowed) to a score. Invalid tokens are skipped, never fatal."""

    def decode_to_midi(self, ids: list[int] | np.ndarray, path: str | Path) -> None:
        from musicgen.io import write_score  # verified; symusic's writer ignores a full disk

        write_score(self.decode(ids), path)

    @abc.abstractmethod
    def token_name(self, token_id: int) -> str: ...

    @abc.abstractmethod
    def token_id(self, name: str) -> int: ...

    def transpose(self, ids: np.ndarray, semitones: int) -> np.ndarray | None:
        """Ids with every pitched note (and chord root) moved; None if a note leaves the range.

        One table lookup over the whole array: the cost of augmentation is not measurable.
        """
        arr = np.asarray(ids)
        if semitones == 0:
            return arr.copy()
        out = self._transpose_table(int(semitones))[arr.astype(np.int64)]
        if np.any(out < 0):
            return None  # a note would leave the range: the dataset redraws the shift
        return out.astype(arr.dtype)

    @abc.abstractmethod
    def _transpose_table(self, semitones: int) -> np.ndarray:
        """(vocab_size,) int64: the id each id becomes when transposed, -1 if out of range."""

    @abc.abstractmethod
    def bar_starts(self, ids: np.ndarray) -> np.ndarray:
        """Indices of the tokens where a bar begins (crops start there)."""

    def bar_counter(self) -> BarCounter:
        """Bar starts of a sequence fed one id at a time (generation's bar limit); tokenizers
        override it with a constant-time update, this default recomputes `bar_starts`."""
        return BarCounter(self)

    @abc.abstractmethod
    def grammar(self) -> Grammar: ...

    def seed_ids(self) -> dict[int, int]:
        """id -> the id whose learned rows a model starts it from when the vocabulary grows
        (train.init_from from a smaller vocabulary); none by default."""
        return {}

    def melody_pitches(self) -> np.ndarray | None:
        """int[vocab]: the MIDI pitch of each id that writes a melody note, -1 elsewhere; None
        for a vocabulary without a melody voice (the default)."""
        return None

    def section_mask(self) -> np.ndarray:
        """bool[vocab]: the ids that open a phrase and a form forces, its label and length
        (none by default)."""
        return np.zeros(self.vocab_size, dtype=bool)

    def phrase_mask(self) -> np.ndarray:
        """bool[vocab]: every id that writes something of a phrase, its density too (what a
        prompt drops to take another form's phrases)."""
        return self.section_mask()

    def section_ids(
        self, label: str, bars: int, where: str = "form", density: int | None = None
    ) -> list[int]:
        """The ids that open a phrase `label` of `bars` bars, with its density level where
        given (tokenizers with section tokens)."""
        from musicgen.errors import MusicgenError

        raise MusicgenError(f"{where}: this model has no section tokens (no form control)")

    def sections(self, ids: list[int] | np.ndarray) -> list:
        """The phrases (tokenizers.form.Section) that `ids` write; none for a tokenizer
        without section tokens."""
        return []

    @abc.abstractmethod
    def time_tables(self) -> TimeTables:
        """The lookups a model uses to know the bar and the position in the bar of every token."""

    @abc.abstractmethod
    def note_end_mask(self) -> np.ndarray:
        """bool[vocab]: ids that complete a note (REMI Duration, groove NoteOff): where the
        evaluation reads the probability put on forbidden tokens "right after a note"."""

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """A JSON-able description that `from_dict` turns back into an identical tokenizer."""

    @classmethod
    @abc.abstractmethod
    def from_dict(cls, data: dict) -> Tokenizer: ...

    def save(self, path: str | Path) -> None:
        """Write `tokenizer.json` atomically."""
        import json

        from musicgen.io import atomic_write_text

        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=1))


class BarCounter:
    """`starts` = bar_starts(ids pushed so far), kept up to date by `push` (generic: recomputed
    over the whole sequence each time; subclasses do it in constant time per id)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tok, self._ids = tokenizer, []
        self.starts: list[int] = []

    def push(self, token_id: int) -> None:
        self._ids.append(int(token_id))
        self.starts = [int(i) for i in self._tok.bar_starts(np.asarray(self._ids, dtype=np.int64))]
