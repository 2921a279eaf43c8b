"""The melody as one singable line when sampling: one melody note per position (the REMI
grammar's sampling mask) and the melody's range (`generation.rules.melody_range`), on real
POP909 tokens and through the sampler."""

import numpy as np
import pytest
import symusic
import torch
from conftest import tiny_model_config
from grammars import controls, steered
from paths import DATA, ROOT

from musicgen.generation.api.request import GenerationRequest
from musicgen.generation.controls.progression import parse_progression
from musicgen.generation.decoding.sample import SamplingOptions, generate
from musicgen.generation.rules import MelodyDue, MelodyRange
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
def test_the_melody_rule_holds_under_the_controls(tok, wrap):
    """The grammar's own sampling mask (one melody note per position) still narrows the draw
    under a form or chords: the rules compose with it, nothing forwards it."""
    make = (
        steered(tok, form=parse_form("A4"))
        if wrap == "form"
        else steered(tok, parse_progression("C G"))
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
    assert not g.narrowed(np.ones(tok.vocab_size, bool))[tok.token_id("MelodyPitch_60")]


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


def advanced(tok, names: list[str], melodic: set[int]) -> MelodyDue:
    return MelodyDue(tok, melodic, [tok.token_id(n) for n in names])


def test_a_melodic_bar_does_not_close_before_its_melody(tok):
    note = ["Velocity_63", "Duration_1.0.4"]
    due = advanced(tok, ["BOS_None", "Bar_None", "Position_0", "Pitch_48", *note], {0})
    mask = due.mask()
    assert due.owed() and not mask[tok.bar_id] and not mask[tok.eos_id]
    assert mask[tok.token_id("Position_8")] and mask[tok.token_id("Pitch_52")]
    due.push(tok.token_id("Position_15"))  # the bar's last position: its melody note now
    mask = due.mask()
    assert not mask[tok.token_id("Pitch_52")] and mask[tok.token_id("MelodyPitch_64")]
    assert not mask[tok.token_id("Chord_C:maj")] and not mask[tok.bar_id]
    due.push(tok.token_id("MelodyPitch_64"))
    assert not due.owed() and due.mask() is None
    unsung = advanced(tok, ["BOS_None", "Bar_None", "Position_0", "Pitch_48", *note], {1})
    assert unsung.mask() is None  # a bar of a phrase without melody owes nothing


def test_a_melody_note_held_into_the_bar_counts(tok):
    head = ["BOS_None", "Bar_None", "Position_12", "MelodyPitch_67", "Velocity_63"]
    held = advanced(tok, [*head, "Duration_2.0.4", "Bar_None"], {0, 1})
    short = advanced(tok, [*head, "Duration_1.0.4", "Bar_None"], {0, 1})
    assert not held.owed() and short.owed()  # 3 + 2 beats reach bar 2; 3 + 1 do not


def test_real_melodic_bars_have_their_melody(tok):
    """On POP909 001, aligned on its phrases, the rule would have let every melodic bar but
    the few where the real melody rests close as it does."""
    from musicgen.data.pop909_structure import align_song

    song = align_song(symusic.Score(str(DATA / "pop909" / "001" / "001.mid")),
                      DATA / "pop909_structure" / "001")  # fmt: skip
    ids = tok.encode(song.score, sections=song.sections)
    melodic = {b for s in song.sections if s.label.isupper() for b in range(s.bar, s.bar + s.bars)}
    due, closed_owing = MelodyDue(tok, melodic, []), []
    for i in ids:
        if i in (tok.bar_id, tok.eos_id) and due.owed():
            closed_owing.append(due.clock.bar)
        due.push(int(i))
    assert len(melodic) > 40 and len(closed_owing) <= 0.02 * len(melodic)


def test_sampled_melodic_bars_all_have_a_melody(tok):
    """A model that all but never draws a melody pitch (8 nats against them) still writes one
    in every bar of the form's melodic phrases. (Its Chord and Tempo ids are held back as
    well: untrained, it would stack them at one position for thousands of ids.)"""
    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size)).eval()
    names = [tok.token_name(i) for i in range(tok.vocab_size)]
    heads = np.array([n.startswith(("Chord_", "Tempo_")) for n in names])
    shy = np.where(tok.melody_pitches() >= 0, -8.0, np.where(heads, -6.0, 0.0))
    shy = torch.as_tensor(shy, dtype=torch.float32)
    model.head.register_forward_hook(lambda _m, _i, logits: logits + shy)
    options = SamplingOptions(melody_range=20).validate()
    gen = torch.Generator().manual_seed(5)
    prompt = tok.insert_sections([tok.bos_id, tok.bar_id], [])
    form = controls(tok, form="A2b1A1")
    out = generate(model, tok, [prompt] * 3, options, 4000, generator=gen, controls=form)
    for row in out:
        score = tok.decode(row.ids).to("quarter")
        (melody,) = [t for t in score.tracks if t.name == "Melody"]
        sounding = set()  # the bars where a melody note sounds (held into a bar counts)
        for n in melody.notes:
            sounding |= set(range(int(n.time // 4), int(-(-(n.time + n.duration) // 4))))
        assert row.stop == "end" and {0, 1, 3} <= sounding


def test_the_request_checks_the_range():
    assert GenerationRequest(melody_range=20).options("remi").melody_range == 20
    with pytest.raises(Exception, match="^melody_range: must be"):
        GenerationRequest(melody_range=-1)
