"""The opening rule: a piece from scratch sounds in its first bar (`generation.rules.opening`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import tiny_model_config
from paths import ROOT

from musicgen.generation.decoding.sample import SamplingOptions, generate
from musicgen.generation.rules.base import BarClock
from musicgen.generation.rules.opening import MusicFirst
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi_song.yaml")


def opened(tok, names: list[str]) -> MusicFirst:
    return MusicFirst(tok, [tok.token_id(n) for n in names])


def test_the_bar_clock_follows_bars_and_positions(tok):
    """The clock the rules share: -1 before the first bar, each bar from position 0."""
    clock = BarClock(tok.time_tables())
    assert (clock.bar, clock.pos) == (-1, 0)
    moved = [clock.push(tok.token_id(n)) for n in ["BOS_None", "Bar_None", "Position_4"]]
    assert moved == [False, True, True] and (clock.bar, clock.pos, clock.now()) == (0, 4, 4)
    assert not clock.push(tok.token_id("Pitch_60")) and clock.now() == 4
    clock.push(tok.bar_id)
    assert (clock.bar, clock.pos) == (1, 0) and not clock.at_last_position()
    clock.push(tok.token_id("Position_15"))
    assert clock.at_last_position() and clock.now() == clock.per_bar + 15


def test_the_first_bar_does_not_close_before_a_note(tok):
    rule = opened(tok, ["BOS_None", "Bar_None", "Position_4"])
    mask = rule.mask()
    assert not mask[tok.bar_id] and not mask[tok.eos_id]
    assert mask[tok.token_id("Pitch_60")] and mask[tok.token_id("Position_8")]
    rule.push(tok.token_id("Position_15"))  # the bar's last position: a note now
    mask = rule.mask()
    assert mask[tok.token_id("Pitch_60")] and mask[tok.token_id("MelodyPitch_64")]
    assert not mask[tok.bar_id] and not mask[tok.token_id("Chord_C:maj")]
    rule.push(tok.token_id("MelodyPitch_64"))
    assert rule.sounded and rule.mask() is None


def test_a_prompt_with_notes_or_no_bar_yet_asks_nothing(tok):
    note = ["Position_0", "Pitch_48", "Velocity_63", "Duration_1.0.4"]
    assert opened(tok, ["BOS_None", "Bar_None", *note, "Bar_None"]).mask() is None
    assert opened(tok, ["BOS_None"]).mask() is None  # the first bar has not opened


def test_only_vocabularies_with_bar_tokens_have_it():
    remi = build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")
    groove = build_tokenizer("groove")
    assert MusicFirst.applies(remi) and not MusicFirst.applies(groove)


def test_a_model_that_opens_silent_writes_its_first_bar():
    """An untrained model pushed 6 nats towards closing the bar (and away from notes) opens
    with empty bars when masking is off, and with a note in bar 0 under the rule. (Its Chord
    and Tempo ids are held back too: untrained, it would stack them at one position.)"""
    tok = build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")
    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size)).eval()
    notes = np.asarray(tok.time_tables().note, dtype=bool)
    names = [tok.token_name(i) for i in range(tok.vocab_size)]
    heads = np.array([n.startswith(("Chord_", "Tempo_")) for n in names])
    push = np.where(notes | heads, -6.0, 0.0)
    push[tok.bar_id] = 6.0
    push = torch.as_tensor(push, dtype=torch.float32)
    model.head.register_forward_hook(lambda _m, _i, logits: logits + push)

    def first_bars(grammar: bool) -> list[int]:
        gen = torch.Generator().manual_seed(1)
        options = SamplingOptions(grammar=grammar).validate()
        out = generate(model, tok, [[tok.bos_id]] * 3, options, 200, generator=gen)
        scores = [tok.decode(r.ids) for r in out]
        bar = [4 * s.ticks_per_quarter for s in scores]
        return [min((n.time // b for t in s.tracks for n in t.notes), default=99)
                for s, b in zip(scores, bar, strict=True)]  # fmt: skip

    assert all(bar == 0 for bar in first_bars(True))
    assert any(bar > 0 for bar in first_bars(False))
