"""The evaluations of `musicgen evaluate`: per-position NLL, style continuation, music statistics.

Each task writes `<task>.json` (every number, JSON-safe: NaN becomes null) and `<task>.png` into the
output folder. `per_position_nll` is also the trainer's validation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from musicgen.device import pick_device
from musicgen.errors import MusicgenError
from musicgen.io import atomic_write_text, write_score
from musicgen.metrics import (
    BAR_BEATS,
    STATISTICS,
    Notes,
    grammar_error_rate,
    load_notes,
    music_statistics,
    notes_from_score,
    style_similarity_per_track,
    summarize,
)
from musicgen.prompt import merge, music_prompt

SEGMENT = 128  # tokens per point of the per-position curves (the paper's figure)
N_STYLE_SEGMENTS = 4
MIDI_SUFFIXES = (".mid", ".midi")


def jsonable(x):
    """Numbers, lists and dicts with NaN/inf replaced by None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def write_json(path: Path, data: dict) -> Path:
    atomic_write_text(path, json.dumps(jsonable(data), indent=1) + "\n")
    return path


def midi_files(folder: str | Path) -> list[Path]:
    """MIDI files under `folder` (recursively, sorted); an empty or missing folder is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MusicgenError(f"{folder}: not a folder")
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in MIDI_SUFFIXES)
    if not files:
        raise MusicgenError(f"{folder}: no .mid/.midi files found")
    return files


# ---------------------------------------------------------------------------------------------
# per-position negative log-likelihood


@torch.no_grad()
def per_position_nll(
    model: torch.nn.Module, songs: Sequence[Sequence[int] | np.ndarray], max_len: int,
    device: torch.device | str, batch_size: int = 1,
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
            chunk = order[b: b + batch_size]
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
    model: torch.nn.Module, songs: Sequence[Sequence[int] | np.ndarray], max_len: int,
    device: torch.device | str, seeds: int = 1, seed: int = 0, batch_size: int = 1,
    first_index: int = 0, step: int = 1, desc: str | None = None,
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
                s, c = per_position_nll(model, songs[b: b + batch_size], max_len, device,
                                        batch_size)
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
    model: torch.nn.Module, tokenizer, songs: Sequence[Sequence[int] | np.ndarray], max_len: int,
    device: torch.device | str,
) -> dict:
    """Mean probability the model puts on grammar-forbidden next tokens, over every predicted
    position of real songs (`overall`) and over those right after a note (`after_note`: the
    previous token completes a note, `tokenizer.note_end_mask()`). The sampler's mask hides this
    mass, but it shows a model that does not know where it is (e.g. a Position behind it)."""
    device = torch.device(device)
    note_end = tokenizer.note_end_mask()
    sums, counts = np.zeros(2), np.zeros(2, np.int64)  # [overall, after a note]
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
            mass = (probs * forbidden_masks(tokenizer, s)).sum(-1)  # [N]
            after = note_end[s[:-1]]
            sums += [mass.sum(), mass[after].sum()]
            counts += [len(mass), int(after.sum())]
    finally:
        model.train(was_training)
    mean = [float(x / c) if c else float("nan") for x, c in zip(sums, counts, strict=True)]
    return {"overall": mean[0], "after_note": mean[1], "positions": int(counts[0]),
            "after_note_positions": int(counts[1])}


def segment_means(sums: np.ndarray, counts: np.ndarray, segment: int = SEGMENT) -> list[float]:
    """Mean NLL of each block of `segment` positions (NaN for a block no song reaches)."""
    out = []
    for s in range(math.ceil(len(sums) / segment)):
        c = counts[s * segment: (s + 1) * segment].sum()
        out.append(float(sums[s * segment: (s + 1) * segment].sum() / c) if c else float("nan"))
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
    return sum(len(notes_from_score(tokenizer.decode(np.asarray(s)[: max_len + 1])))
               for s in songs)


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
    checkpoints: Sequence[str | Path], data: str | Path, out: str | Path, split: str = "validation",
    max_len: int | None = None, max_songs: int | None = None, device: str = "auto",
    segment: int = SEGMENT, batch_size: int = 1, seed: int = 0, seeds: int = 1,
) -> dict:
    """Per-position NLL (and forbidden mass) of each checkpoint on the same held-out songs;
    nll.json + nll.png.

    `split='all'` scores every song of the folder. `seed` fixes the SPE noise draws and `seeds`
    averages that many per song (`seeded_nll`, the trainer's validation too), so a rerun gives
    the same numbers.
    """
    from musicgen.checkpoint import load_checkpoint
    from musicgen.plots import plot_nll_curves

    if seeds < 1:
        raise MusicgenError(f"--seeds: must be at least 1, got {seeds}")
    dev = pick_device(device)
    songs, data_tokenizer = load_eval_songs(data, split, max_songs)
    n_songs = len(songs)
    data_tok = data_tokenizer.to_dict()
    results: dict = {"data": str(data), "split": split, "songs": n_songs, "segment": segment,
                     "seeds": seeds, "models": {}}
    curves = {}
    train_len = None
    for ckpt in checkpoints:
        loaded = load_checkpoint(ckpt, device=dev)
        if loaded.tokenizer.to_dict() != data_tok:
            raise MusicgenError(f"{ckpt}: its tokenizer differs from the one {data} was prepared "
                                "with")
        crop = loaded.config.data.crop_len
        length = max_len or 2 * crop
        sums, counts = seeded_nll(loaded.model, songs, length, dev, seeds, seed, batch_size,
                                  desc=Path(ckpt).name)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            forbidden = forbidden_mass(loaded.model, loaded.tokenizer, songs, length, dev)
        label = model_label(loaded.config, ckpt)
        curves[label] = segment_means(sums, counts, segment)
        train_len = train_len or crop
        results["models"][label] = {
            "checkpoint": str(ckpt), "pe": loaded.config.model.pe, "crop_len": crop,
            "max_len": length, "mean_within": range_mean(sums, counts, 0, crop),
            "mean_beyond": range_mean(sums, counts, crop), "per_segment": curves[label],
            **_per_note(float(sums.sum()), notes_scored(data_tokenizer, songs, length)),
            "tokens_per_segment": [int(counts[s: s + segment].sum())
                                   for s in range(0, length, segment)],
            "forbidden_mass": forbidden,
        }
        del loaded
    out = Path(out)
    write_json(out / "nll.json", results)
    plot_nll_curves(curves, segment, train_len, out / "nll.png")
    return results


def _per_note(total_nll: float, notes: int) -> dict:
    return {"notes": notes, "nll_per_note": total_nll / notes if notes else float("nan")}


# ---------------------------------------------------------------------------------------------
# style continuation (the groove experiment)


def split_by_time(notes: Notes, start: float, n: int = N_STYLE_SEGMENTS) -> list[Notes]:
    """Notes with onset >= start, cut into n equal time spans up to the last onset."""
    cont = notes.select(notes.onset >= start)
    if len(cont) == 0:
        return [cont] * n
    edges = np.linspace(start, float(cont.onset.max()), n + 1)  # the last onset joins span n
    idx = np.clip(np.searchsorted(edges, cont.onset, side="right") - 1, 0, n - 1)
    return [cont.select(idx == k) for k in range(n)]


def make_prompt(tokenizer, ids: list[int], bars: int) -> list[int] | None:
    """The ids `evaluate style` feeds: the first `bars` bars that hold music, built by
    `musicgen.prompt` like every prompt; None if the song is too short."""
    prompt = music_prompt(tokenizer, ids, bars)
    return prompt.ids if prompt is not None else None


def true_continuation(tokenizer, ids: list[int], prompt: list[int], max_tokens: int) -> list[int]:
    """The prompt followed by what really followed it in the source, within the same budget:
    the reference a sampled continuation is compared with."""
    body = list(prompt[1:])
    for s in tokenizer.bar_starts(np.asarray(ids, dtype=np.int64)):
        e = int(s) + len(body)
        if list(ids[s:e]) == body:
            return list(prompt) + list(ids[e: e + max(max_tokens - len(prompt), 0)])
    return list(prompt)


def evaluate_style(
    checkpoint: str | Path, prompts: str | Path, out: str | Path, bars: int = 2,
    max_tokens: int = 1024, samples: int = 3, temperature: float | None = None,
    top_p: float | None = None, seed: int = 0, device: str = "auto", max_prompts: int | None = None,
) -> dict:
    """Continue `bars` bars of every prompt song; score 4 time segments against the whole song.

    Similarities are computed per track role and averaged over the roles the source has. The
    continuations are written to out/samples/ as MIDI.
    """
    from musicgen.checkpoint import load_checkpoint
    from musicgen.plots import plot_style_boxes
    from musicgen.sample import default_options, generate

    dev = pick_device(device)
    loaded = load_checkpoint(checkpoint, device=dev)
    tok = loaded.tokenizer
    options = default_options(tok.name)
    if temperature is not None:
        options.temperature = temperature
    if top_p is not None:
        options.top_p = top_p
    files = midi_files(prompts)[:max_prompts]
    torch.manual_seed(seed)  # the SPE noise of each batch comes from the global generator
    gen = torch.Generator(device=dev).manual_seed(seed) if dev.type != "mps" else None
    out = Path(out)
    metrics = ("time_pitch", "onset_duration")
    scores = {m: [[] for _ in range(N_STYLE_SEGMENTS)] for m in metrics}
    reference = {m: [[] for _ in range(N_STYLE_SEGMENTS)] for m in metrics}
    songs, skipped = [], []
    sources: list[Notes] = []
    truths: list[Notes] = []  # the real continuations, also the other-song baseline
    for path in tqdm(files, desc="style"):
        try:
            ids = tok.encode(path)
        except MusicgenError as exc:
            skipped.append({"path": str(path), "reason": str(exc)})
            continue
        built = music_prompt(tok, ids, bars)
        prompt = built.ids if built is not None else None
        if prompt is None:
            skipped.append({"path": str(path), "reason": f"fewer than {bars + 1} bars"})
            continue
        source = notes_from_score(tok.decode(ids))
        truth = notes_from_score(tok.decode(true_continuation(tok, ids, prompt, max_tokens)))
        sources.append(source)
        truths.append(truth)
        for s, seg in enumerate(split_by_time(truth, bars * BAR_BEATS)):
            per_track = style_similarity_per_track(seg, source)
            for m in metrics:
                reference[m][s].append(float(np.mean([v[m] for v in per_track.values()])))
        max_new = max(max_tokens - len(prompt), 1)
        results = generate(loaded.model, tok, [prompt] * samples, options, max_new,
                           generator=gen)
        entry = {"path": str(path), "prompt_tokens": len(prompt), "samples": []}
        for k, res in enumerate(results):
            score = merge(built, tok.decode(res.ids))  # the prompt's notes kept as they are
            write_score(score, _sample_path(out, path, k))
            segs = split_by_time(notes_from_score(score), bars * BAR_BEATS)
            per_seg = []
            for s, seg in enumerate(segs):
                per_track = style_similarity_per_track(seg, source)
                mean = {m: float(np.mean([v[m] for v in per_track.values()])) for m in metrics}
                for m in metrics:
                    scores[m][s].append(mean[m])
                per_seg.append({"mean": mean, "tracks": per_track, "notes": len(seg)})
            entry["samples"].append({"tokens": len(res.ids), "stop": res.stop,
                                     "segments": per_seg})
        songs.append(entry)
    if not songs:
        raise MusicgenError(f"{prompts}: no usable prompt song ({len(skipped)} skipped)")
    summary = {m: [summarize(seg) for seg in scores[m]] for m in metrics}
    ref_summary = {m: [summarize(seg) for seg in reference[m]] for m in metrics}
    baseline = other_song_baseline(sources, truths, bars, metrics)
    results = {"checkpoint": str(checkpoint), "bars": bars, "max_tokens": max_tokens,
               "samples": samples, "sampling": vars(options), "summary": summary,
               "reference_summary": ref_summary,
               "baseline_summary": {m: [summarize(seg) for seg in baseline[m]] for m in metrics},
               "songs": songs, "skipped": skipped}
    write_json(out / "style.json", results)
    plot_style_boxes(scores, out / "style.png", reference=reference)
    return results


def segment_similarities(notes: Notes, source: Notes, bars: int,
                         metrics: Sequence[str]) -> list[dict[str, float]]:
    """Per time segment after the prompt: each similarity to `source`, averaged over its tracks."""
    out = []
    for seg in split_by_time(notes, bars * BAR_BEATS):
        per_track = style_similarity_per_track(seg, source)
        out.append({m: float(np.mean([v[m] for v in per_track.values()])) for m in metrics})
    return out


def other_song_baseline(sources: list[Notes], truths: list[Notes], bars: int,
                        metrics: Sequence[str]) -> dict[str, list[list[float]]]:
    """Similarity of each prompt song to the real continuation of an unrelated song (the next
    prompt song, cyclically): what a continuation scores without knowing its song. Empty with
    fewer than two songs."""
    base: dict[str, list[list[float]]] = {m: [[] for _ in range(N_STYLE_SEGMENTS)] for m in metrics}
    if len(sources) < 2:
        return base
    for i, source in enumerate(sources):
        other = truths[(i + 1) % len(sources)]
        for s, sims in enumerate(segment_similarities(other, source, bars, metrics)):
            for m in metrics:
                base[m][s].append(sims[m])
    return base


def _sample_path(out: Path, src: Path, k: int) -> Path:
    folder = out / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{src.stem}_{k}.mid"


# ---------------------------------------------------------------------------------------------
# descriptive statistics of generated music


def folder_statistics(folder: str | Path, tokenizer=None) -> tuple[list[dict], list[dict]]:
    """Per-file statistics (and grammar error rate with a tokenizer); unreadable files skipped."""
    rows, skipped = [], []
    for path in tqdm(midi_files(folder), desc=Path(folder).name, leave=False):
        try:
            notes = load_notes(path)
            row = {"path": str(path), "notes": len(notes), **music_statistics(notes)}
            if tokenizer is not None:
                row["grammar_error_rate"] = grammar_error_rate(tokenizer.encode(path),
                                                               tokenizer.grammar())
        except MusicgenError as exc:
            skipped.append({"path": str(path), "reason": str(exc)})
            continue
        rows.append(row)
    return rows, skipped


def evaluate_music(
    midi_dir: str | Path, out: str | Path, reference: str | Path | None = None,
    tokenizer=None,
) -> dict:
    """Statistics of a folder of MIDI files, beside those of a reference folder; music.json/png."""
    from musicgen.plots import plot_music_stats

    names = list(STATISTICS) + (["grammar_error_rate"] if tokenizer is not None else [])
    gen_rows, gen_skipped = folder_statistics(midi_dir, tokenizer)
    if not gen_rows:
        raise MusicgenError(f"{midi_dir}: no readable MIDI file")
    columns = {n: [r[n] for r in gen_rows] for n in names}
    results = {"midi_dir": str(midi_dir), "generated": {n: summarize(columns[n]) for n in names},
               "files": gen_rows, "skipped": gen_skipped}
    ref_columns = None
    if reference is not None:
        ref_rows, ref_skipped = folder_statistics(reference, tokenizer)
        ref_columns = {n: [r[n] for r in ref_rows] for n in names}
        results["reference_dir"] = str(reference)
        results["reference"] = {n: summarize(ref_columns[n]) for n in names}
        results["reference_files"] = ref_rows
        results["reference_skipped"] = ref_skipped
    out = Path(out)
    write_json(out / "music.json", results)
    plot_music_stats(columns, ref_columns, out / "music.png")
    return results


# ---------------------------------------------------------------------------------------------
# looking inside a model (figures only): positional templates and attention matrices


def positional_kernels(model: torch.nn.Module, lags: np.ndarray, layer: int = 0) -> np.ndarray:
    """The learned P_d(m - n) of `layer` at integer `lags`: (L, H, D).

    sineSPE: the closed form from f, theta, lambda; convSPE: the filters' cross-correlation;
    with gates (1 - delta) P + delta, which is what the gated codes estimate.
    """
    spes = getattr(model, "spe", None)
    blocks = getattr(model, "blocks", None)
    if not spes or blocks is None:
        pe = getattr(getattr(model, "cfg", None), "pe", "?")
        raise MusicgenError(f"--checkpoint: model uses pe '{pe}', which has no learned "
                            "positional kernel (only sine_spe and conv_spe do)")
    if not 0 <= layer < len(blocks):
        raise MusicgenError(f"--layer: {layer} is not a layer (0..{len(blocks) - 1})")
    spe = spes[0] if len(spes) == 1 else spes[layer]
    with torch.no_grad():
        kern = spe.kernel(torch.as_tensor(lags, dtype=torch.long)).float().cpu()  # (L, H, D)
        gate = getattr(blocks[layer].attn, "gate", None)
        if gate is not None:
            delta = torch.sigmoid(gate.float()).cpu()  # (H, D)
            kern = (1 - delta) * kern + delta
    return kern.numpy()


def _check_index(what: str, values: list[int], n: int) -> None:
    bad = [v for v in values if not 0 <= v < n]
    if bad:
        raise MusicgenError(f"--{what}: {bad[0]} is out of range (0..{n - 1})")


@torch.no_grad()
def attention_maps(
    model: torch.nn.Module, ids: Sequence[int], layers: list[int], heads: list[int],
    seed: int = 0,
) -> dict[tuple[int, int], np.ndarray]:
    """Row-normalised causal attention phi(q^).phi(k^) of chosen (layer, head)s: N x N each.

    Formed explicitly (O(N^2), display only) from each layer's input, caught with a forward
    pre-hook on the attention module, with the same q, k projection, SPE codes and feature map
    the layer uses. The SPE noise is drawn from `seed`.
    """
    blocks = model.blocks
    _check_index("layer", layers, len(blocks))
    _check_index("head", heads, blocks[0].attn.n_heads)
    maps: dict[tuple[int, int], np.ndarray] = {}

    def hook_for(layer: int):
        def hook(attn, args):
            x, codes = args[0], args[1] if len(args) > 1 else None
            b, n, _ = x.shape
            q, k, _ = attn.qkv(x).float().view(b, n, 3, attn.n_heads, attn.head_dim).unbind(2)
            if codes is not None:  # (B, N, H, D) -> (B, N, H, R)
                q, k = codes.project(q, "q", attn.gate), codes.project(k, "k", attn.gate)
            phi_q = attn.features.query(q.transpose(1, 2))  # (B, H, N, M)
            phi_k, _ = attn.features.key(k.transpose(1, 2))
            a = (phi_q @ phi_k.transpose(-1, -2))[0]  # (H, N, N)
            a = a.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=a.device).tril(), 0.0)
            a = a / a.sum(-1, keepdim=True).clamp_min(1e-30)
            for h in heads:
                maps[(layer, h)] = a[h].cpu().numpy()

        return hook

    handles = [blocks[lay].attn.register_forward_pre_hook(hook_for(lay)) for lay in layers]
    was_training = model.training
    model.eval()
    try:
        torch.manual_seed(seed)
        device = next(model.parameters()).device
        model(torch.as_tensor(list(ids), dtype=torch.long, device=device)[None])
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return maps
