"""The sampler's repetition rule (`repeat`, `generation.rules.bar_copy`): which ids a
bar being copied may continue with, and what a generation with the rule does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_model_config
from paths import DATA

from musicgen.errors import MusicgenError
from musicgen.generation.decoding.sample import SamplingOptions, filter_logits, generate
from musicgen.generation.rules.bar_copy import LAGS, BarEcho
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer

SONG = DATA / "pop909" / "001" / "001.mid"


def real_bars(tok, count: int) -> list[list[int]]:
    """The first `count` non-empty bars of a real song, each from its opening id."""
    ids = tok.encode(SONG)
    starts = [int(s) for s in tok.bar_starts(np.asarray(ids))] + [len(ids)]
    bars = [ids[a:b] for a, b in zip(starts, starts[1:], strict=False)]
    bars = [b for b in bars if len(b) > 4 and tok.eos_id not in b]
    assert len(bars) >= count
    return bars[:count]


def test_a_copy_is_followed_id_by_id_to_its_end():
    tok = build_tokenizer("remi")
    a, *rest = real_bars(tok, 5)
    echo = BarEcho(tok, [tok.bos_id] + [t for bar in [a, *rest[:3]] for t in bar])
    for k, tok_id in enumerate(a):  # bar 5 copies bar 1 (4 back) id by id
        echo.push(tok_id)
        want = a[k + 1] if k + 1 < len(a) else rest[0][0]  # after the whole bar: the next opens
        assert want in echo.next_ids()


def test_one_id_no_candidate_has_ends_the_bonus_until_the_next_bar():
    tok = build_tokenizer("remi")
    bars = real_bars(tok, 5)
    a = bars[0]
    echo = BarEcho(tok, [tok.bos_id] + [t for bar in bars[:4] for t in bar])
    echo.push(a[0])  # a new bar (bar 5): bar 1 (4 back) is the candidate
    assert echo.next_ids() == [a[1]]
    stray = next(t for t in bars[4][1:] if t != a[1])
    echo.push(stray)
    assert echo.next_ids() == []


def test_the_bars_1_and_2_back_are_no_candidates():
    """Only the phrase lags: a bar that starts like the bar before gets no help to copy it."""
    tok = build_tokenizer("remi")
    a, b = real_bars(tok, 2)
    echo = BarEcho(tok, [tok.bos_id, *a, *b])
    for tok_id in b:  # bar 3 copies bar 2 (1 back)
        echo.push(tok_id)
        assert echo.next_ids() == []


def test_candidates_reach_back_the_lags_only():
    tok = build_tokenizer("remi")
    bars = real_bars(tok, max(LAGS) + 2)
    ids = [tok.bos_id] + [t for bar in bars[:-1] for t in bar]
    echo = BarEcho(tok, ids)
    echo.push(bars[-1][0])
    full = [*ids, bars[-1][0]]
    starts = [int(s) for s in tok.bar_starts(np.asarray(full))]
    assert len(starts) == max(LAGS) + 2
    wanted = {full[starts[-1 - lag] + 1] for lag in LAGS}
    assert set(echo.next_ids()) == wanted


def test_the_bonus_is_added_after_the_temperature_and_before_the_mask():
    logits = torch.zeros(2, 4)
    bonus = torch.tensor([[0, 0, 0, 0], [0, 2.0, 0, 2.0]])
    allowed = torch.tensor([[True] * 4, [True, True, True, False]])
    out = filter_logits(logits, SamplingOptions(temperature=2.0), allowed, bonus)
    assert out[1, 1] == 2.0 and out[1, 3] == float("-inf") and out[0].eq(0).all()


def test_a_strong_bonus_makes_every_new_bar_a_copy_of_the_prompts():
    """An untrained model (random logits) continues four real bars with 50 nats for the copy:
    each of the 3 new bars equals the bar 4 back id for id; without the rule they differ. The
    grammar still holds."""
    tok = build_tokenizer("remi")
    bars = real_bars(tok, 4)
    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size, "ape")).eval()

    def new_bars(repeat: float) -> list[list[list[int]]]:
        opts = SamplingOptions(temperature=1.0, repeat=repeat)
        # ends by opening bar 5: the model writes it
        prompt = [tok.bos_id, *[t for bar in bars for t in bar], bars[0][0]]
        res = generate(model, tok, [prompt] * 3, opts, 600, bars=3,
                       generator=torch.Generator().manual_seed(0))  # fmt: skip
        out = []
        for r in res:
            grammar = tok.grammar()
            assert all(grammar.advance(t) for t in r.ids) and grammar.finished()
            ids = r.ids[r.prompt_len - 1 : r.prompt_len + r.sampled]
            starts = [int(s) for s in tok.bar_starts(np.asarray(ids))] + [len(ids)]
            out.append([ids[a:b] for a, b in zip(starts, starts[1:], strict=False)])
        return out

    for new in new_bars(50.0):
        assert new == bars[:3]
    assert all(new[0] != bars[0] for new in new_bars(0.0))


def test_repeat_out_of_range_is_an_error():
    with pytest.raises(MusicgenError, match="^repeat: must be >= 0"):
        SamplingOptions(repeat=-1).validate()
    with pytest.raises(MusicgenError, match="^repeat: must be a number"):
        SamplingOptions(repeat="2").validate()
