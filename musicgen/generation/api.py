"""The Python API: load a model, generate, continue a MIDI prompt, score a song.

    import musicgen
    m = musicgen.load("checkpoints/pop909_sine_spe_gated")   # a model folder, .pt or shipped name
    piece = m.generate(bars=16, seed=1)                      # -> Music
    piece.save("x.mid"); piece.to_score(); piece.piano_roll()
    m.continue_midi("song.mid", bars=2, seed=1).save("y.mid")
    m.continue_midi("performance.mid", seconds=8, seed=1)   # the first 8 s, then the model
    m.score("song.mid")                                      # -> {"nll_per_token": ..., ...}

`musicgen generate`, `musicgen continue`, `musicgen demo` and `evaluate style` call these same
functions; the commands only parse options and print.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic
import torch

from musicgen.errors import MusicgenError
from musicgen.generation.prompt import (
    Prompt,
    continuation_only,
    encode_song,
    merge,
    prompt_from_file,
    prompt_from_seconds,
)
from musicgen.generation.sample import Generated, SamplingOptions, default_options, generate
from musicgen.io import write_score

BAR_TOKEN_CAP = 512  # with `bars`, at most this many sampled ids per requested bar


def apply_tempo(score: symusic.Score, tempo: float | None) -> symusic.Score:
    """`tempo` (qpm) replaces whatever the score sets at time 0; later changes are kept."""
    if tempo is None:
        return score
    later = [t for t in score.tempos if t.time > 0]
    score.tempos.clear()
    score.tempos.append(symusic.Tempo(0, float(tempo)))
    for t in later:
        score.tempos.append(t)
    return score


def write_midi(score: symusic.Score, path: str | Path) -> Path:
    """Write atomically and verified: a crash or a full disk never leaves a broken file."""
    return write_score(score, path)


@dataclass
class Music:
    """One generated piece: its score, ids and how sampling ended."""

    score: symusic.Score
    ids: list[int]
    prompt_len: int = 1
    stop: str = ""  # end | max_tokens | bars
    sampled: int = 0
    errors: int = 0
    seed: int | None = None
    extra: dict = field(default_factory=dict, repr=False)

    def save(self, path: str | Path) -> Path:
        """Write the piece as a MIDI file (replaced if it exists)."""
        return write_midi(self.score, path)

    def to_score(self) -> symusic.Score:
        """A copy of the piece as a symusic Score."""
        return self.score.copy()

    def piano_roll(self, steps_per_beat: int = 4) -> np.ndarray:
        """[128, T] max velocity of the notes sounding at each step (all tracks, drums too)."""
        score = self.score.to("quarter")
        end = max((n.time + n.duration for t in score.tracks for n in t.notes), default=0.0)
        roll = np.zeros((128, int(np.ceil(end * steps_per_beat))), dtype=np.uint8)
        for track in score.tracks:
            for n in track.notes:
                a = int(round(n.time * steps_per_beat))
                b = max(int(round((n.time + n.duration) * steps_per_beat)), a + 1)
                roll[n.pitch, a:b] = np.maximum(roll[n.pitch, a:b], n.velocity)
        return roll

    def save_audio(self, path: str | Path) -> Path:
        """Synthesize the piece to .wav (or .ogg / .mp3) (`render.synthesize`)."""
        from musicgen.generation.render import synthesize

        return synthesize(self.score, path)


class Model:
    """A loaded model with its tokenizer and config (see `load`)."""

    def __init__(self, loaded, device: torch.device, source: str | Path):
        self.loaded = loaded
        self.model, self.tokenizer, self.config = loaded.model, loaded.tokenizer, loaded.config
        self.device = device
        self.source = Path(source)

    def options(
        self,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        grammar: bool = True,
    ) -> SamplingOptions:
        """The paper's sampling defaults for this tokenizer with the given ones replaced."""
        opts = default_options(self.tokenizer.name)
        if temperature is not None:
            opts.temperature = temperature
        if top_k is not None:
            opts.top_k = top_k
        if top_p is not None:
            opts.top_p = top_p
        opts.grammar = grammar
        return opts.validate()

    def _fit(self, prompt_len: int, max_new: int) -> int:
        cfg = self.config.model
        if cfg.head == "lm" and cfg.pe == "ape_learned" and prompt_len + max_new > cfg.max_len:
            return max(cfg.max_len - prompt_len, 1)  # learned positions stop at max_len
        return max_new

    def sample(
        self,
        prompt: list[int],
        num: int,
        max_new: int,
        seed: int,
        options: SamplingOptions,
        bars: int | None = None,
        batch_size: int = 8,
        progress: bool = False,
        first_allowed: np.ndarray | None = None,
    ) -> Iterator[tuple[int, list[Generated]]]:
        """`num` continuations of `prompt` from one seed, a batch at a time (with the index of its
        first piece), so a caller can write each batch before the next one starts.
        `first_allowed`: `Prompt.first_allowed` (the first sampled id of a cut inside a bar)."""
        max_new = self._fit(len(prompt), max_new)
        gen = torch.Generator(device=self.device).manual_seed(seed)  # noise and draws alike
        for first in range(0, num, batch_size):
            n = min(batch_size, num - first)
            yield (
                first,
                generate(
                    self.model,
                    self.tokenizer,
                    [list(prompt)] * n,
                    options,
                    max_new_tokens=max_new,
                    bars=bars,
                    generator=gen,
                    progress=progress,
                    first_allowed=first_allowed,
                ),
            )

    def music(
        self,
        res: Generated,
        seed: int | None,
        prompt: Prompt | None = None,
        only_continuation: bool = False,
    ) -> Music:
        """A sampled sequence as a piece; with a prompt, its notes are kept as the prompt module
        promises (and dropped again with `only_continuation`)."""
        score = self.tokenizer.decode(res.ids)
        if prompt is not None:
            score = merge(prompt, score)
            if only_continuation:
                score = continuation_only(prompt, score)
            apply_tempo(score, prompt.tempo)
        return Music(score, list(res.ids), res.prompt_len, res.stop, res.sampled, res.errors, seed)

    def generate(
        self,
        bars: int | None = 16,
        seed: int | None = None,
        max_tokens: int | None = None,
        **sampling,
    ) -> Music:
        """One piece from scratch: `bars` bars (None: until the end token or `max_tokens`)."""
        return self.generate_many(1, bars=bars, seed=seed, max_tokens=max_tokens, **sampling)[0]

    def generate_many(
        self,
        num: int,
        bars: int | None = 16,
        seed: int | None = None,
        max_tokens: int | None = None,
        batch_size: int = 8,
        **sampling,
    ) -> list[Music]:
        seed = pick_seed(seed)
        max_new = max_tokens or (BAR_TOKEN_CAP * bars if bars else 2048)
        opts = self.options(**sampling)
        out = []
        for _, batch in self.sample(
            [self.tokenizer.bos_id], num, max_new, seed, opts, bars, batch_size
        ):
            out += [self.music(r, seed) for r in batch]
        return out

    def prompt(
        self,
        path: str | Path,
        bars: int | None = None,
        start: int = 0,
        seconds: float | None = None,
        *,
        option: str = "seconds",
    ) -> Prompt:
        """Bars start..start+bars-1 of a MIDI file (default 2 bars), or its first `seconds`
        (`prompt.prompt_from_seconds`), built as every command builds it; `option`
        names the length in errors (the command passes `--seconds`)."""
        if seconds is None:
            bars = 2 if bars is None else bars
            return prompt_from_file(self.tokenizer, path, start, start + bars)
        if bars is not None or start:
            raise MusicgenError(f"bars and {option}: give one of them, not both")
        return prompt_from_seconds(self.tokenizer, path, seconds, option)

    def continue_midi(
        self,
        path: str | Path,
        bars: int | None = None,
        start: int = 0,
        seed: int | None = None,
        max_tokens: int = 1024,
        only_continuation: bool = False,
        seconds: float | None = None,
        **sampling,
    ) -> Music:
        """The first `bars` bars of `path` (from bar `start`; default 2), or its first `seconds`
        (cut at the first grid position at or after them), then what the model writes."""
        prompt = self.prompt(path, bars, start, seconds)
        seed = pick_seed(seed)
        opts = self.options(**sampling)
        [(_, [res])] = list(
            self.sample(prompt.ids, 1, max_tokens, seed, opts, first_allowed=prompt.first_allowed)
        )
        return self.music(res, seed, prompt, only_continuation)

    def score(self, path: str | Path) -> dict:
        """How likely the model finds a song: mean NLL per token (nats) and per note, the song
        read as training reads it (a POP909 chord annotation beside it becomes its chords)."""
        from musicgen.likelihood import notes_scored, per_position_nll

        ids = encode_song(self.tokenizer, Path(path))
        sums, counts = per_position_nll(self.model, [ids], len(ids) - 1, self.device)
        notes = notes_scored(self.tokenizer, [np.asarray(ids)], len(ids) - 1)
        total = float(sums.sum())
        return {
            "tokens": int(counts.sum()),
            "notes": int(notes),
            "nll_per_token": total / max(int(counts.sum()), 1),
            "nll_per_note": total / max(int(notes), 1),
        }


def checkpoint_stem(path: str | Path) -> str:
    """Output names start with the model's name: runs/pop/best.pt -> pop_best, x/model.pt -> x,
    a model folder -> its name."""
    path = Path(path)
    if path.is_dir():
        return path.name
    if path.stem == "model":
        return path.parent.name or "model"
    if path.stem in ("last", "best") and path.parent.name:
        return f"{path.parent.name}_{path.stem}"
    return path.stem


def free_path(folder: Path, stem: str, suffixes: tuple[str, ...], overwrite: bool) -> Path:
    """`folder/stem` (without suffix), or `stem-1`, `stem-2`, ... if any of its files exist."""
    n = 0
    while True:
        base = folder / (stem if n == 0 else f"{stem}-{n}")
        if overwrite or not any(base.with_name(base.name + s).exists() for s in suffixes):
            return base
        n += 1


def pick_seed(seed: int | None) -> int:
    """The seed given, or a fresh one (printed and stored, so any piece can be made again)."""
    return int(seed) if seed is not None else secrets.randbelow(2**31)


def load(checkpoint: str | Path, device: str = "cpu") -> Model:
    """A model from a model folder, a `.pt` checkpoint, a run folder or a shipped model's name
    (`pop909_sine_spe_gated`). `device`: cpu | auto | cuda | cuda:N | mps."""
    from musicgen.checkpoint import load_checkpoint
    from musicgen.device import pick_device
    from musicgen.resources import resolve_checkpoint

    path = resolve_checkpoint(checkpoint)
    if not path.exists():
        raise MusicgenError(f"{checkpoint}: checkpoint not found (nor a shipped model's name)")
    dev = pick_device(device)
    return Model(load_checkpoint(path, dev), dev, path)
