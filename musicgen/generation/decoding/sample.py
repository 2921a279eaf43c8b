"""Sampling: the batched, grammar-masked decoding loop over the pure filters of
`decoding.filters` (re-exported here), each row steered by its rules (`decoding.steer`).
Decoding goes through the model's step API (`init_state` / `step`): one token costs the same at
position 10 and 4000, and several samples run as one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from musicgen.errors import Cancelled, MusicgenError, check_int
from musicgen.generation.api.options import SamplingOptions
from musicgen.generation.decoding.draw import draw
from musicgen.generation.decoding.filters import (  # noqa: F401 (re-exported: the sampler's one import)
    NEG_INF,
    apply_temperature,
    choose_within,
    filter_logits,
    greedy_filter,
    mask_disallowed,
    sample_from_logits,
    top_k_filter,
    top_p_filter,
)
from musicgen.generation.decoding.guidance import LabelLag, guide
from musicgen.generation.decoding.steer import Steered
from musicgen.generation.rules import Controls
from musicgen.tokenizers.base import Grammar, Tokenizer
from musicgen.tokenizers.recall import RecallContext, has_recall

__all__ = ["Generated", "SamplingOptions", "generate", "invalid_rate"]


# ---------------------------------------------------------------------------------------------
# the decoding loop


@dataclass
class Generated:
    """One finished sequence: prompt ids, then sampled ids, then the grammar completion."""

    ids: list[int]
    prompt_len: int
    sampled: int = 0  # ids drawn from the model (kept after a bar cut)
    completion: int = 0  # ids appended by grammar.completion()
    errors: int = 0  # sampled ids the grammar rejected (only possible with masking off)
    stop: str = ""  # end | max_tokens | bars
    bar_base: int = field(default=0, repr=False)
    bars: object = field(default=None, repr=False)  # the tokenizer's BarCounter over `ids`

    @property
    def continuation(self) -> list[int]:
        return self.ids[self.prompt_len :]


GrammarWrap = Callable[[Grammar, list[int]], Grammar]  # (grammar after ids, ids) -> grammar
Progress = Callable[[int, int], None]  # (steps done, steps in all)


def _check_prompt(tokenizer: Tokenizer, prompt: list[int], what: str):
    """Advance a fresh grammar over the prompt; a rejected id or a closed prompt is an error."""
    grammar = tokenizer.grammar()
    for k, tok in enumerate(prompt):
        if not 0 <= tok < tokenizer.vocab_size:
            raise MusicgenError(f"{what}: id {tok} at {k} is outside the vocabulary")
        if not grammar.advance(int(tok)):
            name = tokenizer.token_name(int(tok))
            raise MusicgenError(f"{what}: not a valid prefix (token {k} '{name}' not allowed)")
    if grammar.finished():
        raise MusicgenError(f"{what}: the prompt already ends with the end token")
    return grammar


def _replay(tokenizer: Tokenizer, ids: list[int]):
    grammar = tokenizer.grammar()
    for tok in ids:
        grammar.advance(int(tok))
    return grammar


@torch.inference_mode()
def generate(
    model: torch.nn.Module,
    tokenizer: Tokenizer,
    prompts: list[list[int]],
    options: SamplingOptions,
    max_new_tokens: int,
    bars: int | None = None,
    generator: torch.Generator | None = None,
    progress: Progress | None = None,
    first_allowed: np.ndarray | list[np.ndarray | None] | None = None,
    cancel=None,
    grammar_wrap: GrammarWrap | None = None,
    controls: Controls | None = None,
) -> list[Generated]:
    """Continue every prompt (at least [BOS]) in one batch until each ends.

    A sequence ends when it emits the end token, when it has drawn `max_new_tokens` ids, or (with
    `bars`) when a bar beyond `bars` new bars begins (that bar's first ids are cut off). On the two
    last, `grammar.completion()` is appended so the sequence still ends validly. Prompts may differ
    in length: a sequence is fed its prompt (teacher forcing) and samples only past it. Finished
    sequences keep stepping with padding but their output no longer changes. `first_allowed`
    (bool[vocab], or a list of one per prompt) narrows the grammar for each sequence's first
    sampled id (a prompt cut inside a bar: `Prompt.first_allowed`); like the grammar, it
    applies only with masking on. `progress(done, total)` is called after every decoding step
    (with `bars`, the share of bars written, in steps); `cancel` (anything with `is_set()`) is
    checked before every step and raises `Cancelled` once set; `grammar_wrap(grammar, ids)`
    replaces each sequence's grammar (advanced over `ids`) by the `Grammar` it returns;
    `controls`: what the request forces, for the rules (`generation.rules`). With
    `options.guidance`, each piece runs beside its shadow.
    """
    if not prompts or any(len(p) == 0 for p in prompts):
        raise MusicgenError("generate: every prompt needs at least one id (BOS)")
    check_int("max_tokens", max_new_tokens, 1)
    model.eval()
    device = next(model.parameters()).device
    start = _Start(tokenizer, options, controls or Controls(), grammar_wrap)
    rows = _start_rows(start, prompts, bars is not None, first_allowed)
    total_steps = max(len(p) for p in prompts) - 1 + max_new_tokens
    lag = LabelLag.start(tokenizer, options.guidance, len(rows))  # None without guidance
    state = model.init_state(len(rows) * (2 if lag else 1), device, generator=generator)
    feed = _feed([p[0] for p in prompts], lag, device)  # [B] (or [2B]: then the shadows)
    pos = 0  # position of the id being fed
    while any(r.active for r in rows):
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"cancel: generation cancelled after {pos} of {total_steps} steps")
        logits, state = model.step(feed, state)  # [B or 2B, V]: the distribution of id pos + 1
        if lag is not None:
            logits = guide(logits, options.guidance)  # [B, V]
        pos += 1
        sampling = [r.active and pos >= len(r.seq) for r in rows]
        if any(sampling):
            drawn = draw(logits, rows, sampling, options, tokenizer.vocab_size, generator)
            for row, tok in zip(rows, drawn, strict=True):
                if tok is not None:
                    row.accept(tokenizer, tok, bars, max_new_tokens)
        next_ids = [r.seq[pos] if r.active else tokenizer.pad_id for r in rows]
        feed = _feed(next_ids, lag, device)
        if progress is not None:
            progress(_steps_done(rows, pos, total_steps, bars), total_steps)
    return [r.out for r in rows]


@dataclass(frozen=True)
class _Start:
    """What every row of a call starts from (and a row cut at a bar starts again from)."""

    tokenizer: Tokenizer
    options: SamplingOptions
    controls: Controls
    wrap: GrammarWrap | None

    def steer(self, ids: list[int], checked: bool) -> Steered:
        """A grammar advanced over `ids` (`checked`: as a prompt, which must be a valid
        prefix), passed through the caller's `wrap`, with the rules started over the ids."""
        tok = self.tokenizer
        grammar = _check_prompt(tok, ids, "prompt") if checked else _replay(tok, ids)
        grammar = grammar if self.wrap is None else self.wrap(grammar, list(ids))
        return Steered.start(tok, self.options, self.controls, ids, grammar)


def _start_rows(
    start: _Start, prompts: list[list[int]], count_bars: bool, first_allowed
) -> list[_Row]:
    """One row per prompt, its grammar advanced over it and its first id narrowed."""
    rows = [_Row.start(start, list(p), count_bars) for p in prompts]
    for row, first in zip(rows, _per_row(first_allowed, len(rows)), strict=True):
        row.first = first
    return rows


def _feed(ids: list[int], lag: LabelLag | None, device) -> torch.Tensor:
    """The ids fed next, [B]; with guidance [2B]: the pieces', then their shadows'."""
    return torch.tensor(ids + (lag.shadow(ids) if lag else []), dtype=torch.long, device=device)


def _steps_done(rows: list[_Row], pos: int, total: int, bars: int | None) -> int:
    """Progress in steps: the steps made, or with `bars` the share of bars the slowest row has
    written (a bar stop usually ends far before the step cap, which would freeze a bar at a few
    per cent, then jump)."""
    if not any(r.active for r in rows):
        return total
    if bars is None:
        return min(pos, total - 1)  # recalled phrases are steps beyond the estimate
    written = min(
        1.0 if not r.active else (len(r.out.bars.starts) - r.out.bar_base) / bars for r in rows
    )
    return min(max(int(written * total), 0), total - 1)


def _per_row(first_allowed, n: int) -> list:
    """`first_allowed` as one mask (or None) per row: a list is taken as it is."""
    firsts = first_allowed if isinstance(first_allowed, list) else [first_allowed] * n
    if len(firsts) != n:
        raise MusicgenError(f"first_allowed: {len(firsts)} masks for {n} prompts")
    return firsts


@dataclass
class _Row:
    """One sequence of the batch while it is generated: its output, its grammar with its rules
    and whether it runs. With masking off the grammar still runs, to count errors (the invalid
    token rate). `seq` is what the model reads: the output's ids, and for a vocabulary with
    recall marks the recalled phrases (`tokenizers.recall`), which are never written."""

    out: Generated
    steer: Steered
    prompt_errors: int
    begin: _Start
    seq: list[int]
    recall: RecallContext | None = None
    active: bool = True
    first: np.ndarray | None = None  # bool[vocab]: what the first sampled id may be

    def allowed(self) -> np.ndarray:
        """The grammar's mask with the rules' `force`, narrowed by `first` while nothing is
        sampled yet, then by the grammar's and the rules' soft masks (`Steered.narrowed`)."""
        mask = self.steer.allowed()
        if self.first is not None and self.out.sampled == 0:
            mask &= self.first
        return self.steer.narrowed(mask)

    @classmethod
    def start(cls, begin: _Start, prompt: list[int], count_bars: bool) -> _Row:
        steer = begin.steer(prompt, begin.options.grammar)
        out = Generated(ids=[int(t) for t in prompt], prompt_len=len(prompt))
        if count_bars:  # bar starts are counted as ids arrive: constant work per token
            out.bars = begin.tokenizer.bar_counter()
            for tok in out.ids:
                out.bars.push(tok)
            starts = out.bars.starts
            # a prompt that ends by opening a bar (REMI's lead-in `Bar`) leaves that bar to the
            # model: it is the first new bar, not a prompt bar
            opened = len(starts) > 0 and int(starts[-1]) >= len(out.ids) - 1 and len(out.ids) > 1
            out.bar_base = len(starts) - int(opened)
        recall = RecallContext(begin.tokenizer) if has_recall(begin.tokenizer) else None
        seq = list(out.ids) if recall is None else recall.build(out.ids)[0].tolist()
        return cls(out, steer, steer.errors, begin, seq, recall)

    def accept(self, tokenizer: Tokenizer, tok: int, bars: int | None, max_new: int) -> None:
        """Append a sampled id; end the row on the end token, a bar past `bars` or `max_new`."""
        out = self.out
        self.steer.advance(tok)
        out.ids.append(tok)
        self.seq.append(tok)
        if self.recall is not None:
            self.seq += self.recall.push(tok)
        out.sampled += 1
        if out.bars is not None:
            out.bars.push(tok)
        out.errors = self.steer.errors - self.prompt_errors
        if self.steer.finished() or tok == tokenizer.eos_id:
            self.finish("end")
        elif bars is not None and _cut_at_bar(out, bars):
            self.steer = self.begin.steer(out.ids, False)
            out.errors = self.steer.errors - self.prompt_errors
            self.finish("bars")
        elif out.sampled >= max_new:
            self.finish("max_tokens")

    def finish(self, stop: str) -> None:
        """Stop the row; unless it ended by itself, append what the rules owe and the
        grammar's valid completion (`Steered.close`)."""
        self.out.stop, self.active = stop, False
        if stop == "end":
            return
        tail = self.steer.close()
        self.out.ids.extend(tail)
        self.out.completion = len(tail)


def _cut_at_bar(out: Generated, bars: int) -> bool:
    """If a bar past the allowed `bars` new bars has begun, drop its ids and return True."""
    starts = out.bars.starts
    limit = out.bar_base + bars
    if len(starts) <= limit:
        return False
    cut = max(int(starts[limit]), out.prompt_len)
    out.sampled -= len(out.ids) - cut
    del out.ids[cut:]
    return True


def invalid_rate(results: list[Generated]) -> float:
    """Grammar errors per sampled id over a set of sequences (the --no-grammar ablation)."""
    sampled = sum(r.sampled for r in results)
    return sum(r.errors for r in results) / max(sampled, 1)
