"""`musicgen evaluate style`: continue the first bars of songs and compare the continuation's
style with the whole song (the groove experiment); style.json + style.png + samples/*.mid."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from musicgen.device import pick_device
from musicgen.errors import MusicgenError
from musicgen.evaluate.common import midi_files, write_json
from musicgen.io import write_score
from musicgen.metrics import (
    BAR_BEATS,
    Notes,
    notes_from_score,
    style_similarity_per_track,
    summarize,
)
from musicgen.prompt import encode_song, merge, music_prompt

N_STYLE_SEGMENTS = 4
METRICS = ("time_pitch", "onset_duration")


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
            return list(prompt) + list(ids[e : e + max(max_tokens - len(prompt), 0)])
    return list(prompt)


def segment_details(notes: Notes, source: Notes, bars: int, metrics: Sequence[str]) -> list[dict]:
    """Per time segment after the prompt: the similarities to `source` of each track, their mean
    over the tracks, and the segment's note count."""
    out = []
    for seg in split_by_time(notes, bars * BAR_BEATS):
        per_track = style_similarity_per_track(seg, source)
        mean = {m: float(np.mean([v[m] for v in per_track.values()])) for m in metrics}
        out.append({"mean": mean, "tracks": per_track, "notes": len(seg)})
    return out


def segment_similarities(
    notes: Notes, source: Notes, bars: int, metrics: Sequence[str]
) -> list[dict[str, float]]:
    """Per time segment after the prompt: each similarity to `source`, averaged over its tracks."""
    return [d["mean"] for d in segment_details(notes, source, bars, metrics)]


def other_song_baseline(
    sources: list[Notes], truths: list[Notes], bars: int, metrics: Sequence[str]
) -> dict[str, list[list[float]]]:
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


def _collect(into: dict[str, list[list[float]]], segments: list[dict[str, float]]) -> None:
    """Append each segment's similarities to the per-metric, per-segment lists."""
    for s, sims in enumerate(segments):
        for m in into:
            into[m][s].append(sims[m])


def _empty() -> dict[str, list[list[float]]]:
    return {m: [[] for _ in range(N_STYLE_SEGMENTS)] for m in METRICS}


def _sampling(tokenizer, temperature: float | None, top_p: float | None):
    """The paper's options for this tokenizer, with the temperature / top-p given."""
    from musicgen.sample import default_options

    options = default_options(tokenizer.name)
    if temperature is not None:
        options.temperature = temperature
    if top_p is not None:
        options.top_p = top_p
    return options


def _continue_song(
    loaded,
    path: Path,
    built,
    source: Notes,
    *,
    bars: int,
    max_tokens: int,
    samples: int,
    options,
    gen,
    out: Path,
    scores: dict,
) -> dict:
    """Sample `samples` continuations of one prompt, write them and score them against the
    song; the song's entry of style.json."""
    from musicgen.sample import generate

    tok = loaded.tokenizer
    max_new = max(max_tokens - len(built.ids), 1)
    results = generate(loaded.model, tok, [built.ids] * samples, options, max_new, generator=gen)
    entry = {"path": str(path), "prompt_tokens": len(built.ids), "samples": []}
    for k, res in enumerate(results):
        score = merge(built, tok.decode(res.ids))  # the prompt's notes kept as they are
        write_score(score, _sample_path(out, path, k))
        per_seg = segment_details(notes_from_score(score), source, bars, METRICS)
        _collect(scores, [d["mean"] for d in per_seg])
        entry["samples"].append({"tokens": len(res.ids), "stop": res.stop, "segments": per_seg})
    return entry


def evaluate_style(
    checkpoint: str | Path,
    prompts: str | Path,
    out: str | Path,
    bars: int = 2,
    max_tokens: int = 1024,
    samples: int = 3,
    temperature: float | None = None,
    top_p: float | None = None,
    seed: int = 0,
    device: str = "auto",
    max_prompts: int | None = None,
) -> dict:
    """Continue `bars` bars of every prompt song; score 4 time segments against the whole song.

    Similarities are computed per track role and averaged over the roles the source has. The
    continuations are written to out/samples/ as MIDI.
    """
    # Over 60 lines on purpose: one pass over the prompt songs fills three score sets in step
    # (sampled, true continuation, other-song sources) with one RNG order; most lines are the
    # formatter's one-argument-per-line calls.
    from musicgen.checkpoint import load_checkpoint
    from musicgen.plots import plot_style_boxes

    dev = pick_device(device)
    loaded = load_checkpoint(checkpoint, device=dev)
    tok = loaded.tokenizer
    options = _sampling(tok, temperature, top_p)
    files = midi_files(prompts)[:max_prompts]
    gen = torch.Generator(device=dev).manual_seed(seed) if dev.type != "mps" else None
    if gen is None:  # MPS has no device generator: noise and draws from the seeded global RNG
        torch.manual_seed(seed)
    out = Path(out)
    scores, reference = _empty(), _empty()
    songs, skipped = [], []
    sources: list[Notes] = []
    truths: list[Notes] = []  # the real continuations, also the other-song baseline
    for path in tqdm(files, desc="style"):
        try:
            ids = encode_song(tok, path)  # annotated POP909 chords, as in training
        except MusicgenError as exc:
            skipped.append({"path": str(path), "reason": str(exc)})
            continue
        built = music_prompt(tok, ids, bars)
        if built is None:
            skipped.append({"path": str(path), "reason": f"fewer than {bars + 1} bars"})
            continue
        source = notes_from_score(tok.decode(ids))
        truth = notes_from_score(tok.decode(true_continuation(tok, ids, built.ids, max_tokens)))
        sources.append(source)
        truths.append(truth)
        _collect(reference, segment_similarities(truth, source, bars, METRICS))
        songs.append(
            _continue_song(
                loaded,
                path,
                built,
                source,
                bars=bars,
                max_tokens=max_tokens,
                samples=samples,
                options=options,
                gen=gen,
                out=out,
                scores=scores,
            )
        )
    if not songs:
        raise MusicgenError(f"{prompts}: no usable prompt song ({len(skipped)} skipped)")
    baseline = other_song_baseline(sources, truths, bars, METRICS)
    results = {
        "checkpoint": str(checkpoint),
        "bars": bars,
        "max_tokens": max_tokens,
        "samples": samples,
        "sampling": vars(options),
        "summary": {m: [summarize(seg) for seg in scores[m]] for m in METRICS},
        "reference_summary": {m: [summarize(seg) for seg in reference[m]] for m in METRICS},
        "baseline_summary": {m: [summarize(seg) for seg in baseline[m]] for m in METRICS},
        "songs": songs,
        "skipped": skipped,
    }
    write_json(out / "style.json", results)
    plot_style_boxes(scores, out / "style.png", reference=reference)
    return results
