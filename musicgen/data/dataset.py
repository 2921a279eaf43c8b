"""Reading a prepared dataset: whole songs (`PreparedSplit`) and training crops (`CropDataset`).

Tokens stay memory-mapped (many DataLoader workers share one page cache). Every random choice of
a crop is drawn from a generator seeded by (seed, epoch, index), so a batch is the same whatever
the number of DataLoader workers; the song order is reshuffled for every pass over the songs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from musicgen.data import layout
from musicgen.errors import MusicgenError
from musicgen.tokenizers import Tokenizer, load_tokenizer
from musicgen.tokenizers.recall import recall_context

IGNORE_INDEX = -100  # target value the loss skips (padding)
TRANSPOSE_TRIES = 5  # redraws when a shift pushes a note out of range, then no shift


class PreparedSplit:
    """One split of a folder written by `musicgen prepare`; `[i]` is song i's ids (uint16 view)."""

    def __init__(self, path: str | Path, split: str):
        self.path = Path(path)
        self.split = split
        if not (self.path / "tokenizer.json").is_file():
            raise MusicgenError(f"{self.path}: not a prepared dataset (no tokenizer.json)")
        if not (self.path / split / "tokens.npy").is_file():
            raise MusicgenError(f"{self.path}: split '{split}' not found (no {split}/tokens.npy)")
        if not (self.path / split / "offsets.npy").is_file():
            raise MusicgenError(f"{self.path}: split '{split}' not found (no {split}/offsets.npy)")
        # the tokenizer and the arrays must come from one prepare run (layout.STAMP)
        rels = ["tokenizer.json", f"{split}/tokens.npy", f"{split}/offsets.npy"]
        layout.check_files(self.path, rels)
        self.tokens, self.offsets = layout.load_arrays(self.path, split)  # (T,), (n_songs + 1,)
        self._tokenizer: Tokenizer | None = None

    @property
    def tokenizer(self) -> Tokenizer:
        """The dataset's tokenizer; every stored id must be inside its vocabulary."""
        if self._tokenizer is None:
            tok = load_tokenizer(self.path / "tokenizer.json")
            top = int(self.tokens.max()) if len(self.tokens) else 0
            if top >= tok.vocab_size:
                raise MusicgenError(
                    f"{self.path / self.split / 'tokens.npy'}: holds id {top}, outside the "
                    f"{tok.vocab_size} ids of {self.path / 'tokenizer.json'}"
                )
            self._tokenizer = tok
        return self._tokenizer

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        if not -len(self) <= i < len(self):
            raise IndexError(f"song {i} out of range ({len(self)} songs)")
        i = i % len(self)
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]


def load_songs(path: str | Path, split: str, max_songs: int | None = None) -> list[np.ndarray]:
    """The first `max_songs` songs of a split as int64 arrays (for validation)."""
    ps = PreparedSplit(path, split)
    n = len(ps) if max_songs is None else min(max_songs, len(ps))
    return [np.asarray(ps[i], dtype=np.int64) for i in range(n)]


class SongDataset(Dataset):
    """What every training dataset shares: which song item `index` uses, its RNG, transposition.

    Item `index` depends only on (seed, epoch offset, index), so results do not depend on the
    number of DataLoader workers and a resumed run sees the same items. Indices run through the
    songs in passes: index i belongs to pass `epoch + i // n_songs`, and each pass visits every
    song once in its own random order, so a long run (num_samples >> n_songs) is reshuffled every
    epoch while each item stays a pure function of its index (hence of the training step).
    """

    def __init__(
        self,
        split: PreparedSplit,
        transpose: tuple[int, int] | list[int] = (0, 0),
        drop_instrument_p: float = 0.0,
        seed: int = 0,
        num_samples: int | None = None,
    ):
        if len(split) == 0:
            raise MusicgenError(f"{split.path}: split '{split.split}' has no songs")
        lo, hi = (int(x) for x in transpose)
        if lo > hi:
            raise MusicgenError(f"transpose range [{lo}, {hi}] is empty")
        self.split, self.lo, self.hi = split, lo, hi
        self.drop_instrument_p = float(drop_instrument_p)
        self.seed = int(seed)
        self.num_samples = len(split) if num_samples is None else int(num_samples)
        self.tokenizer = split.tokenizer
        if self.drop_instrument_p > 0 and not hasattr(self.tokenizer, "drop_tracks"):
            raise MusicgenError(
                f"data.drop_instrument_p: {self.drop_instrument_p} needs a multi-track "
                f"tokenizer (groove); {split.path} was prepared with '{self.tokenizer.name}'"
            )
        self.epoch = 0  # offset added to every item's pass (`set_epoch`, torch's convention)
        self._perms: dict[int, np.ndarray] = {}

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_samples

    def pass_of(self, index: int) -> int:
        """The pass over the songs (epoch) that item `index` belongs to."""
        return self.epoch + int(index) // len(self.split)

    def song_index(self, index: int) -> int:
        n, e = len(self.split), self.pass_of(index)
        if e not in self._perms:
            if len(self._perms) >= 2:  # sequential reads need this pass and the next one
                self._perms.pop(min(self._perms))
            self._perms[e] = np.random.default_rng([self.seed, e, 2**31]).permutation(n)
        return int(self._perms[e][int(index) % n])

    def item_rng(self, index: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, int(index)])

    def transposed(self, chunk: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A uniform shift in [lo, hi]; redrawn when a note would leave the range, then 0."""
        if (self.lo, self.hi) == (0, 0):
            return chunk
        for _ in range(TRANSPOSE_TRIES):
            k = int(rng.integers(self.lo, self.hi + 1))
            out = self.tokenizer.transpose(chunk, k)
            if out is not None:
                return np.asarray(out, dtype=np.int64)
        return chunk


class CropDataset(SongDataset):
    """Fixed-length training crops: a song, a start at a bar, a random transposition.

    With `start_bar_every` k > 1 a crop starts only on bars whose index in the song is a multiple
    of k, so a model's bar-mod-phrase embedding (counted from the crop's first bar) agrees with
    the song's own bar count mod k, as it does when a song is scored or generated from its head.
    With `start_at_sections` a song that has section tokens starts its crops where a phrase
    starts (its Section token in the crop, the bar count from the phrase's first bar). With
    recall marks in the vocabulary, a crop is cut from the song's context (`tokenizers.recall`:
    returning phrases preceded by their last telling, remembered from the whole song) and the
    recalled ids are never targets.
    """

    def __init__(
        self,
        split: PreparedSplit,
        crop_len: int,
        transpose: tuple[int, int] | list[int] = (0, 0),
        drop_instrument_p: float = 0.0,
        random_start_bar: bool = True,
        seed: int = 0,
        num_samples: int | None = None,
        start_bar_every: int = 1,
        start_at_sections: bool = False,
    ):
        super().__init__(split, transpose, drop_instrument_p, seed, num_samples)
        if crop_len < 1:
            raise MusicgenError(f"crop_len must be positive, got {crop_len}")
        if start_bar_every < 1:
            raise MusicgenError(f"start_bar_every must be at least 1, got {start_bar_every}")
        self.crop_len = int(crop_len)
        self.random_start_bar = random_start_bar
        self.start_bar_every = int(start_bar_every)
        self.start_at_sections = start_at_sections
        self.context = recall_context(self.tokenizer)  # None without recall marks

    def _crop_bars(self, song: np.ndarray) -> np.ndarray:
        """Where crops of `song` may start: its phrases' bars, or every k-th bar."""
        bars = self.tokenizer.bar_starts(song)
        if self.start_at_sections:
            phrase_bars = [s.bar for s in self.tokenizer.sections(song) if s.bar < len(bars)]
            if phrase_bars:
                return bars[phrase_bars]
        return bars[:: self.start_bar_every]  # bars 0, k, 2k, ...

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        rng = self.item_rng(index)
        song = np.asarray(self.split[self.song_index(int(index))], dtype=np.int64)
        n_take = self.crop_len + 1  # input and its one-step-shifted target
        start = 0
        if self.random_start_bar:
            bars = self._crop_bars(song)
            starts = np.concatenate([[0], bars[bars <= len(song) - n_take]])
            start = int(starts[rng.integers(len(starts))])
        said = None  # bool per id of the chunk: the song's own (False: recalled context)
        if self.drop_instrument_p > 0:
            chunk = np.asarray(
                self.tokenizer.drop_tracks(song[start:], rng, self.drop_instrument_p)
            )
            chunk = chunk[:n_take]
        elif self.context is not None:  # recall blocks from the whole song's phrases
            ctx, is_song = self.context(song)
            at = int(np.flatnonzero(is_song)[start]) if len(song) else 0
            chunk, said = ctx[at : at + n_take], is_song[at : at + n_take]
        else:
            chunk = song[start : start + n_take]
        chunk = self.transposed(chunk, rng)
        n = len(chunk) - 1
        inp = torch.full((self.crop_len,), self.tokenizer.pad_id, dtype=torch.long)  # (L,)
        tgt = torch.full((self.crop_len,), IGNORE_INDEX, dtype=torch.long)  # (L,)
        if n > 0:
            inp[:n] = torch.from_numpy(np.ascontiguousarray(chunk[:-1], dtype=np.int64))
            tgt[:n] = torch.from_numpy(np.ascontiguousarray(chunk[1:], dtype=np.int64))
            if said is not None:  # the model never learns to write a recalled phrase
                tgt[:n][torch.from_numpy(~said[1:])] = IGNORE_INDEX
        return {"input": inp, "target": tgt}
