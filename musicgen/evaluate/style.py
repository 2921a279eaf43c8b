"""`musicgen evaluate style`: continue the first bars of songs and compare the continuation's
style with the whole song (the groove experiment); style.json + style.png + samples/*.mid."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic
from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.evaluate.common import midi_files, write_json
from musicgen.generation.api.prompt import (
    Prompt,
    encode_song,
    midi_pairing,
    only_notes,
    select_bars,
)
from musicgen.io import write_score
from musicgen.measures.metrics import (
    BAR_BEATS,
    Notes,
    notes_from_score,
    style_similarity_per_track,
    summarize,
)

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


def song_prompt(tokenizer, ids: list[int], bars: int, where: str = "prompt") -> Prompt:
    """The prompt `evaluate style` continues: the first `bars` bars that hold music, by the one
    rule of `generation.api.prompt.select_bars` (what `musicgen continue --bars` feeds), with at
    least one bar of the song after it (the true continuation it is compared with)."""
    prompt = select_bars(tokenizer, ids, bars, where=where)
    if len(tokenizer.bar_starts(np.asarray(ids, dtype=np.int64))) <= prompt.first_bar + prompt.bars:
        raise MusicgenError(f"{where}: fewer than {bars + 1} bars of music")
    return prompt


def true_continuation(tokenizer, ids: list[int], prompt: list[int], max_tokens: int) -> list[int]:
    """The prompt followed by what really followed it in the source, at most `max_tokens` ids
    (the budget of a sampled continuation): the reference a sampled continuation is compared
    with."""
    body = list(prompt[1:])
    for s in tokenizer.bar_starts(np.asarray(ids, dtype=np.int64)):
        e = int(s) + len(body)
        if list(ids[s:e]) == body:
            return list(prompt) + list(ids[e : e + max_tokens])
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
    sources: list[Notes], truths: list[Notes], bars: int | list[int], metrics: Sequence[str]
) -> dict[str, list[list[float]]]:
    """Similarity of each prompt song to the real continuation of an unrelated song (the next
    prompt song, cyclically): what a continuation scores without knowing its song. `bars`: the
    prompt length of every truth (or one for all). Empty with fewer than two songs."""
    base: dict[str, list[list[float]]] = {m: [[] for _ in range(N_STYLE_SEGMENTS)] for m in metrics}
    if len(sources) < 2:
        return base
    lengths = bars if isinstance(bars, list) else [bars] * len(truths)
    for i, source in enumerate(sources):
        k = (i + 1) % len(sources)
        for s, sims in enumerate(segment_similarities(truths[k], source, lengths[k], metrics)):
            for m in metrics:
                base[m][s].append(sims[m])
    return base


def _note_set(score) -> list[tuple]:
    """Every note of `score` as (track, onset, pitch, duration, velocity), sorted."""
    return sorted(
        (t.name, t.program, t.is_drum, n.time, n.pitch, n.duration, n.velocity)
        for t in score.tracks
        for n in t.notes
    )


def prompt_check(prompt: Prompt, score) -> dict:
    """Does `score` (at the prompt's resolution) start with exactly the prompt's notes? `kept`:
    the notes starting before bar N+1 equal the prompt's, read as a MIDI file pairs them;
    `extra` / `missing`: how many notes there differ from the prompt's."""
    if score.ticks_per_quarter != prompt.notes.ticks_per_quarter:
        score = score.resample(prompt.notes.ticks_per_quarter)
    head = midi_pairing(only_notes(score, lambda n: n.time < prompt.end_tick))
    got, want = _note_set(head), _note_set(midi_pairing(prompt.notes.copy()))
    extra = sum((Counter(got) - Counter(want)).values())
    missing = sum((Counter(want) - Counter(got)).values())
    return {"kept": extra == 0 and missing == 0, "extra": extra, "missing": missing}


def _sample_path(out: Path, src: Path, k: int) -> Path:
    folder = out / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{src.stem}_{k}.mid"


def _collect(into: dict[str, list[list[float]]], segments: list[dict[str, float]]) -> None:
    """Append each segment's similarities to the per-metric, per-segment lists."""
    for s, sims in enumerate(segments):
        for m in into:
            into[m][s].append(sims[m])


def _prompts_kept(songs: list[dict]) -> dict:
    """How many continuations start with their prompt intact: as decoded from the model's ids,
    and as read back from the written MIDI file."""
    samples = [s for song in songs for s in song["samples"]]
    return {
        "samples": len(samples),
        "decoded": sum(s["prompt_tokens_decoded"]["kept"] for s in samples),
        "written": sum(s["prompt_written"]["kept"] for s in samples),
    }


def _summary(sets: dict[str, list[list[float]]]) -> dict[str, list[dict]]:
    return {m: [summarize(seg) for seg in sets[m]] for m in METRICS}


def _empty() -> dict[str, list[list[float]]]:
    return {m: [[] for _ in range(N_STYLE_SEGMENTS)] for m in METRICS}


def _continue_song(
    model,
    path: Path,
    built: Prompt,
    source: Notes,
    *,
    bars: int,
    out: Path,
    scores: dict,
    **generation,
) -> dict:
    """Sample continuations of one prompt through the API (`Model.pieces`; `generation`: its
    keywords), write them and score them against the song; the song's entry of style.json."""
    tok = model.tokenizer
    entry = {"path": str(path), "prompt_tokens": len(built.ids), "samples": []}
    for k, music in enumerate(model.pieces(prompt=built, **generation)):
        raw = tok.decode(music.ids)  # what the model wrote, prompt included
        path_k = _sample_path(out, path, k)
        write_score(music.score, path_k)  # the prompt's notes kept as they are (prompt.merge)
        per_seg = segment_details(notes_from_score(music.score), source, bars, METRICS)
        _collect(scores, [d["mean"] for d in per_seg])
        entry["samples"].append(
            {
                "tokens": len(music.ids),
                "stop": music.stop,
                "segments": per_seg,
                "prompt_tokens_decoded": prompt_check(built, raw),  # the model's own output
                "prompt_written": prompt_check(built, symusic.Score(str(path_k))),  # the file
            }
        )
    return entry


@dataclass
class _Tally:
    """What the pass over the prompt songs collects: per-segment scores of the sampled and the
    true continuations, each used song's notes, true continuation and prompt length (the
    other-song baseline), the songs' entries of style.json and the songs skipped."""

    scores: dict = field(default_factory=_empty)
    reference: dict = field(default_factory=_empty)
    sources: list = field(default_factory=list)
    truths: list = field(default_factory=list)  # the real continuations
    lengths: list = field(default_factory=list)  # bars of each prompt (one more with a pickup)
    songs: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    def add(self, model, path: Path, bars: int, max_tokens: int, out: Path, **generation):
        """Prompt, true continuation and sampled continuations of one song (or its skip)."""
        tok = model.tokenizer
        try:
            ids = encode_song(tok, path)  # annotated POP909 chords, as in training
            built = song_prompt(tok, ids, bars, where=str(path))
        except MusicgenError as exc:
            self.skipped.append({"path": str(path), "reason": str(exc)})
            return
        source = notes_from_score(tok.decode(ids))
        truth = notes_from_score(tok.decode(true_continuation(tok, ids, built.ids, max_tokens)))
        self.sources.append(source)
        self.truths.append(truth)
        self.lengths.append(built.bars)
        _collect(self.reference, segment_similarities(truth, source, built.bars, METRICS))
        self.songs.append(
            _continue_song(
                model, path, built, source, bars=built.bars, out=out, scores=self.scores,
                max_tokens=max_tokens, **generation,
            )
        )  # fmt: skip


def evaluate_style(
    checkpoint: str | Path,
    prompts: str | Path,
    out: str | Path,
    bars: int = 2,
    max_tokens: int = 1024,
    samples: int = 3,
    seed: int = 0,
    device: str = "auto",
    max_prompts: int | None = None,
    **sampling,
) -> dict:
    """Continue `bars` bars of every prompt song; score 4 time segments against the whole song.

    Similarities are computed per track role and averaged over the roles the source has. The
    continuations are written to out/samples/ as MIDI. `sampling`: options of
    `generation.api.options.OPTIONS` by name (None or left out: the model's own, else the paper's).
    """
    # One pass over the prompt songs (`_Tally.add`) fills three score sets in step (sampled,
    # true continuation, other-song sources) with one random stream.
    from musicgen.evaluate.plots import plot_style_boxes
    from musicgen.generation.api import GenerationRequest, load
    from musicgen.generation.api.options import OPTIONS

    unknown = sorted(set(sampling) - set(OPTIONS))
    if unknown:
        raise MusicgenError(f"evaluate style: unknown sampling option {', '.join(unknown)}")
    GenerationRequest.build(num=samples, bars=bars, max_tokens=max_tokens, seed=seed, **sampling)
    model = load(checkpoint, device)
    files = midi_files(prompts)[:max_prompts]
    generation = {"num": samples, "batch_size": samples, "seed": seed}
    generation["generator"] = model.generator(seed)  # one random stream over all the songs
    tally = _Tally()
    for path in tqdm(files, desc="style"):
        tally.add(model, path, bars, max_tokens, Path(out), **generation, **sampling)
    scores, reference, songs, skipped = tally.scores, tally.reference, tally.songs, tally.skipped
    if not songs:
        raise MusicgenError(f"{prompts}: no usable prompt song ({len(skipped)} skipped)")
    baseline = other_song_baseline(tally.sources, tally.truths, tally.lengths, METRICS)
    results = {
        "checkpoint": str(checkpoint),
        "bars": bars,
        "max_tokens": max_tokens,
        "samples": samples,
        "sampling": vars(model.options(**sampling)),
        "summary": _summary(scores),
        "reference_summary": _summary(reference),
        "baseline_summary": _summary(baseline),
        "prompts_kept": _prompts_kept(songs),
        "songs": songs,
        "skipped": skipped,
    }
    write_json(Path(out) / "style.json", results)
    plot_style_boxes(scores, Path(out) / "style.png", reference=reference)
    return results
