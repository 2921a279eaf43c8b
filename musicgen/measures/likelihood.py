"""Likelihood of songs under a model: the per-position NLL that training validates with,
`evaluate nll` plots and `Model.score` reports. Below training, the API and evaluation, which all
import it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.measures.metrics import notes_from_score
from musicgen.tokenizers.recall import Context

SEGMENT = 128  # tokens per point of the per-position curves (the paper's figure)


@torch.no_grad()
def per_position_nll(
    model: torch.nn.Module,
    songs: Sequence[Sequence[int] | np.ndarray],
    max_len: int,
    device: torch.device | str,
    batch_size: int = 1,
    context: Context | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Summed NLL (nats) and count of predicted tokens at each position 0..max_len-1.

    Position p is the prediction of token p + 1 of a song from tokens 0..p, with the whole song
    (up to max_len + 1 tokens) in one forward pass, so positions past the training length test
    extrapolation. Songs in a batch are right-padded (causal: padding never changes earlier
    positions) and padded targets are ignored. Models with a `score(ids)` method (Perceiver-S,
    whose forward holds one window) are scored through it. The model is put in eval mode and
    restored. With `context` (`tokenizers.recall`) a song is scored inside its context (the
    recalled phrases in place) and position p is still the song's own token p + 1.
    """
    device = torch.device(device)
    sums = np.zeros(max_len, np.float64)
    counts = np.zeros(max_len, np.int64)
    was_training = model.training
    model.eval()
    try:
        order = [np.asarray(s, dtype=np.int64)[: max_len + 1] for s in songs]
        order = [s for s in order if len(s) >= 2]
        for b in range(0, len(order), batch_size):
            chunk = order[b : b + batch_size]
            views = [context(s) if context else (s, np.ones(len(s), bool)) for s in chunk]
            n = max(len(seq) for seq, _ in views) - 1
            inp = torch.zeros(len(chunk), n, dtype=torch.long)  # [B, N], 0 = pad
            tgt = torch.full((len(chunk), n), -100, dtype=torch.long)  # [B, N]
            for i, (seq, said) in enumerate(views):
                t = torch.from_numpy(seq)
                inp[i, : len(seq) - 1] = t[:-1]
                tgt[i, : len(seq) - 1] = torch.where(torch.from_numpy(said[1:]), t[1:], -100)
            inp, tgt = inp.to(device), tgt.to(device)
            # a Perceiver-S forward holds one window; its score() slides windows over a song
            scorer = getattr(model, "score", None) or model
            logits = scorer(inp).float()  # [B, N, V]
            nll = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none").cpu()  # [B, N]
            for i, (_seq, said) in enumerate(views):  # back to the song's own positions
                own = torch.from_numpy(np.flatnonzero(said[1:]))  # [len(song) - 1]
                sums[: len(own)] += nll[i, own].double().numpy()
                counts[: len(own)] += 1
    finally:
        model.train(was_training)
    return sums, counts


def noise_seed(seed: int, draw: int, song: int) -> int:
    """The torch seed of SPE draw `draw` for song `song`: independent of batching and ranks."""
    return int(np.random.SeedSequence([seed, draw, song]).generate_state(1, np.uint64)[0] >> 1)


def seeded_nll(
    model: torch.nn.Module,
    songs: Sequence[Sequence[int] | np.ndarray],
    max_len: int,
    device: torch.device | str,
    seeds: int = 1,
    seed: int = 0,
    batch_size: int = 1,
    first_index: int = 0,
    step: int = 1,
    desc: str | None = None,
    context: Context | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """`per_position_nll` averaged over `seeds` SPE noise draws, each a pure function of (seed,
    draw, song index): sums (nats, mean over draws) and counts of one draw per position.

    Song k of `songs` has index `first_index + k * step` (a rank's shard songs[r::world] passes
    first_index=r, step=world), so a song gets the same noise however songs are split over ranks
    (a batch shares the draw of its first song: batch_size 1 makes every song's noise its own),
    and the caller's RNG is left as it was: validation neither consumes nor depends on
    the training RNG, and best.pt is not picked on one noise draw. `desc`: show a progress bar;
    `context`: as in `per_position_nll`.
    """
    if seeds < 1:
        raise MusicgenError(f"seeds: need at least one SPE draw, got {seeds}")
    device = torch.device(device)
    sums = np.zeros(max_len, np.float64)
    counts = np.zeros(max_len, np.int64)
    forked = [device] if device.type == "cuda" else []
    starts = range(0, len(songs), batch_size)
    bar = tqdm(total=seeds * len(starts), desc=desc, leave=False, disable=desc is None)
    with bar, torch.random.fork_rng(devices=forked, device_type=device.type):
        for d in range(seeds):
            for b in starts:
                bar.update(1)
                torch.manual_seed(noise_seed(seed, d, first_index + b * step))
                s, c = per_position_nll(
                    model, songs[b : b + batch_size], max_len, device, batch_size, context
                )
                sums += s
                if d == 0:
                    counts += c
    return sums / seeds, counts


def segment_means(sums: np.ndarray, counts: np.ndarray, segment: int = SEGMENT) -> list[float]:
    """Mean NLL of each block of `segment` positions (NaN for a block no song reaches)."""
    out = []
    for s in range(math.ceil(len(sums) / segment)):
        c = counts[s * segment : (s + 1) * segment].sum()
        out.append(float(sums[s * segment : (s + 1) * segment].sum() / c) if c else float("nan"))
    return out


def range_mean(sums: np.ndarray, counts: np.ndarray, lo: int, hi: int | None = None) -> float:
    c = counts[lo:hi].sum()
    return float(sums[lo:hi].sum() / c) if c else float("nan")


def notes_scored(tokenizer, songs: Sequence[np.ndarray], max_len: int) -> int:
    """Notes in the scored part of each song (its first max_len + 1 tokens), read by decoding:
    the denominator of NLL per note, which is comparable across tokenizations."""
    return sum(len(notes_from_score(tokenizer.decode(np.asarray(s)[: max_len + 1]))) for s in songs)
