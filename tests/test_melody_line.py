"""The melody as one singable line when sampling: one melody note per position (the REMI
grammar's sampling mask) and the melody's range (`generation.melody`), on real POP909 tokens and
through the sampler."""

import numpy as np
import pytest
import symusic
import torch
from conftest import tiny_model_config
from paths import DATA, ROOT

from musicgen.generation.chords import chord_grammar_wrap
from musicgen.generation.form import form_wrap
from musicgen.generation.melody import MelodyRange
from musicgen.generation.progression import parse_progression
from musicgen.generation.request import GenerationRequest
from musicgen.generation.sample import SamplingOptions, generate
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer
from musicgen.tokenizers.form import parse_form


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi_song.yaml")


def melody_of(tok, ids) -> list[tuple[int, int, int]]:
    """(bar, position, pitch) of each melody note in `ids`."""
    pitches, out, bar, pos = tok.melody_pitches(), [], -1, -1
    for i in ids:
        name = tok.token_name(int(i))
        if name == "Bar_None":
            bar, pos = bar + 1, -1
        elif name.startswith("Position_"):
            pos = int(name.split("_")[1])
        elif pitches[int(i)] >= 0:
            out.append((bar, pos, int(pitches[int(i)])))
    return out


def test_only_the_song_vocabulary_has_a_melody_voice(tok):
    plain = build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")
    assert plain.melody_pitches() is None
    pitches = tok.melody_pitches()
    assert pitches[tok.token_id("MelodyPitch_72")] == 72 and pitches[tok.token_id("Pitch_72")] == -1


def test_range_keeps_new_melody_notes_inside_the_span(tok):
    ids = tok.encode(symusic.Score(str(DATA / "pop909" / "001" / "001.mid")))
    sung = [p for _, _, p in melody_of(tok, ids)]
    low, high = min(sung), max(sung)
    rule = MelodyRange(tok, 24, ids)
    assert (rule.low, rule.high) == (low, high)
    mask = rule.mask()
    for p in range(21, 109):
        inside = high - 24 <= p <= low + 24 or low <= p <= high
        assert mask[tok.token_id(f"MelodyPitch_{p}")] == inside, p
        assert mask[tok.token_id(f"Pitch_{p}")]  # the accompaniment is free
    assert MelodyRange(tok, 24, ids[:1]).mask() is None  # no melody yet: no rule


def test_a_prompt_wider_than_the_range_keeps_its_own_span(tok):
    ids = [tok.bos_id, tok.bar_id, tok.token_id("Position_0")]
    ids += [tok.token_id("MelodyPitch_50"), tok.token_id("MelodyPitch_80")]
    mask = MelodyRange(tok, 12, ids).mask()
    assert mask[tok.token_id("MelodyPitch_50")] and mask[tok.token_id("MelodyPitch_80")]
    assert not mask[tok.token_id("MelodyPitch_49")] and not mask[tok.token_id("MelodyPitch_81")]


def test_one_melody_note_per_position_when_sampling(tok):
    g = tok.grammar()
    for name in ("BOS_None", "Bar_None", "Position_4", "MelodyPitch_67"):
        assert g.advance(tok.token_id(name))
    for name in ("Velocity_63", "Duration_1.0.4"):
        assert g.advance(tok.token_id(name))
    mask = g.sampling_mask()
    assert not mask[tok.token_id("MelodyPitch_64")] and mask[tok.token_id("Pitch_64")]
    assert g.advance(tok.token_id("MelodyPitch_64"))  # still valid: a prompt is not judged
    for name in ("Velocity_63", "Duration_1.0.4", "Position_8"):
        assert g.advance(tok.token_id(name))
    assert g.sampling_mask() is None  # a new position: a new melody note


@pytest.mark.parametrize("wrap", ["form", "chords"])
def test_control_grammars_pass_the_melody_rule_on(tok, wrap):
    make = (
        form_wrap(tok, parse_form("A4"))
        if wrap == "form"
        else chord_grammar_wrap(tok, parse_progression("C G"))
    )
    base = tok.grammar()
    assert base.advance(tok.bos_id)
    g = make(base, [tok.bos_id])
    for name in ("Bar_None", *(["Section_A", "SectionBars_4"] if wrap == "form" else [])):
        assert g.advance(tok.token_id(name))
    for name in ("Position_0", "MelodyPitch_67", "Velocity_63", "Duration_1.0.4"):
        if wrap == "chords" and name == "MelodyPitch_67":
            assert g.advance(int(np.flatnonzero(g.allowed() & tok.chord_mask())[0]))
        assert g.advance(tok.token_id(name))
    assert not g.sampling_mask()[tok.token_id("MelodyPitch_60")]


def sample(tok, melody_range: int) -> list[list[int]]:
    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size)).eval()
    options = SamplingOptions(min_tokens=600, melody_range=melody_range).validate()
    gen = torch.Generator().manual_seed(3)
    out = generate(model, tok, [[tok.bos_id]] * 4, options, 600, generator=gen)
    return [r.ids for r in out]


def test_sampled_melodies_are_one_line_inside_the_range(tok):
    ranged, free = sample(tok, 12), sample(tok, 0)
    spans = []
    for ids in ranged:
        notes = melody_of(tok, ids)
        assert len(notes) >= 3
        assert max(p for *_, p in notes) - min(p for *_, p in notes) <= 12
        assert len({(b, q) for b, q, _ in notes}) == len(notes)  # one per position
    for ids in free:
        notes = melody_of(tok, ids)
        assert len({(b, q) for b, q, _ in notes}) == len(notes)
        spans.append(max(p for *_, p in notes) - min(p for *_, p in notes))
    assert max(spans) > 12  # an untrained model, unranged, leaps across the keyboard


def test_the_request_checks_the_range():
    assert GenerationRequest(melody_range=20).options("remi").melody_range == 20
    with pytest.raises(Exception, match="^melody_range: must be"):
        GenerationRequest(melody_range=-1)
