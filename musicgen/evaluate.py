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
from musicgen.io import atomic_write_text
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


def evaluate_nll(
    checkpoints: Sequence[str | Path], data: str | Path, out: str | Path, split: str = "validation",
    max_len: int | None = None, max_songs: int | None = None, device: str = "auto",
    segment: int = SEGMENT, batch_size: int = 1, seed: int = 0,
) -> dict:
    """Per-position NLL (and forbidden mass) of each checkpoint on the same held-out songs;
    nll.json + nll.png.

    `seed` fixes the SPE noise draws (one per forward pass), so a rerun gives the same numbers.
    """
    from musicgen.checkpoint import load_checkpoint
    from musicgen.data.dataset import PreparedSplit
    from musicgen.plots import plot_nll_curves

    dev = pick_device(device)
    prepared = PreparedSplit(data, split)
    n_songs = len(prepared) if max_songs is None else min(max_songs, len(prepared))
    if n_songs == 0:
        raise MusicgenError(f"{data}: split '{split}' holds no songs")
    songs = [prepared[i] for i in range(n_songs)]
    data_tok = prepared.tokenizer.to_dict()
    results: dict = {"data": str(data), "split": split, "songs": n_songs, "segment": segment,
                     "models": {}}
    curves = {}
    train_len = None
    for ckpt in checkpoints:
        loaded = load_checkpoint(ckpt, device=dev)
        if loaded.tokenizer.to_dict() != data_tok:
            raise MusicgenError(f"{ckpt}: its tokenizer differs from the one {data} was prepared "
                                "with")
        crop = loaded.config.data.crop_len
        length = max_len or 2 * crop
        torch.manual_seed(seed)
        sums, counts = per_position_nll(loaded.model, tqdm(songs, desc=Path(ckpt).name,
                                                           leave=False), length, dev, batch_size)
        torch.manual_seed(seed)
        forbidden = forbidden_mass(loaded.model, loaded.tokenizer, songs, length, dev)
        label = model_label(loaded.config, ckpt)
        curves[label] = segment_means(sums, counts, segment)
        train_len = train_len or crop
        results["models"][label] = {
            "checkpoint": str(ckpt), "pe": loaded.config.model.pe, "crop_len": crop,
            "max_len": length, "mean_within": range_mean(sums, counts, 0, crop),
            "mean_beyond": range_mean(sums, counts, crop), "per_segment": curves[label],
            "tokens_per_segment": [int(counts[s: s + segment].sum())
                                   for s in range(0, length, segment)],
            "forbidden_mass": forbidden,
        }
        del loaded
    out = Path(out)
    write_json(out / "nll.json", results)
    plot_nll_curves(curves, segment, train_len, out / "nll.png")
    return results


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
    """The first `bars` bars that hold music (leading empty bars skipped when the result is still
    a valid prefix for the grammar), starting with BOS; None if the song is too short."""
    arr = np.asarray(ids, dtype=np.int64)
    starts = tokenizer.bar_starts(arr)
    notes = notes_from_score(tokenizer.decode(ids))
    first = int(notes.onset.min() // BAR_BEATS) if len(notes) else 0
    candidates = []
    if 0 < first and first + bars < len(starts):
        candidates.append([tokenizer.bos_id, *ids[starts[first]: starts[first + bars]]])
    if bars < len(starts):
        candidates.append(list(ids[: starts[bars]]))
    for prompt in candidates:
        g = tokenizer.grammar()
        if all(g.advance(int(t)) for t in prompt) and not g.finished():
            return prompt
    return None


def true_continuation(tokenizer, ids: list[int], prompt: list[int], max_tokens: int) -> list[int]:
    """The prompt followed by what really followed it in the source, within the same budget:
    the reference a sampled continuation is compared with."""
    body = list(prompt[1:])
    for e in tokenizer.bar_starts(np.asarray(ids, dtype=np.int64)):
        if e >= len(body) and list(ids[e - len(body): e]) == body:
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
    for path in tqdm(files, desc="style"):
        try:
            ids = tok.encode(path)
        except MusicgenError as exc:
            skipped.append({"path": str(path), "reason": str(exc)})
            continue
        prompt = make_prompt(tok, ids, bars)
        if prompt is None:
            skipped.append({"path": str(path), "reason": f"fewer than {bars + 1} bars"})
            continue
        source = notes_from_score(tok.decode(ids))
        truth = notes_from_score(tok.decode(true_continuation(tok, ids, prompt, max_tokens)))
        for s, seg in enumerate(split_by_time(truth, bars * BAR_BEATS)):
            per_track = style_similarity_per_track(seg, source)
            for m in metrics:
                reference[m][s].append(float(np.mean([v[m] for v in per_track.values()])))
        max_new = max(max_tokens - len(prompt), 1)
        results = generate(loaded.model, tok, [prompt] * samples, options, max_new,
                           generator=gen)
        entry = {"path": str(path), "prompt_tokens": len(prompt), "samples": []}
        for k, res in enumerate(results):
            score = tok.decode(res.ids)
            score.dump_midi(str(_sample_path(out, path, k)))
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
    results = {"checkpoint": str(checkpoint), "bars": bars, "max_tokens": max_tokens,
               "samples": samples, "sampling": vars(options), "summary": summary,
               "reference_summary": ref_summary, "songs": songs, "skipped": skipped}
    write_json(out / "style.json", results)
    plot_style_boxes(scores, out / "style.png", reference=reference)
    return results


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
