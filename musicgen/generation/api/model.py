"""The Python API, and the one generation path: load a model, generate, continue, score.

    import musicgen
    m = musicgen.load("checkpoints/pop909_sine_spe_gated")   # a model folder, .pt or shipped name
    piece = m.generate(bars=16, seed=1)                      # -> Music
    piece.save("x.mid"); piece.to_score(); piece.piano_roll()
    m.continue_midi("song.mid", bars=2, seed=1).save("y.mid")   # the first 2 bars of music
    m.continue_midi("song.mid", prompt_bars=(4, 6), new_bars=8)  # exactly bars 4-5, 8 new bars
    m.continue_midi("performance.mid", seconds=8, seed=1)   # the first 8 s, then the model
    m.regenerate("song.mid", bars=(8, 16), seed=1)           # bars 8-15 written again
    m.score("song.mid")                                      # -> {"nll_per_token": ..., ...}

`musicgen generate`, `musicgen continue`, `musicgen demo`, `evaluate style` and the studio call
these same functions (all through `Model.pieces`); the commands only parse options, name files
and print. The options of a call form one `GenerationRequest`, checked once before anything is
sampled; errors name the parameters (`bars: must be >= 1, got 0`) and the commands translate
them to their flags.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from types import EllipsisType

import torch

from musicgen.errors import EmptyPiece, MusicgenError
from musicgen.generation.api.extend import extend_many
from musicgen.generation.api.finish import finish
from musicgen.generation.api.legato import hold_melody
from musicgen.generation.api.music import Music, apply_tempo
from musicgen.generation.api.options import check_sample
from musicgen.generation.api.prompt import Prompt, continuation_only, load_prompt, merge
from musicgen.generation.api.regenerate import regenerate as regenerate_bars
from musicgen.generation.api.request import (
    BAR_TOKEN_CAP,
    CONTINUE_MAX_TOKENS,
    GENERATE_MAX_TOKENS,
    SCRATCH_BARS,
    GenerationRequest,
)
from musicgen.generation.api.scoring import ids_nll, score_song
from musicgen.generation.api.write import checkpoint_stem, write_midi
from musicgen.generation.controls.chord_plan import chord_plan
from musicgen.generation.controls.form_plan import (
    SectionChords,
    form_sections,
    form_text,
    resolve,
    total_bars,
    with_form,
)
from musicgen.generation.decoding.sample import (
    Generated,
    GrammarWrap,
    Progress,
    SamplingOptions,
    generate,
)
from musicgen.generation.rules import Controls

__all__ = [
    "BAR_TOKEN_CAP",
    "GenerationRequest",
    "Model",
    "Music",
    "apply_tempo",
    "checkpoint_stem",
    "load",
    "write_midi",
]


class Model:
    """A loaded model with its tokenizer and config (see `load`)."""

    def __init__(self, loaded, device: torch.device, source: str | Path):
        self.loaded = loaded
        self.model, self.tokenizer, self.config = loaded.model, loaded.tokenizer, loaded.config
        self.device = device
        self.source = Path(source)
        check_sample(
            self.config.sample, f"{source}: config: sample" if source else "config: sample"
        )

    def options(self, **sampling) -> SamplingOptions:
        """The sampling options this model uses with those given (None: not given): the one
        rule of `GenerationRequest.options` (the paper's per tokenizer, then the model's own)."""
        request = GenerationRequest.build(**sampling)
        return request.options(self.tokenizer.name, self.config.sample)

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
        request: GenerationRequest | int | None = None,
        *,
        prompt: Prompt | Sequence[Prompt] | None = None,
        only_continuation: bool = False,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        generator: torch.Generator | None = None,
        **fields,
    ) -> Iterator[Music]:
        """THE generation path: the pieces of `request` (a `GenerationRequest`, or `num` with
        its fields as keywords: `bars`, `seed`, `temperature`, `chords`, ...) from scratch, or
        continuing `prompt`, or one of `num` prompts each, from one seed, yielded a batch at a
        time so that a caller can write each before the next starts. Everything is checked
        before the first piece. `generator`: one random stream over many calls (`evaluate
        style`; the seed is then only recorded)."""
        if not isinstance(request, GenerationRequest):
            name = "bars" if prompt is None else "new_bars"
            num = {} if request is None else {"num": request}
            request = GenerationRequest.build(name, **num, **fields)
        elif fields:
            raise MusicgenError(f"{next(iter(fields))}: give it in the request, not beside it")
        request.check_model(self.tokenizer)
        prompts = self._prompts(request.num, prompt, request.chords)
        _check_hooks(progress, cancel, grammar_wrap)
        request = request.seeded()
        options = request.options(self.tokenizer.name, self.config.sample)
        request, prompts, controls = self._controls(request, prompts)
        feeds = [[self.tokenizer.bos_id] if p is None else list(p.ids) for p in prompts]
        longest = max(len(f) for f in feeds)
        default = GENERATE_MAX_TOKENS if prompt is None else CONTINUE_MAX_TOKENS
        max_new = self._fit(longest, request.max_new(default))
        gen = generator if generator is not None else self.generator(request.seed)
        hooks = (progress, cancel, grammar_wrap, controls)
        return self._batches(
            request, prompts, feeds, options, max_new, gen, hooks, only_continuation
        )

    def _controls(self, request, prompts) -> tuple[GenerationRequest, list, Controls]:
        """What the request forces, for the rules (`generation.rules`): a form's phrases
        (`_form`) and the chords (over the form's phrases where given per phrase). The one
        place the CLI, the studio and `evaluate` get their controls."""
        sections: tuple = ()
        if request.form is not None:
            request, prompts, phrases = self._form(request, prompts)
            sections = tuple(form_sections(self.tokenizer, phrases))
            if isinstance(request.chords, SectionChords):  # the song's chords, bar by bar
                request = request.settled(chords=request.chords.over(phrases))
        plan = None
        if request.chords is not None:
            plan = chord_plan(
                self.tokenizer, request.chords, prompts[0], request.grammar, bool(sections)
            )
        return request, prompts, Controls(sections, plan)

    def _form(self, request, prompts) -> tuple[GenerationRequest, list, list]:
        """A form's phrases drawn or read, its tokens put in each prompt's bars, as many new
        bars as it has left where the request gives no `bars` (more is an error: the form ends
        the song); refused without the grammar or section tokens, and a phrase over the
        longest the section tokens write."""
        if not request.grammar:
            raise MusicgenError(
                "form and grammar: a form needs the grammar's masking, which is off"
            )
        if not self.tokenizer.section_mask().any():  # before `auto` looks for forms.json
            raise MusicgenError("form: this model has no section tokens (no form control)")
        phrases = checked_phrases(resolve(request.form, self.source, request.seed))
        held = max((p.bars for p in prompts if p is not None), default=0)
        left = total_bars(phrases) - held
        if left < 1:
            raise MusicgenError(f"form: its {total_bars(phrases)} bars end inside the prompt")
        if request.bars is not None and request.bars > left:
            name = "new_bars" if any(p is not None for p in prompts) else "bars"
            raise MusicgenError(
                f"{name}: {request.bars} asked, but the form {form_text(phrases)} leaves {left} "
                "new bars (leave it out with a form, or give fewer)"
            )
        request = request.settled(bars=left) if request.bars is None else request
        prompts = [
            None if p is None else replace(p, ids=with_form(self.tokenizer, p.ids, phrases))
            for p in prompts
        ]
        return request, prompts, phrases

    def _batches(self, request, prompts, feeds, options, max_new, gen, hooks, only_continuation):
        """The pieces, one batch of `request.batch_size` at a time (`pieces`)."""
        progress, cancel, grammar_wrap, controls = hooks
        size = request.batch_size
        steps = max(len(f) for f in feeds) - 1 + max_new  # decoding steps of one batch (at most)
        starts = range(0, request.num, size)
        for k, first in enumerate(starts):
            part = slice(first, first + size)
            done = None if progress is None else _offset(progress, k * steps, len(starts) * steps)
            results = generate(
                self.model, self.tokenizer, feeds[part], options, max_new_tokens=max_new,
                bars=request.bars, generator=gen, progress=done,
                first_allowed=[None if p is None else p.first_allowed for p in prompts[part]],
                cancel=cancel, grammar_wrap=grammar_wrap, controls=controls,
            )  # fmt: skip
            for res, p in zip(results, prompts[part], strict=True):
                music = self.music(res, request.seed, p, only_continuation, request.legato)
                kept = None if p is None or only_continuation else p  # its file's chords
                finish(music.score, request, written=(self.tokenizer, music.ids, kept))
                yield music

    @staticmethod
    def _prompts(num: int, prompt, chords) -> list[Prompt | None]:
        """The prompt of each of the `num` pieces (None: from scratch)."""
        if prompt is None or isinstance(prompt, Prompt):
            return [prompt] * (num if isinstance(num, int) and num > 0 else 1)
        if not isinstance(prompt, (list, tuple)) or not all(isinstance(p, Prompt) for p in prompt):
            raise MusicgenError(f"prompt: must be a Prompt (Model.prompt(path)), got {prompt!r}")
        if len(prompt) != num:
            raise MusicgenError(f"prompt: {len(prompt)} prompts for num={num} pieces")
        if chords is not None:
            raise MusicgenError("chords: give one prompt, not a list, with a chord progression")
        return list(prompt)

    def music(
        self,
        res: Generated,
        seed: int | None,
        prompt: Prompt | None = None,
        only_continuation: bool = False,
        legato: bool = True,
    ) -> Music:
        """A sampled sequence as a piece; with a prompt, its notes are kept as the prompt module
        promises (and dropped again with `only_continuation`: the ids are then those of the
        continuation alone, `[BOS, *solo_lead, *continuation]`, which decode to it). With
        `legato`, the new melody notes are joined across a sixteenth's rest (`hold_melody`)."""
        score = self.tokenizer.decode(res.ids)
        ids, prompt_len = list(res.ids), res.prompt_len
        if prompt is not None:
            score = merge(prompt, score)
        cut = 0 if prompt is None else prompt.end_tick
        new_notes = sum(n.time >= cut for t in score.tracks for n in t.notes)
        if new_notes == 0:  # returned and written all the same: the caller hears it
            warnings.warn(f"seed {seed}: the new part has no note", EmptyPiece, stacklevel=2)
        if legato:
            hold_melody(score, cut)
        if prompt is not None:
            if only_continuation:
                score = continuation_only(prompt, score)
                ids = [self.tokenizer.bos_id, *prompt.solo_lead, *res.continuation]
                prompt_len = 1 + len(prompt.solo_lead)
            apply_tempo(score, prompt.tempo)
        return Music(score, ids, prompt_len, res.stop, res.sampled, res.errors, seed,
                     new_notes=new_notes)  # fmt: skip

    def generate(self, bars: int | None | EllipsisType = ..., **fields) -> Music:
        """One piece from scratch: `bars` bars (None: until the end token or `max_tokens`; left
        out: the form's bars with a `form`, else 16); `fields`: the other `GenerationRequest`
        fields and the hooks of `pieces`."""
        return self.generate_many(1, bars, **fields)[0]

    def generate_many(
        self, num: int, bars: int | None | EllipsisType = ..., **fields
    ) -> list[Music]:
        """`num` pieces from scratch from one seed (`pieces`; `bars` as in `generate`)."""
        if bars is ...:
            bars = None if fields.get("form") is not None else SCRATCH_BARS
        return list(self.pieces(num, bars=bars, **fields))

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

    def continue_midi(self, path: str | Path, bars: int | None = None, **fields) -> Music:
        """One continuation of a MIDI file (the arguments of `continue_many`)."""
        return self.continue_many(path, 1, bars, **fields)[0]

    def continue_many(
        self,
        path: str | Path,
        num: int,
        bars: int | None = None,
        *,
        prompt_bars: tuple[int, int] | None = None,
        seconds: float | None = None,
        new_bars: int | None = None,
        only_continuation: bool = False,
        extend: bool = False,
        progress: Progress | None = None,
        cancel=None,
        grammar_wrap: GrammarWrap | None = None,
        **fields,
    ) -> list[Music]:
        """`num` continuations of the prompt `self.prompt(path, bars, prompt_bars=, seconds=)`:
        the prompt, then what the model writes: `new_bars` bars (None: until the end token or
        `max_tokens`, default 1024 ids); `fields`: the other `GenerationRequest` fields.
        `extend`: the whole file, then `new_bars` bars after its last (`generation.api.extend`)."""
        request = GenerationRequest.build("new_bars", num=num, bars=new_bars, **fields)
        _check_hooks(progress, cancel, grammar_wrap)  # both before the file is read
        if extend is not False:
            return extend_many(self, path, request, bars=bars, prompt_bars=prompt_bars,
                               seconds=seconds, only_continuation=only_continuation,
                               hooks=(progress, cancel, grammar_wrap), extend=extend)  # fmt: skip
        prompt = self.prompt(path, bars, prompt_bars=prompt_bars, seconds=seconds)
        hooks = {"progress": progress, "cancel": cancel, "grammar_wrap": grammar_wrap}
        return list(self.pieces(request, prompt=prompt, only_continuation=only_continuation,
                                **hooks))  # fmt: skip

    regenerate = regenerate_bars  # bars (a, b) or a section of a file written again

    score = score_song  # mean NLL per token and per note of a song (`generation.api.scoring`)
    nll = ids_nll  # the NLL of each id after the first


def checked_phrases(phrases: list) -> list:
    """A form's phrases, each within the longest phrase the section tokens write (a longer
    one was written as that length: `A40` wrote the marker `A32`)."""
    from musicgen.tokenizers.form import MAX_SECTION_BARS, form_text

    for p in phrases:
        if p.bars > MAX_SECTION_BARS:
            raise MusicgenError(
                f"form: phrase {form_text([p])} is longer than the {MAX_SECTION_BARS} bars a "
                f"phrase may have; split it (e.g. {p.label}{MAX_SECTION_BARS}"
                f"{p.label}{p.bars - MAX_SECTION_BARS})"
            )
    return phrases


def _check_hooks(progress, cancel, grammar_wrap) -> None:
    if progress is not None and not callable(progress):
        raise MusicgenError(f"progress: must be a function progress(done, total), got {progress!r}")
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise MusicgenError(f"cancel: must have is_set() (a threading.Event), got {cancel!r}")
    if grammar_wrap is not None and not callable(grammar_wrap):
        raise MusicgenError(
            f"grammar_wrap: must be a function (grammar, ids), got {grammar_wrap!r}"
        )


def _offset(progress: Progress, before: int, total: int) -> Progress:
    """One batch's progress(done, steps) as the whole call's progress(before + done, total)."""
    return lambda done, _steps: progress(before + done, total)


def load(checkpoint: str | Path, device: str = "cpu", int8: bool = False) -> Model:
    """A model from a model folder, a `.pt` checkpoint, a run folder or a shipped model's name
    (`pop909_sine_spe_gated`). `device`: cpu | auto | cuda | cuda:N | mps. `int8`: weight-only
    int8 generation steps on the CPU (`Performer.use_int8`; docs/generation.md, "Speed")."""
    from musicgen.checkpoint import load_checkpoint
    from musicgen.device import pick_device
    from musicgen.resources import resolve_checkpoint

    path = resolve_checkpoint(checkpoint)
    if not path.exists():
        raise MusicgenError(f"{checkpoint}: checkpoint not found (nor a shipped model's name)")
    dev = pick_device(device)
    loaded = load_checkpoint(path, dev)
    if int8:
        if not hasattr(loaded.model, "use_int8"):
            raise MusicgenError(f"{checkpoint}: int8: only the Performer's step has an int8 form")
        loaded.model.use_int8()
    return Model(loaded, dev, path)
