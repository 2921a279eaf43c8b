"""Effective segmentation (Perceiver S, docs/perceiver.md): examples that end anywhere in a song.

An example's end is drawn uniformly over the song, so every position that can end a window ends
one equally often and the model sees how pieces begin (an example starting at the song's head is
left-padded), which fixed crops that rarely start at the head do not teach it. The exact window,
padding and target rules are in docs/perceiver.md, "Effective segmentation".
`UniformCropDataset` is the Perceiver AR baseline's sampling: a full window at a uniform start.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from musicgen.data.dataset import IGNORE_INDEX, CropDataset, PreparedSplit, SongDataset
from musicgen.errors import MusicgenError
from musicgen.tokenizers.recall import recall_context


def end_range(length: int, n_queries: int) -> tuple[int, int]:
    """Inclusive range [lo, hi] of window ends e for a song of `length` ids."""
    return min(n_queries + 1, length), length


def uniform_end_range(length: int, context_len: int) -> tuple[int, int]:
    """Inclusive range [lo, hi] of window ends for uniform crops: every window holds m + 1 ids."""
    return min(context_len + 1, length), length


def segment(
    song: np.ndarray, end: int, context_len: int, n_queries: int, pad_id: int = 0
) -> dict[str, torch.Tensor]:
    """The example ending at `end`: input (m,) left-padded, target (n,) with -100 on padding."""
    m, n = context_len, n_queries
    window = np.asarray(song[max(0, end - 1 - m) : end], dtype=np.int64)  # (<= m + 1,)
    k = len(window) - 1  # real input positions
    inp = torch.full((m,), pad_id, dtype=torch.long)  # (m,)
    tgt_all = torch.full((m,), IGNORE_INDEX, dtype=torch.long)  # (m,): target per input position
    if k > 0:
        inp[m - k :] = torch.from_numpy(window[:-1])
        tgt_all[m - k :] = torch.from_numpy(window[1:])
    return {"input": inp, "target": tgt_all[m - n :].clone()}  # target (n,)


class SegmentDataset(SongDataset):
    """Perceiver-S training examples: songs visited as by `CropDataset`, then an end point
    uniform in the song (effective segmentation)."""

    def __init__(
        self,
        split: PreparedSplit,
        context_len: int,
        n_queries: int,
        transpose: tuple[int, int] | list[int] = (0, 0),
        seed: int = 0,
        num_samples: int | None = None,
        drop_instrument_p: float = 0.0,
    ):
        super().__init__(split, transpose, drop_instrument_p, seed, num_samples)
        if not 0 < n_queries <= context_len:
            raise MusicgenError(
                f"model.perceiver: need 0 < n_queries <= context_len, got n_queries={n_queries}, "
                f"context_len={context_len}"
            )
        self.m, self.n = int(context_len), int(n_queries)

    def draw(self, index: int) -> tuple[int, int, np.ndarray, np.random.Generator]:
        """(song index, end, song ids after track dropping, rng for the rest of the item)."""
        rng = self.item_rng(index)
        i = self.song_index(int(index))
        song = np.asarray(self.split[i], dtype=np.int64)
        if self.drop_instrument_p > 0:
            song = np.asarray(
                self.tokenizer.drop_tracks(song, rng, self.drop_instrument_p), dtype=np.int64
            )
        lo, hi = self.ends(len(song))
        end = int(rng.integers(lo, hi + 1)) if hi >= lo else len(song)
        return i, end, song, rng

    def ends(self, length: int) -> tuple[int, int]:
        """Inclusive range of window ends drawn from (effective segmentation: `end_range`)."""
        return end_range(length, self.n)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        _, end, song, rng = self.draw(index)
        window = song[max(0, end - 1 - self.m) : end]  # transpose only what is used
        window = self.transposed(window, rng)
        return segment(window, len(window), self.m, self.n, self.tokenizer.pad_id)


class UniformCropDataset(SegmentDataset):
    """Perceiver AR's training examples: windows of m + 1 ids at a uniform random start."""

    def ends(self, length: int) -> tuple[int, int]:
        return uniform_end_range(length, self.m)


def make_train_dataset(cfg, split: PreparedSplit, num_samples: int) -> Dataset:
    """The training dataset the model head needs: fixed crops ('lm'), or for 'perceiver_s'
    segments (`perceiver.segmentation: effective`) or uniform crops (`uniform`)."""
    if cfg.model.head == "perceiver_s":
        if recall_context(split.tokenizer) is not None:
            raise MusicgenError(
                f"{split.path}: a vocabulary with recall marks trains an 'lm' head only "
                "(Perceiver-S segments do not place recalled phrases)"
            )
        p = cfg.model.perceiver
        cls = UniformCropDataset if p.segmentation == "uniform" else SegmentDataset
        return cls(
            split,
            p.context_len,
            p.n_queries,
            transpose=tuple(cfg.data.transpose),
            seed=cfg.train.seed,
            num_samples=num_samples,
            drop_instrument_p=cfg.data.drop_instrument_p,
        )
    return CropDataset(
        split,
        cfg.data.crop_len,
        transpose=tuple(cfg.data.transpose),
        drop_instrument_p=cfg.data.drop_instrument_p,
        random_start_bar=cfg.data.random_start_bar,
        seed=cfg.train.seed,
        num_samples=num_samples,
        start_bar_every=cfg.data.start_bar_every,
        start_at_sections=cfg.data.start_at_sections,
    )
