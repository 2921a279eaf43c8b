"""Sampler filters on hand-made distributions; the grammar guarantee on untrained tiny models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import symusic
import torch
from conftest import tiny_model_config
from grammars import ValidityOnly
from paths import DATA

from musicgen.config import ModelConfig, PerceiverConfig
from musicgen.errors import Cancelled, MusicgenError
from musicgen.generation.api.request import default_options
from musicgen.generation.decoding.sample import (
    SamplingOptions,
    apply_temperature,
    choose_within,
    filter_logits,
    generate,
    invalid_rate,
    mask_disallowed,
    sample_from_logits,
    top_k_filter,
    top_p_filter,
)
from musicgen.measures.metrics import duplicate_note_rate, load_notes
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer
from musicgen.tokenizers.base import Grammar

INF = float("inf")


def logits_of(*probs: float) -> torch.Tensor:
    """A [1, V] row of logits whose softmax is exactly `probs` (up to float rounding)."""
    return torch.tensor([[math.log(p) for p in probs]])


def kept(logits: torch.Tensor) -> list[list[bool]]:
    return torch.isfinite(logits).tolist()


def test_temperature_scales_logits_and_sharpens():
    x = torch.tensor([[2.0, 1.0, -1.0]])
    assert torch.equal(apply_temperature(x, 2.0), torch.tensor([[1.0, 0.5, -0.5]]))
    hot, cold = torch.softmax(x / 2.0, -1), torch.softmax(x / 0.5, -1)
    assert cold[0, 0] > torch.softmax(x, -1)[0, 0] > hot[0, 0]
    with pytest.raises(ValueError):
        apply_temperature(x, 0.0)


def test_top_k_keeps_exactly_the_k_largest_per_row():
    x = torch.tensor([[0.1, 3.0, 2.0, -1.0], [5.0, 4.0, 3.0, 2.0]])
    assert kept(top_k_filter(x, 2)) == [[False, True, True, False], [True, True, False, False]]
    out = top_k_filter(x, 2)
    assert out[0, 1] == 3.0 and out[1, 0] == 5.0  # kept values are unchanged
    assert torch.equal(top_k_filter(x, 0), x) and torch.equal(top_k_filter(x, 4), x)


def test_top_p_keeps_the_smallest_set_reaching_p():
    x = logits_of(0.1, 0.5, 0.05, 0.35)  # sorted: 0.5, 0.35, 0.1, 0.05
    assert kept(top_p_filter(x, 0.3)) == [[False, True, False, False]]  # top id always kept
    assert kept(top_p_filter(x, 0.7)) == [[False, True, False, True]]  # 0.5 + 0.35 >= 0.7
    assert kept(top_p_filter(x, 0.9)) == [[True, True, False, True]]  # 0.95 >= 0.9
    assert kept(top_p_filter(x, 0.97)) == [[True, True, True, True]]
    probs = torch.softmax(top_p_filter(x, 0.7), -1)
    assert torch.allclose(probs, torch.tensor([[0.0, 0.5 / 0.85, 0.0, 0.35 / 0.85]]))


def test_top_p_is_per_row():
    x = torch.cat([logits_of(0.6, 0.3, 0.1), logits_of(0.2, 0.3, 0.5)])
    assert kept(top_p_filter(x, 0.8)) == [[True, True, False], [False, True, True]]


def test_grammar_mask_comes_before_top_k_and_top_p():
    x = logits_of(0.7, 0.2, 0.06, 0.04)
    allowed = torch.tensor([[False, False, True, True]])
    # without the mask, top-1 would keep only id 0 and then the mask would leave nothing
    out = filter_logits(x, SamplingOptions(temperature=1.0, top_k=1), allowed)
    assert kept(out) == [[False, False, True, False]]
    out = filter_logits(x, SamplingOptions(temperature=1.0, top_p=0.5), allowed)
    assert kept(out) == [[False, False, True, False]]  # renormalised: 0.6, 0.4
    assert torch.allclose(torch.softmax(out, -1), torch.tensor([[0.0, 0.0, 1.0, 0.0]]))


def test_mask_with_nothing_allowed_leaves_the_row():
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0]])
    allowed = torch.tensor([[False, False], [True, False]])
    assert kept(mask_disallowed(x, allowed)) == [[True, True], [True, False]]


def test_combined_filters_give_exact_probabilities():
    x = logits_of(0.4, 0.3, 0.2, 0.1)
    # T = 1, top-k 3 -> 0.4, 0.3, 0.2 renormalised; then top-p 0.7 on those: 4/9 + 3/9 >= 0.7
    out = filter_logits(x, SamplingOptions(temperature=1.0, top_k=3, top_p=0.7))
    assert torch.allclose(torch.softmax(out, -1), torch.tensor([[4 / 7, 3 / 7, 0.0, 0.0]]))
    # T = 0.5 squares the probabilities: 16, 9, 4, 1 (/30)
    out = filter_logits(x, SamplingOptions(temperature=0.5))
    assert torch.allclose(torch.softmax(out, -1), torch.tensor([[16, 9, 4, 1]]) / 30.0)


def test_a_choice_bonus_moves_probability_only_inside_its_group():
    """`choose_within`: the bonus reorders the group (ids 2-5: "another note", the pitches) by
    its nats, while the group's total and the ids outside it (0, 1: "the next position") keep
    their probabilities; a group with no probability takes the bonus as it is."""
    x = logits_of(0.3, 0.2, 0.2, 0.1, 0.1, 0.1)
    group = torch.tensor([[False, False, True, True, True, True]])
    bonus = torch.tensor([[0.0, 0.0, 0.0, 2.0, 2.0, 0.0]])
    before, after = torch.softmax(x, -1), torch.softmax(choose_within(x, bonus, group), -1)
    assert torch.allclose(after[0, :2], before[0, :2])
    assert torch.isclose(after[0, 2:].sum(), before[0, 2:].sum())
    assert torch.isclose(after[0, 3] / after[0, 5], math.e**2 * before[0, 3] / before[0, 5])
    empty = x.masked_fill(group, float("-inf"))
    assert torch.equal(choose_within(empty, bonus, group), empty + bonus)


def test_a_choice_keeps_the_allowed_group_probability_through_the_filters():
    """In `filter_logits` the choice comes after the temperature and is measured among the
    allowed ids: masked, the group (2, 3) keeps what the tempered, masked distribution gave it."""
    x = logits_of(0.3, 0.2, 0.2, 0.1, 0.1, 0.1)
    allowed = torch.tensor([[True, False, True, True, False, True]])
    group = torch.tensor([[False, False, True, True, True, False]])
    choice = (torch.tensor([[0.0, 0.0, 0.0, 3.0, 3.0, 0.0]]), group)
    options = SamplingOptions(temperature=0.8)
    plain = torch.softmax(filter_logits(x, options, allowed), -1)
    chosen = torch.softmax(filter_logits(x, options, allowed, choice=choice), -1)
    assert torch.isclose(chosen[0, 2:4].sum(), plain[0, 2:4].sum())
    assert torch.allclose(chosen[0, [0, 5]], plain[0, [0, 5]])
    assert chosen[0, 3] > plain[0, 3] and chosen[0, 4] == 0


def test_greedy_picks_the_best_allowed_id():
    x = logits_of(0.7, 0.2, 0.06, 0.04)
    allowed = torch.tensor([[False, True, True, True]])
    out = filter_logits(x, SamplingOptions(temperature=0.0), allowed)
    assert kept(out) == [[False, True, False, False]]
    assert sample_from_logits(out).tolist() == [1]


def test_sampling_follows_the_filtered_distribution_and_is_seeded():
    x = logits_of(0.4, 0.3, 0.2, 0.1).expand(20000, 4)
    out = filter_logits(x, SamplingOptions(temperature=1.0, top_k=2))
    draws = sample_from_logits(out, torch.Generator().manual_seed(0))
    assert set(draws.tolist()) == {0, 1}
    freq = (draws == 0).float().mean().item()
    assert abs(freq - 4 / 7) < 0.02  # 20000 draws: std ~0.0035
    again = sample_from_logits(out, torch.Generator().manual_seed(0))
    assert torch.equal(draws, again)


@pytest.mark.parametrize(
    "options, message",
    [
        (SamplingOptions(temperature=-0.1), "^temperature: "),
        (SamplingOptions(top_k=-1), "^top_k: "),
        (SamplingOptions(top_p=0.0), "^top_p: "),
        (SamplingOptions(top_p=1.5), "^top_p: "),
        (SamplingOptions(min_tokens=-1), "^min_tokens: "),
    ],
)
def test_options_out_of_range_are_errors(options, message):
    with pytest.raises(MusicgenError, match=message):
        options.validate()


def test_paper_defaults():
    remi, groove = default_options("remi"), default_options("groove")
    assert (remi.temperature, remi.top_p, remi.top_k) == (1.2, 0.9, 0)
    assert (groove.temperature, groove.top_p, groove.top_k) == (0.6, 1.0, 0)
    given = default_options("remi", temperature=1, top_p=None, grammar=False)  # None: not given
    assert (given.temperature, given.top_p, given.grammar) == (1.0, 0.9, False)
    with pytest.raises(MusicgenError, match="^colour: unknown option"):
        default_options("remi", colour=2)


def test_a_models_own_defaults_sit_between_the_papers_and_the_callers():
    """config `sample` replaces the paper's setting where it says something (None keeps it);
    what a caller gives replaces both."""
    own = {"temperature": 1.0, "top_k": None, "top_p": None}
    opts = default_options("remi", own)
    assert (opts.temperature, opts.top_p, opts.top_k) == (1.0, 0.9, 0)
    opts = default_options("remi", own, temperature=1.3, top_k=8)
    assert (opts.temperature, opts.top_p, opts.top_k) == (1.3, 0.9, 8)


# ---------------------------------------------------------------------------------------------
# the decoding loop on untrained tiny models (random logits: the worst case for the grammar)


def tiny_model(tokenizer, pe: str = "ape", seed: int = 0):
    cfg = tiny_model_config(tokenizer.vocab_size, pe)
    torch.manual_seed(seed)
    return build_model(cfg).eval()


@pytest.mark.parametrize("name", ["remi", "groove"])
def test_grammar_masking_makes_every_sample_valid(name, tmp_path):
    tok = build_tokenizer(name)
    model = tiny_model(tok)
    gen = torch.Generator().manual_seed(1)
    results = []
    for _ in range(4):
        results += generate(
            model,
            tok,
            [[tok.bos_id]] * 50,
            SamplingOptions(temperature=1.0),
            max_new_tokens=96,
            generator=gen,
        )
    assert len(results) == 200
    with_notes = 0
    for k, res in enumerate(results):
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in res.ids) and grammar.finished(), res.ids
        assert res.errors == 0 and res.sampled <= 96 and res.ids[0] == tok.bos_id
        assert res.stop in ("end", "max_tokens")
        assert len(res.ids) == 1 + res.sampled + res.completion
        path = tmp_path / f"{k}.mid"
        tok.decode_to_midi(res.ids, path)
        notes = symusic.Score(str(path)).note_num()  # the file loads
        if name == "remi" and notes:  # the grammar lets a pitch sound once per onset
            assert duplicate_note_rate(load_notes(path)) == 0.0
        if notes == 0:  # the model may close a piece before its first note
            with pytest.raises(MusicgenError, match="no notes"):
                tok.encode(path)
            continue
        with_notes += 1
        again = tok.encode(path)  # re-tokenises, into a sequence its grammar accepts
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in again) and grammar.finished()
    assert with_notes >= 150


@pytest.mark.parametrize("name", ["remi", "groove"])
def test_without_grammar_invalid_tokens_appear_and_are_counted(name):
    tok = build_tokenizer(name)
    model = tiny_model(tok)
    gen = torch.Generator().manual_seed(2)
    results = generate(
        model,
        tok,
        [[tok.bos_id]] * 50,
        SamplingOptions(1.0, grammar=False),
        max_new_tokens=64,
        generator=gen,
    )
    for res in results:
        grammar = tok.grammar()
        errors = sum(not grammar.advance(t) for t in res.ids[: res.prompt_len + res.sampled])
        assert errors == res.errors
    assert 0.05 < invalid_rate(results) < 1.0
    score = tok.decode(results[0].ids)  # decoding is lenient: invalid ids are skipped
    assert isinstance(score, symusic.Score)


@pytest.mark.parametrize("pe", ["ape", "sine_spe", "conv_spe"])
def test_seeded_runs_repeat_and_greedy_rows_do_not_interact(pe):
    tok = build_tokenizer("groove")
    model = tiny_model(tok, pe)
    opts = SamplingOptions(temperature=1.0, top_p=0.95)

    def run(prompts, options, seed):
        torch.manual_seed(seed)  # the positional noise drawn by init_state
        return [
            r.ids
            for r in generate(
                model,
                tok,
                prompts,
                options,
                max_new_tokens=24,
                generator=torch.Generator().manual_seed(seed),
            )
        ]

    assert run([[tok.bos_id]] * 4, opts, 5) == run([[tok.bos_id]] * 4, opts, 5)
    greedy = SamplingOptions(temperature=0.0)
    song = tok.encode(
        DATA / "groove_drums" / "drummer1" / "eval_session" / "1_funk-groove1_138_beat_4-4.mid"
    )
    prompts = [[tok.bos_id], song[:30], song[:7]]  # rows end at different steps
    alone = [run([p], greedy, 3)[0] for p in prompts]
    assert run(prompts, greedy, 3) == alone  # rows (and the padding of ended rows) independent


def test_prompts_of_different_lengths_are_kept_and_continued():
    tok = build_tokenizer("remi")
    song = tok.encode(DATA / "pop909" / "001" / "001.mid")
    starts = tok.bar_starts(np.asarray(song))
    prompts = [[tok.bos_id], song[: int(starts[1])], song[: int(starts[3])]]
    model = tiny_model(tok)
    results = generate(
        model,
        tok,
        prompts,
        SamplingOptions(1.2, top_p=0.9),
        max_new_tokens=40,
        generator=torch.Generator().manual_seed(0),
    )
    for prompt, res in zip(prompts, results, strict=True):
        assert res.ids[: len(prompt)] == prompt and res.prompt_len == len(prompt)
        assert res.continuation == res.ids[len(prompt) :]
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in res.ids) and grammar.finished()


class _EndLover(torch.nn.Module):
    """A model that wants to end at once: the end token's logit raised far above the rest."""

    def __init__(self, inner: torch.nn.Module, eos: int):
        super().__init__()
        self.inner, self.eos = inner, eos

    def init_state(self, *args, **kwargs):
        return self.inner.init_state(*args, **kwargs)

    def step(self, ids, state):
        logits, state = self.inner.step(ids, state)
        logits[:, self.eos] += 30.0
        return logits, state


def test_min_tokens_keeps_the_end_token_away_until_then():
    tok = build_tokenizer("remi")
    model = _EndLover(tiny_model(tok), tok.eos_id)
    run = lambda opts: generate(  # noqa: E731
        model, tok, [[tok.bos_id]] * 8, opts, 64, generator=torch.Generator().manual_seed(0)
    )
    eager = run(SamplingOptions(temperature=1.0))
    # the model ends at once: right after its first note (a piece from scratch sounds first)
    assert all(r.stop == "end" and r.sampled <= 12 for r in eager)
    held = run(SamplingOptions(temperature=1.0, min_tokens=40))
    for r in held:
        assert r.sampled >= 40 and r.stop in ("end", "max_tokens")
        assert tok.eos_id not in r.ids[1:40]
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in r.ids) and grammar.finished()


@pytest.mark.parametrize("name", ["remi", "groove"])
def test_bars_limit_cuts_at_the_next_bar(name):
    tok = build_tokenizer(name)
    model = tiny_model(tok, seed=3)
    results = generate(
        model,
        tok,
        [[tok.bos_id]] * 20,
        SamplingOptions(1.0),
        max_new_tokens=800,
        bars=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert any(r.stop == "bars" for r in results)
    for res in results:
        # (the completion may add note-offs exactly on the next bar line; the sampled ids may not)
        assert len(tok.bar_starts(np.asarray(res.ids[: 1 + res.sampled]))) <= 2
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in res.ids) and grammar.finished()


def test_invalid_prompt_is_an_error():
    tok = build_tokenizer("remi")
    model = tiny_model(tok)
    bad = [tok.bos_id, tok.token_id(tok.token_name(tok.bos_id))]  # a second BOS
    with pytest.raises(MusicgenError, match="not a valid prefix"):
        generate(model, tok, [bad], SamplingOptions(), max_new_tokens=4)
    with pytest.raises(MusicgenError, match="ends with the end token"):
        closed = [tok.bos_id, tok.token_id("Bar_None"), tok.eos_id]
        generate(model, tok, [closed], SamplingOptions(), max_new_tokens=4)


def test_perceiver_head_decodes_through_the_same_loop():
    tok = build_tokenizer("groove")
    cfg = ModelConfig(
        vocab_size=tok.vocab_size,
        n_layers=2,
        d_model=32,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        n_features=16,
        num_realizations=8,
        num_sines=2,
        pe="sine_spe",
        head="perceiver_s",
        perceiver=PerceiverConfig(context_len=32, n_queries=8),
    )
    torch.manual_seed(0)
    model = build_model(cfg).eval()
    results = generate(
        model,
        tok,
        [[tok.bos_id]] * 10,
        SamplingOptions(1.0),
        max_new_tokens=60,
        generator=torch.Generator().manual_seed(0),
    )  # past one context window
    for res in results:
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in res.ids) and grammar.finished()


@pytest.mark.parametrize("name", ["remi", "groove"])
def test_bar_counter_equals_bar_starts_at_every_prefix(name):
    """Generation counts bars one id at a time; at every prefix of real songs and of random id
    sequences that count is exactly `bar_starts` of the whole prefix."""
    tok = build_tokenizer(name)
    song = (
        tok.encode(DATA / "pop909" / "001" / "001.mid")[:600]
        if name == "remi"
        else tok.encode(
            DATA / "groove_drums" / "drummer1" / "eval_session" / "1_funk-groove1_138_beat_4-4.mid"
        )[:600]
    )
    rng = np.random.default_rng(0)
    seqs = [
        song,
        [tok.bos_id] + rng.integers(0, tok.vocab_size, 300).tolist(),
        rng.integers(0, tok.vocab_size, 300).tolist(),
    ]
    for seq in seqs:
        counter = tok.bar_counter()
        for n, t in enumerate(seq, 1):
            counter.push(t)
            assert counter.starts == tok.bar_starts(np.asarray(seq[:n])).tolist(), (name, n)
    assert len(counter.starts) > 0


class _LowPitches(Grammar):
    """A grammar_wrap: the wrapped grammar forbids every pitch above 72 (and records itself)."""

    made: list = []

    def __init__(self, grammar, ids, tok):
        self.inner, self.ids, self.completed = grammar, list(ids), False
        self.high = np.array([tok.token_name(i).startswith("Pitch_") and int(
            tok.token_name(i).split("_")[1]) > 72 for i in range(tok.vocab_size)])  # fmt: skip
        _LowPitches.made.append(self)

    errors = property(lambda self: self.inner.errors)

    def allowed(self):
        return self.inner.allowed() & ~self.high

    def advance(self, tok):
        return self.inner.advance(tok)

    def finished(self):
        return self.inner.finished()

    def completion(self):
        self.completed = True
        return self.inner.completion()


def test_grammar_wrap_rules_the_mask_and_survives_a_bar_cut():
    """`grammar_wrap` replaces each row's grammar; the grammar rebuilt after a bar cut is
    wrapped again (so the chord control's rules hold to the last id)."""
    tok = build_tokenizer("remi")
    model = tiny_model(tok, seed=3)
    _LowPitches.made = []
    results = generate(
        model,
        tok,
        [[tok.bos_id]] * 12,
        SamplingOptions(1.0),
        max_new_tokens=300,
        bars=1,
        generator=torch.Generator().manual_seed(0),
        grammar_wrap=lambda g, ids: _LowPitches(g, ids, tok),
    )
    cut = [r for r in results if r.stop == "bars"]
    assert cut and len(_LowPitches.made) == 12 + len(cut)
    rebuilt = _LowPitches.made[12:]
    assert sorted(len(w.ids) for w in rebuilt) == sorted(r.prompt_len + r.sampled for r in cut)
    assert all(w.completed for w in rebuilt)  # the completion came from the wrapped grammar
    pitches = [int(tok.token_name(t).split("_")[1]) for r in results for t in r.continuation
               if tok.token_name(t).startswith("Pitch_")]  # fmt: skip
    assert pitches and max(pitches) <= 72
    free = generate(model, tok, [[tok.bos_id]] * 12, SamplingOptions(1.0), 300, bars=1,
                    generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert any(int(tok.token_name(t).split("_")[1]) > 72 for r in free for t in r.continuation
               if tok.token_name(t).startswith("Pitch_"))  # fmt: skip


def test_progress_and_cancel_in_the_loop():
    tok = build_tokenizer("groove")
    model = tiny_model(tok)
    seen = []
    generate(model, tok, [[tok.bos_id]] * 2, SamplingOptions(1.0), 20,
             progress=lambda d, t: seen.append((d, t)))  # fmt: skip
    assert seen[-1] == (20, 20) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    # with a bar stop, progress follows the bars written (not the far step cap)
    by_bars = []
    out = generate(model, tok, [[tok.bos_id]] * 2, SamplingOptions(1.0, min_tokens=4000), 4000,
                   bars=4, progress=lambda d, t: by_bars.append((d, t)), grammar_wrap=ValidityOnly,
                   generator=torch.Generator().manual_seed(1))  # fmt: skip
    steps, total = [d for d, _ in by_bars], by_bars[-1][1]
    assert [r.stop for r in out] == ["bars", "bars"] and steps == sorted(steps)
    assert steps[-1] == total and len(steps) < total  # ended by the bar stop, far before the cap
    assert steps[-2] >= total * 3 // 4  # the last bar began: 3 of 4 written, not a few per cent

    class Now:
        def is_set(self):
            return True

    with pytest.raises(Cancelled, match="^cancel: generation cancelled after 0 of 20 steps$"):
        generate(model, tok, [[tok.bos_id]], SamplingOptions(1.0), 20, cancel=Now())
