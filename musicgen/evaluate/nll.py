"""`musicgen evaluate nll`: per-position negative log-likelihood, the paper's extrapolation curve.

`per_position_nll` / `seeded_nll` are also the trainer's validation; `evaluate_nll` scores
checkpoints on held-out songs and writes nll.json + nll.png.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from musicgen.device import pick_device
from musicgen.errors import MusicgenError
from musicgen.evaluate.common import write_json
from musicgen.measures.likelihood import (  # noqa: F401  (re-exported)
    SEGMENT,
    noise_seed,
    notes_scored,
    per_position_nll,
    range_mean,
    seeded_nll,
    segment_means,
)
from musicgen.tokenizers.recall import recall_context


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


def model_label(config, path: str | Path) -> str:
    """'sine_spe+gate (run/best.pt)': what the curve of a checkpoint is called on the plot."""
    m = config.model
    gate = "+gate" if m.gated and m.pe in ("sine_spe", "conv_spe") else ""
    p = Path(path)
    return f"{m.pe}{gate} ({p.parent.name}/{p.name})" if p.parent.name else f"{m.pe}{gate}"


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
    from musicgen.evaluate.plots import plot_nll_curves

    if seeds < 1:
        raise MusicgenError(f"seeds: must be at least 1, got {seeds}")
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
    results["paired"] = paired_nll(results["models"])
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
    sums, counts, per_song = _song_by_song(loaded.model, songs, length, crop, dev, seeds, seed,
                                           batch_size, Path(ckpt).name,
                                           recall_context(loaded.tokenizer))  # fmt: skip
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
        "per_song": per_song,
    }


def _song_by_song(
    model,
    songs: list,
    length: int,
    crop: int,
    dev,
    seeds: int,
    seed: int,
    batch_size: int,
    desc,
    context=None,
) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """`seeded_nll` over all songs, and with batch_size 1 each song's mean NLL within and
    beyond the training length (the same noise draws, so the same totals): what a paired
    comparison of two models needs. None per song for batches (their noise is shared)."""
    if batch_size != 1:
        sums, counts = seeded_nll(
            model, songs, length, dev, seeds, seed, batch_size, desc=desc, context=context
        )
        return sums, counts, None
    sums, counts = np.zeros(length, np.float64), np.zeros(length, np.int64)
    per_song: dict[str, list] = {"within": [], "beyond": []}
    for k in tqdm(range(len(songs)), desc=desc, leave=False):
        s, c = seeded_nll(
            model, songs[k : k + 1], length, dev, seeds, seed, first_index=k, context=context
        )
        sums, counts = sums + s, counts + c
        for key, lo, hi in (("within", 0, crop), ("beyond", crop, None)):
            mean = range_mean(s, c, lo, hi)
            per_song[key].append(None if np.isnan(mean) else mean)
    return sums, counts, per_song


def paired_nll(models: dict) -> dict:
    """Per-song differences of each later model's NLL minus the first's, within and beyond the
    training length (`measures.form.paired_difference`: mean, bootstrap CI, whether it excludes
    0); songs too short to reach the range are left out."""
    from musicgen.measures.form import paired_difference

    scored = [(label, r["per_song"]) for label, r in models.items() if r["per_song"]]
    if len(scored) < 2:
        return {}
    (first, base), out = scored[0], {}
    for label, mine in scored[1:]:
        out[f"{label} - {first}"] = {
            key: paired_difference(mine[key], base[key]) for key in ("within", "beyond")
        }
    return out


def _per_note(total_nll: float, notes: int) -> dict:
    return {"notes": notes, "nll_per_note": total_nll / notes if notes else float("nan")}
