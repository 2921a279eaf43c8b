"""What a stopped job had written: the studio's Stop keeps the bars already sampled.

The sampler ends a cancelled call with `Cancelled` and returns nothing (the API's contract:
nothing is written for pieces not finished). A musician who presses Stop expects the bars they
have heard appear to keep, so the studio records every row's ids as the sampler accepts them,
through the API's own `grammar_wrap` hook (`Recorder`), and on Stop turns each row into a piece:
its whole bars (the bar being written is dropped) closed by the grammar's completion, decoded
by `Model.music` exactly as a finished piece is.
"""

from __future__ import annotations

from dataclasses import dataclass

from musicgen.generation.api import Model, Music
from musicgen.generation.api.prompt import Prompt
from musicgen.generation.decoding.sample import Generated


class _Tape:
    """A grammar that also keeps the ids it is advanced over (the row's sequence so far)."""

    def __init__(self, grammar, ids: list[int]):
        self._inner, self.ids = grammar, [int(t) for t in ids]

    def advance(self, token_id: int) -> bool:
        self.ids.append(int(token_id))
        return self._inner.advance(token_id)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


class Recorder:
    """A `grammar_wrap` (the generation API's hook) that changes nothing and records each
    row's ids: the sampler builds one grammar per row in row order, and again for a row that
    it cuts at its last bar (which then ends), so the first `rows` tapes are the rows and a
    later tape replaces the row whose ids it starts."""

    def __init__(self) -> None:
        self.tapes: list[_Tape] = []

    def __call__(self, grammar, ids) -> _Tape:
        tape = _Tape(grammar, list(ids))
        self.tapes.append(tape)
        return tape

    def rows(self, count: int) -> list[list[int]]:
        """The ids of the first `count` rows as they stand."""
        rows = [list(t.ids) for t in self.tapes[:count]]
        taken: set[int] = set()
        for tape in self.tapes[count:]:  # a row cut at a bar and closed: its final ids
            for k, ids in enumerate(rows):
                if k not in taken and ids[: len(tape.ids)] == tape.ids[: len(ids)]:
                    rows[k], _ = list(tape.ids), taken.add(k)
                    break
        return rows


@dataclass
class Kept:
    """A stopped row as a piece, and how many whole new bars it holds."""

    music: Music
    bars: int


def kept_pieces(
    model: Model, recorder: Recorder, count: int, seed: int | None, prompt: Prompt | None
) -> list[Kept]:
    """The pieces the first `count` rows had written when the job stopped."""
    first = [model.tokenizer.bos_id] if prompt is None else list(prompt.ids)
    return [_keep(model, ids, len(first), seed, prompt) for ids in recorder.rows(count)]


def _keep(model: Model, ids: list[int], prompt_len: int, seed, prompt) -> Kept:
    """One row's whole bars, closed validly and decoded as the API decodes a piece."""
    tok = model.tokenizer
    base = _bars_before(tok, ids[:prompt_len])
    if not _finished(tok, ids):
        starts = [s for s in _bar_starts(tok, ids) if s >= prompt_len]
        ids = ids[: starts[-1]] if starts else ids[:prompt_len]  # the bar being written goes
        grammar = _replay(tok, ids)
        ids = ids + [int(t) for t in grammar.completion()]
    res = Generated(ids=ids, prompt_len=prompt_len, sampled=len(ids) - prompt_len, stop="stopped")
    bars = max(len(_bar_starts(tok, ids)) - base, 0)
    return Kept(model.music(res, seed, prompt), bars)


def _replay(tok, ids: list[int]):
    grammar = tok.grammar()
    for t in ids:
        grammar.advance(int(t))
    return grammar


def _finished(tok, ids: list[int]) -> bool:
    return bool(ids) and (ids[-1] == tok.eos_id or _replay(tok, ids).finished())


def _bar_starts(tok, ids: list[int]) -> list[int]:
    counter = tok.bar_counter()
    for t in ids:
        counter.push(int(t))
    return [int(s) for s in counter.starts]


def _bars_before(tok, prompt: list[int]) -> int:
    """Bars the prompt holds (a prompt that ends by opening a bar leaves that bar to the
    model: the sampler's own count)."""
    starts = _bar_starts(tok, prompt)
    opened = len(starts) > 0 and starts[-1] >= len(prompt) - 1 and len(prompt) > 1
    return len(starts) - int(opened)
