"""The Python API, and the one generation path: load a model, generate, continue, score.

    import musicgen
    m = musicgen.load("checkpoints/pop909_sine_spe_gated")   # a model folder, .pt or shipped name
    piece = m.generate(bars=16, seed=1)                      # -> Music
    piece.save("x.mid"); piece.to_score(); piece.piano_roll()
    m.continue_midi("song.mid", bars=2, seed=1).save("y.mid")   # the first 2 bars of music
    m.continue_midi("song.mid", prompt_bars=(4, 6), new_bars=8)  # exactly bars 4-5, 8 new bars
    m.continue_midi("performance.mid", seconds=8, seed=1)   # the first 8 s, then the model
    m.score("song.mid")                                      # -> {"nll_per_token": ..., ...}

`musicgen generate`, `musicgen continue`, `musicgen demo` and `evaluate style` call these same
functions (all through `Model.pieces`); the commands only parse options, name files and print.
Arguments are checked here, before anything is loaded or sampled, and errors name the
parameters (`bars: must be >= 1, got 0`); the commands translate them to their flags.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic
import torch

from musicgen.errors import SEED_MAX, MusicgenError, check_int
from musicgen.generation.prompt import Prompt, continuation_only, encode_song, load_prompt, merge
from musicgen.generation.sample import (
    Generated,
    GrammarWrap,
    Progress,
    SamplingOptions,
    default_options,
    generate,
)
from musicgen.generation.write import checkpoint_stem, write_midi
from musicgen.limits import MAX_BATCH, MAX_NEW_BARS, MAX_NEW_TOKENS

__all__ = ["Model", "Music", "checkpoint_stem", "load", "pick_seed", "write_midi"]

BAR_TOKEN_CAP = 512  # with `bars` and no `max_tokens`: at most this many sampled ids per bar
GENERATE_MAX_TOKENS = 2048  # `generate` without `bars` or `max_tokens`
CONTINUE_MAX_TOKENS = 1024  # `continue_midi` without `new_bars` or `max_tokens`


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


@dataclass
class Music:
    """One generated piece: its score, ids (which decode to it) and how sampling ended."""

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


def pick_seed(seed: int | None) -> int:
    """The seed given (a whole number in 0..2**32-1), or a fresh one (printed and stored, so any
    piece can be made again)."""
    seed = check_int("seed", seed, 0, SEED_MAX)
    return seed if seed is not None else secrets.randbelow(2**31)


def _check_hooks(progress, cancel, grammar_wrap) -> None:
    if progress is not None and not callable(progress):
        raise MusicgenError(f"progress: must be a function progress(done, total), got {progress!r}")
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise MusicgenError(f"cancel: must have is_set() (a threading.Event), got {cancel!r}")
    if grammar_wrap is not None and not callable(grammar_wrap):
        raise MusicgenError(
            f"grammar_wrap: must be a function (grammar, ids), got {grammar_wrap!r}"
        )


def max_new_ids(
    bars: int | None, max_tokens: int | None, default: int, bars_name: str = "bars"
) -> int:
    """The most ids sampled after the prompt, per piece: `max_tokens`, else `BAR_TOKEN_CAP` per
    requested bar, else `default`; `bars` (named `bars_name`) and `max_tokens` checked against
    the limits."""
    check_int(bars_name, bars, 1, MAX_NEW_BARS)
    if max_tokens is not None:
        return check_int("max_tokens", max_tokens, 1, MAX_NEW_TOKENS)
    return min(BAR_TOKEN_CAP * bars, MAX_NEW_TOKENS) if bars is not None else default


def check_arguments(
    num: int = 1,
    bars: int | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    batch_size: int = 8,
    *,
    bars_name: str = "bars",
    **sampling,
) -> None:
    """The checks of `Model.pieces` that need no model, so that a command can make them before
    it loads one: counts, lengths against the limits, the seed, the sampling options' types.
    `bars_name`: what the caller calls `bars` (`new_bars` for a continuation)."""
    for name, value, high in (("num", num, None), ("batch_size", batch_size, MAX_BATCH)):
        if check_int(name, value, 1, high) is None:
            raise MusicgenError(f"{name}: must be >= 1, got None")
    max_new_ids(bars, max_tokens, GENERATE_MAX_TOKENS, bars_name)
    pick_seed(0 if seed is None else seed)
    SamplingOptions().replace(**sampling)


class Model:
    """A loaded model with its tokenizer and config (see `load`)."""

    def __init__(self, loaded, device: torch.device, source: str | Path):
        self.loaded = loaded
        self.model, self.tokenizer, self.config = loaded.model, loaded.tokenizer, loaded.config
        self.device = device
        self.source = Path(source)

    def options(self, **sampling) -> SamplingOptions:
        """The sampling defaults for this tokenizer (`sample.default_options`, the one place they
        are kept) with those given replaced (None: not given)."""
        return default_options(self.tokenizer.name, **sampling)

    def _fit(self, prompt_len: int, max_new: int) -> int:
        cfg = self.config.model
        if cfg.head == "lm" and cfg.pe == "ape_learned" and prompt_len + max_new > cfg.max_len:
            return max(cfg.max_len - prompt_len, 1)  # learned positions stop at max_len
        return max_new

    def generator(self, seed: int) -> torch.Generator | None:
        """The one random stream of a call (SPE noise and draws); MPS has no device generator,
        so there the global RNG is seeded instead."""
        if self.device.type == "mps":
            torch.manual_seed(seed)
            return None
        return torch.Generator(device=self.device).manual_seed(seed)

    def pieces(
        self,
        num: int,
        *,
        prompt: Prompt | None = None,
        bars: int | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        batch_size: int = 8,
        only_continuation: bool = False,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        generator: torch.Generator | None = None,
        **sampling,
    ) -> Iterator[Music]:
        """THE generation path: `num` pieces (from scratch, or continuing `prompt`) from one
        seed, yielded a batch at a time so that a caller can write each before the next batch
        starts. `bars`: new bars per piece; `max_tokens`: the most ids sampled after the prompt
        per piece. Every argument is checked now, before the first piece is asked for.
        `generator`: draw from this random stream instead of a fresh one from `seed` (one stream
        over many calls, as `evaluate style` does; `seed` is then only recorded)."""
        if prompt is not None and not isinstance(prompt, Prompt):
            raise MusicgenError(f"prompt: must be a Prompt (Model.prompt(path)), got {prompt!r}")
        name = "bars" if prompt is None else "new_bars"
        check_arguments(num, bars, max_tokens, seed, batch_size, bars_name=name, **sampling)
        _check_hooks(progress, cancel, grammar_wrap)
        default = GENERATE_MAX_TOKENS if prompt is None else CONTINUE_MAX_TOKENS
        max_new = max_new_ids(bars, max_tokens, default, name)
        options = self.options(**sampling)
        seed = pick_seed(seed)
        ids = [self.tokenizer.bos_id] if prompt is None else list(prompt.ids)
        max_new = self._fit(len(ids), max_new)
        gen = generator if generator is not None else self.generator(seed)
        batches = range(0, num, batch_size)
        steps = len(ids) - 1 + max_new  # decoding steps of one batch

        def run() -> Iterator[Music]:
            for k, first in enumerate(batches):
                done = (
                    None if progress is None else _offset(progress, k * steps, len(batches) * steps)
                )
                results = generate(
                    self.model,
                    self.tokenizer,
                    [ids] * min(batch_size, num - first),
                    options,
                    max_new_tokens=max_new,
                    bars=bars,
                    generator=gen,
                    progress=done,
                    first_allowed=None if prompt is None else prompt.first_allowed,
                    cancel=cancel,
                    grammar_wrap=grammar_wrap,
                )
                yield from (self.music(r, seed, prompt, only_continuation) for r in results)

        return run()

    def music(
        self,
        res: Generated,
        seed: int | None,
        prompt: Prompt | None = None,
        only_continuation: bool = False,
    ) -> Music:
        """A sampled sequence as a piece; with a prompt, its notes are kept as the prompt module
        promises (and dropped again with `only_continuation`: the ids are then those of the
        continuation alone, `[BOS, *solo_lead, *continuation]`, which decode to it)."""
        score = self.tokenizer.decode(res.ids)
        ids, prompt_len = list(res.ids), res.prompt_len
        if prompt is not None:
            score = merge(prompt, score)
            if only_continuation:
                score = continuation_only(prompt, score)
                ids = [self.tokenizer.bos_id, *prompt.solo_lead, *res.continuation]
                prompt_len = 1 + len(prompt.solo_lead)
            apply_tempo(score, prompt.tempo)
        return Music(score, ids, prompt_len, res.stop, res.sampled, res.errors, seed)

    def generate(
        self,
        bars: int | None = 16,
        *,
        seed: int | None = None,
        max_tokens: int | None = None,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        **sampling,
    ) -> Music:
        """One piece from scratch: `bars` bars (None: until the end token or `max_tokens`)."""
        hooks = {"progress": progress, "cancel": cancel, "grammar_wrap": grammar_wrap}
        return self.generate_many(1, bars, seed=seed, max_tokens=max_tokens, **hooks, **sampling)[0]

    def generate_many(
        self,
        num: int,
        bars: int | None = 16,
        *,
        seed: int | None = None,
        max_tokens: int | None = None,
        batch_size: int = 8,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        **sampling,
    ) -> list[Music]:
        """`num` pieces from scratch from one seed, `batch_size` decoded together."""
        hooks = {"progress": progress, "cancel": cancel, "grammar_wrap": grammar_wrap}
        return list(
            self.pieces(
                num, bars=bars, seed=seed, max_tokens=max_tokens, batch_size=batch_size,
                **hooks, **sampling,
            )
        )  # fmt: skip

    def prompt(
        self,
        path: str | Path,
        bars: int | None = None,
        *,
        prompt_bars: tuple[int, int] | None = None,
        seconds: float | None = None,
    ) -> Prompt:
        """The prompt every command builds (`prompt.load_prompt`): the first `bars` bars that
        hold music (default 2; leading silent bars skipped, a pickup joins the first bar), or
        exactly bars `prompt_bars=(start, end)` from time 0, or the first `seconds`."""
        return load_prompt(self.tokenizer, path, bars, prompt_bars, seconds)

    def continue_midi(
        self,
        path: str | Path,
        bars: int | None = None,
        *,
        prompt_bars: tuple[int, int] | None = None,
        seconds: float | None = None,
        new_bars: int | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        only_continuation: bool = False,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        **sampling,
    ) -> Music:
        """One continuation of a MIDI file (the arguments of `continue_many`)."""
        return self.continue_many(
            path, 1, bars, prompt_bars=prompt_bars, seconds=seconds, new_bars=new_bars,
            max_tokens=max_tokens, seed=seed, only_continuation=only_continuation,
            progress=progress, cancel=cancel, grammar_wrap=grammar_wrap, **sampling,
        )[0]  # fmt: skip

    def continue_many(
        self,
        path: str | Path,
        num: int,
        bars: int | None = None,
        *,
        prompt_bars: tuple[int, int] | None = None,
        seconds: float | None = None,
        new_bars: int | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        only_continuation: bool = False,
        batch_size: int = 8,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        **sampling,
    ) -> list[Music]:
        """`num` continuations of the prompt `self.prompt(path, bars, prompt_bars=, seconds=)`:
        the prompt, then what the model writes: `new_bars` bars (None: until the end token or
        `max_tokens`, default 1024 ids)."""
        check_arguments(  # before the file is read
            num, new_bars, max_tokens, seed, batch_size, bars_name="new_bars", **sampling
        )
        _check_hooks(progress, cancel, grammar_wrap)
        prompt = self.prompt(path, bars, prompt_bars=prompt_bars, seconds=seconds)
        hooks = {"progress": progress, "cancel": cancel, "grammar_wrap": grammar_wrap}
        return list(
            self.pieces(
                num, prompt=prompt, bars=new_bars, seed=seed, max_tokens=max_tokens,
                batch_size=batch_size, only_continuation=only_continuation, **hooks, **sampling,
            )
        )  # fmt: skip

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


def _offset(progress: Progress, before: int, total: int) -> Progress:
    """One batch's progress(done, steps) as the whole call's progress(before + done, total)."""
    return lambda done, _steps: progress(before + done, total)


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
