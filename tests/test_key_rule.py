"""The key rule of the sampler (`generation.rules.in_key`): the scale a piece has set, found as
the key measure finds it, and its bonus, on real POP909 notes and through the sampler."""

import numpy as np
import pytest
import symusic
import torch
from conftest import tiny_model_config
from paths import DATA, ROOT

from musicgen.generation.api.request import GenerationRequest
from musicgen.generation.decoding.sample import SamplingOptions, generate
from musicgen.generation.rules.in_key import MIN_NOTES, PROMPT_HOLD, KeyKeep, pitch_classes
from musicgen.measures import form as fm
from musicgen.measures.metrics import notes_from_score
from musicgen.model import build_model
from musicgen.tokenizers import build_tokenizer


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi_song.yaml")


@pytest.mark.parametrize("song", ["001", "004", "010"])
def test_the_rule_finds_the_scale_the_key_measure_finds(tok, song):
    score = symusic.Score(str(DATA / "pop909" / song / f"{song}.mid"))
    ids = tok.encode(score)
    rule = KeyKeep(tok, 2.0, ids)
    assert rule.root() == fm.scale_root(notes_from_score(tok.decode(ids)))
    bonus, group = rule.choice()
    assert (group == (pitch_classes(tok) >= 0)).all()  # chosen among all pitches
    scale = {(rule.root() + d) % 12 for d in (0, 2, 4, 5, 7, 9, 11)}
    for name in ("Pitch_60", "MelodyPitch_61", "Pitch_66", "MelodyPitch_71"):
        pc = int(name.split("_")[1]) % 12
        assert bonus[tok.token_id(name)] == (2.0 * PROMPT_HOLD if pc in scale else 0.0), name
    assert bonus[tok.bar_id] == 0.0 and not bonus[pitch_classes(tok) < 0].any()


def test_no_key_before_enough_notes(tok):
    head = [tok.bos_id, tok.bar_id, tok.token_id("Position_0")]
    notes = [tok.token_id(f"Pitch_{p}") for p in (60, 62, 64, 65, 67, 69, 71, 72)]
    assert KeyKeep(tok, 1.0, head + notes).choice() is None
    assert KeyKeep(tok, 1.0, head + notes * (MIN_NOTES // len(notes))).root() == 0  # C major


def test_a_key_the_prompt_set_is_held_harder(tok):
    """The bonus is `in_key` for a key the piece sets itself, PROMPT_HOLD times it for a key
    its prompt set; notes drawn later do not change it."""
    head = [tok.bos_id, tok.bar_id, tok.token_id("Position_0")]
    scale = [tok.token_id(f"Pitch_{p}") for p in (60, 62, 64, 65, 67, 69, 71, 72)]
    short, full = head + scale, head + scale * (MIN_NOTES // len(scale))
    own = KeyKeep(tok, 1.0, short)
    for tok_id in scale:
        own.push(tok_id)
    assert own.root() == 0 and own.nats == 1.0
    assert own.choice()[0].max() == 1.0
    given = KeyKeep(tok, 1.0, full)
    assert given.root() == 0 and given.nats == PROMPT_HOLD
    assert given.choice()[0].max() == np.float32(PROMPT_HOLD)


def in_scale_share(tok, ids) -> float:
    pcs = pitch_classes(tok)
    played = np.array([pcs[i] for i in ids if pcs[i] >= 0])
    counts = np.bincount(played, minlength=12)
    best = max(counts[(np.array([0, 2, 4, 5, 7, 9, 11]) + r) % 12].sum() for r in range(12))
    return best / len(played)


def test_sampled_pieces_keep_their_scale(tok):
    """An untrained model scatters its notes over all twelve pitch classes; with 3 nats for
    the scale it has set, most of its notes stay in one major scale."""
    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size)).eval()
    shares = {}
    for nats in (0.0, 3.0):
        options = SamplingOptions(min_tokens=600, in_key=nats).validate()
        gen = torch.Generator().manual_seed(3)
        out = generate(model, tok, [[tok.bos_id]] * 4, options, 600, generator=gen)
        shares[nats] = np.mean([in_scale_share(tok, r.ids) for r in out])
    assert shares[0.0] < 0.75 and shares[3.0] > shares[0.0] + 0.1


def test_the_request_checks_the_bonus():
    assert GenerationRequest(in_key=1.5).options("remi").in_key == 1.5
    with pytest.raises(Exception, match="^in_key: must be"):
        GenerationRequest(in_key=-1)
