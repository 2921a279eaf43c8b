"""`musicgen evaluate nll`: per-position negative log-likelihood, the paper's extrapolation curve.

`per_position_nll` / `seeded_nll` are also the trainer's validation; `evaluate_nll` scores
checkpoints on held-out songs and writes nll.json + nll.png.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from musicgen.device import pick_device
from musicgen.errors import MusicgenError
from musicgen.evaluate.common import write_json
from musicgen.metrics import notes_from_score

SEGMENT = 128  # tokens per point of the per-position curves (the paper's figure)


@torch.no_grad()
def per_position_nll(
    model: torch.nn.Module,
    songs: Sequence[Sequence[int] | np.ndarray],
    max_len: int,
    device: torch.device | str,
    batch_size: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Summed NLL (nats) and count of predicted tokens at each position 0..max_len-1.

    Position p is the prediction of token p + 1 of a song from tokens 0..p, with the whole song
    (up to max_len + 1 tokens) in one forward pass, so positions past the training length test
    extrapolation. Songs in a batch are right-padded (causal: padding never changes earlier
    positions) and padded targets are ignored. Models with a `score(ids)` method (Perceiver-S,
    whose forward holds one window) are scored through it. The model is put in eval mode and
    restored.
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
            n = max(len(s) for s in chunk) - 1
            inp = torch.zeros(len(chunk), n, dtype=torch.long)  # [B, N], 0 = pad
            tgt = torch.full((len(chunk), n), -100, dtype=torch.long)  # [B, N]
            for i, s in enumerate(chunk):
                t = torch.from_numpy(s)
                inp[i, : len(s) - 1] = t[:-1]
                tgt[i, : len(s) - 1] = t[1:]
            inp, tgt = inp.to(device), tgt.to(device)
            # a Perceiver-S forward holds one window; its score() slides windows over a song
            scorer = getattr(model, "score", None) or model
            logits = scorer(inp).float()  # [B, N, V]
            nll = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")  # [B, N]
            valid = tgt != -100
            sums[:n] += (nll * valid).sum(0).double().cpu().numpy()
            counts[:n] += valid.sum(0).cpu().numpy()
    finally:
        model.train(was_training)
    return sums, counts


def draw_seed(seed: int, draw: int, song: int) -> int:
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
) -> tuple[np.ndarray, np.ndarray]:
    """`per_position_nll` averaged over `seeds` SPE noise draws, each a pure function of (seed,
    draw, song index): sums (nats, mean over draws) and counts of one draw per position.

    Song k of `songs` has index `first_index + k * step` (a rank's shard songs[r::world] passes
    first_index=r, step=world), so a song gets the same noise however songs are split over ranks
    (a batch shares the draw of its first song: batch_size 1 makes every song's noise its own),
    and the caller's RNG is left as it was: validation neither consumes nor depends on
    the training RNG, and best.pt is not picked on one noise draw. `desc`: show a progress bar.
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
                torch.manual_seed(draw_seed(seed, d, first_index + b * step))
                s, c = per_position_nll(
                    model, songs[b : b + batch_size], max_len, device, batch_size
                )
                sums += s
                if d == 0:
                    counts += c
    return sums / seeds, counts


def forbidden_masks(tokenizer, song: np.ndarray) -> np.ndarray:
    """bool (N - 1, V): which ids the grammar forbids after each prefix song[: p + 1]."""
    g = tokenizer.grammar()
    out = np.empty((len(song) - 1, tokenizer.vocab_size), dtype=bool)
    for p, t in enumerate(song[:-1].tolist()):
        g.advance(t)
        out[p] = ~g.allowed()
    return out


@torch.no_grad()
def forbidden_mass(
    model: torch.nn.Module,
    tokenizer,
    songs: Sequence[Sequence[int] | np.ndarray],
    max_len: int,
    device: torch.device | str,
) -> dict:
    """Mean probability the model puts on grammar-forbidden next tokens, over every predicted
    position of real songs (`overall`) and over those right after a note (`after_note`: the
    previous token completes a note, `tokenizer.note_end_mask()`), the latter also split by the
    kind of token it falls on (`after_note_by_kind`: the name before "_", e.g. REMI Position for
    a position behind the current one, Pitch for one already played there). The sampler's mask
    hides this mass, but it shows a model that does not know where it is."""
    device = torch.device(device)
    note_end = tokenizer.note_end_mask()
    sums, counts = np.zeros(2), np.zeros(2, np.int64)  # [overall, after a note]
    kinds = [tokenizer.token_name(i).split("_")[0] for i in range(tokenizer.vocab_size)]
    names = sorted(set(kinds))
    kind_of = np.zeros((tokenizer.vocab_size, len(names)))  # (V, K) one-hot
    kind_of[np.arange(tokenizer.vocab_size), [names.index(k) for k in kinds]] = 1.0
    by_kind = np.zeros(len(names))
    was_training = model.training
    model.eval()
    try:
        for song in songs:
            s = np.asarray(song, dtype=np.int64)[: max_len + 1]
            if len(s) < 2:
                continue
            scorer = getattr(model, "score", None) or model
            logits = scorer(torch.from_numpy(s[:-1])[None].to(device)).float()[0]  # [N, V]
            probs = torch.softmax(logits, -1).cpu().numpy()
            forbidden = probs * forbidden_masks(tokenizer, s)  # [N, V]
            mass = forbidden.sum(-1)  # [N]
            after = note_end[s[:-1]]
            sums += [mass.sum(), mass[after].sum()]
            by_kind += (forbidden[after] @ kind_of).sum(0)  # [K]
            counts += [len(mass), int(after.sum())]
    finally:
        model.train(was_training)
    mean = [float(x / c) if c else float("nan") for x, c in zip(sums, counts, strict=True)]
    kind_means = by_kind / counts[1] if counts[1] else by_kind * float("nan")
    return {
        "overall": mean[0],
        "after_note": mean[1],
        "after_note_by_kind": {n: float(m) for n, m in zip(names, kind_means, strict=True) if m},
        "positions": int(counts[0]),
        "after_note_positions": int(counts[1]),
    }


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


def model_label(config, path: str | Path) -> str:
    """'sine_spe+gate (run/best.pt)': what the curve of a checkpoint is called on the plot."""
    m = config.model
    gate = "+gate" if m.gated and m.pe in ("sine_spe", "conv_spe") else ""
    p = Path(path)
    return f"{m.pe}{gate} ({p.parent.name}/{p.name})" if p.parent.name else f"{m.pe}{gate}"


def notes_scored(tokenizer, songs: Sequence[np.ndarray], max_len: int) -> int:
    """Notes in the scored part of each song (its first max_len + 1 tokens), read by decoding:
    the denominator of NLL per note, which is comparable across tokenizations."""
    return sum(len(notes_from_score(tokenizer.decode(np.asarray(s)[: max_len + 1]))) for s in songs)


def load_eval_songs(data: str | Path, split: str, max_songs: int | None):
    """(songs, tokenizer) of one split, or of train + validation + test for `split='all'`."""
    from musicgen.data.dataset import PreparedSplit
    from musicgen.data.prepare import SPLITS

    names = [split]
    if split == "all":  # the splits the folder has (prepare writes all three)
        names = [s for s in SPLITS if (Path(data) / s / "tokens.npy").is_file()] or [SPLITS[0]]
    parts = [PreparedSplit(data, s) for s in names]
    songs = [np.asarray(p[i]) for p in parts for i in range(len(p))][:max_songs]
    if not songs:
        raise MusicgenError(f"{data}: split '{split}' holds no songs")
    return songs, parts[0].tokenizer


def evaluate_nll(
    checkpoints: Sequence[str | Path],
    data: str | Path,
    out: str | Path,
    split: str = "validation",
    max_len: int | None = None,
    max_songs: int | None = None,
    device: str = "auto",
    segment: int = SEGMENT,
    batch_size: int = 1,
    seed: int = 0,
    seeds: int = 1,
) -> dict:
    """Per-position NLL (and forbidden mass) of each checkpoint on the same held-out songs;
    nll.json + nll.png.

    `split='all'` scores every song of the folder. `seed` fixes the SPE noise draws and `seeds`
    averages that many per song (`seeded_nll`, the trainer's validation too), so a rerun gives
    the same numbers.
    """
    from musicgen.plots import plot_nll_curves

    if seeds < 1:
        raise MusicgenError(f"--seeds: must be at least 1, got {seeds}")
    dev = pick_device(device)
    songs, data_tokenizer = load_eval_songs(data, split, max_songs)
    n_songs = len(songs)
    results: dict = {
        "data": str(data),
        "split": split,
        "songs": n_songs,
        "segment": segment,
        "seeds": seeds,
        "models": {},
    }
    curves = {}
    train_len = None
    for ckpt in checkpoints:
        label, res = _score_checkpoint(
            ckpt, songs, data_tokenizer, data, max_len, dev, segment, batch_size, seed, seeds
        )
        results["models"][label] = res
        curves[label] = res["per_segment"]
        train_len = train_len or res["crop_len"]
    out = Path(out)
    write_json(out / "nll.json", results)
    plot_nll_curves(curves, segment, train_len, out / "nll.png")
    return results


def _score_checkpoint(
    ckpt: str | Path,
    songs: list,
    data_tokenizer,
    data: str | Path,
    max_len: int | None,
    dev: torch.device,
    segment: int,
    batch_size: int,
    seed: int,
    seeds: int,
) -> tuple[str, dict]:
    """One checkpoint's entry of nll.json: its label and every number `evaluate_nll` reports."""
    from musicgen.checkpoint import load_checkpoint

    loaded = load_checkpoint(ckpt, device=dev)
    if loaded.tokenizer.to_dict() != data_tokenizer.to_dict():
        raise MusicgenError(f"{ckpt}: its tokenizer differs from the one {data} was prepared with")
    crop = loaded.config.data.crop_len
    length = max_len or 2 * crop
    sums, counts = seeded_nll(
        loaded.model, songs, length, dev, seeds, seed, batch_size, desc=Path(ckpt).name
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        forbidden = forbidden_mass(loaded.model, loaded.tokenizer, songs, length, dev)
    return model_label(loaded.config, ckpt), {
        "checkpoint": str(ckpt),
        "pe": loaded.config.model.pe,
        "crop_len": crop,
        "max_len": length,
        "mean_within": range_mean(sums, counts, 0, crop),
        "mean_beyond": range_mean(sums, counts, crop),
        "per_segment": segment_means(sums, counts, segment),
        **_per_note(float(sums.sum()), notes_scored(data_tokenizer, songs, length)),
        "tokens_per_segment": [
            int(counts[s : s + segment].sum()) for s in range(0, length, segment)
        ],
        "forbidden_mass": forbidden,
    }


def _per_note(total_nll: float, notes: int) -> dict:
    return {"notes": notes, "nll_per_note": total_nll / notes if notes else float("nan")}
