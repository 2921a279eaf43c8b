"""Groove sampling ends every note: the grammar's bound on how long a sampled note sounds, the
NoteOff redirects, the bass one note at a time, and all of them in what the shipped groove model
writes, on bundled songs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from paths import DATA

import musicgen
from musicgen.errors import MusicgenError
from musicgen.generation.decoding.filters import redirect_mass
from musicgen.tokenizers import build_tokenizer
from musicgen.tokenizers.groove import GrooveTokenizer
from musicgen.tokenizers.groove_grammar import HOLD_TICKS, GrooveGrammar, GrooveTables

ROOT = Path(__file__).resolve().parents[1]
LONG_PIANO = DATA / "pop909" / "005" / "005.mid"  # two piano notes of 54 ticks (> 1 bar)
TRIO_TEST = ROOT / "data" / "trio" / "test" / "0000.mid"


@pytest.fixture(scope="module")
def tok() -> GrooveTokenizer:
    return build_tokenizer("groove")


WALK = np.array([1.0, 0.05, 1e-4, 1.0])  # weight of a special id, NoteOn, NoteOff, TimeShift


def notes_of(tok: GrooveTokenizer, ids: list[int]) -> list[tuple[int, int, int]]:
    """(track, onset, offset) in ticks of every note of `ids`, a note left sounding ending where
    the ids end (as `decode` ends it)."""
    tb, cur, sounding, out = tok.tables, 0, {}, []
    for i in ids:
        kind = tb.kind[i]
        if kind == GrooveTables.SHIFT:
            cur += int(tb.shift[i])
        elif kind == GrooveTables.ON:
            sounding[int(tb.slot[i])] = cur
        elif kind == GrooveTables.OFF and int(tb.slot[i]) in sounding:
            slot = int(tb.slot[i])
            out.append((slot // 128, sounding.pop(slot), cur))
    return out + [(s // 128, on, cur) for s, on in sounding.items()]


def too_long(tok: GrooveTokenizer, ids: list[int]) -> list[tuple[int, int, int]]:
    return [n for n in notes_of(tok, ids) if n[2] - n[1] > HOLD_TICKS[n[0]]]


def test_a_real_note_longer_than_the_bound_is_still_a_valid_prompt(tok):
    ids = tok.encode(LONG_PIANO)
    assert too_long(tok, ids)  # the bound is on what is sampled, not on what is valid
    g = tok.grammar()
    assert all(g.advance(i) for i in ids) and g.errors == 0 and g.finished()


def test_sampling_from_the_masks_keeps_every_note_within_its_bound(tok):
    """Walks that almost never end a note by themselves (a model that lost track of them)."""
    rng = np.random.default_rng(0)
    reached = set()
    for _ in range(4):
        g, seq = tok.grammar(), [tok.bos_id]
        g.advance(tok.bos_id)
        for _ in range(600):
            narrow = g.sampling_mask()
            mask = g.allowed() if narrow is None else g.allowed() & narrow
            mask[tok.eos_id] = False
            weight = mask * WALK[tok.tables.kind]
            i = int(rng.choice(len(mask), p=weight / weight.sum()))
            assert g.advance(i)
            seq.append(i)
        seq += g.completion()
        assert not too_long(tok, seq)
        reached |= {n[0] for n in notes_of(tok, seq) if n[2] - n[1] == HOLD_TICKS[n[0]]}
    assert reached == {0, 1, 2}  # every track's bound was met, and held


def test_a_note_at_its_bound_is_ended_before_anything_else(tok):
    t = tok.token_id
    g = tok.grammar()
    for i in [tok.bos_id, t("NoteOn_third_60"), t("NoteOn_bass_40"), t("TimeShift_2_0")]:
        g.advance(i)
    mask = g.sampling_mask()  # 24 of the bar's 48 ticks held: shifts of up to 24 ticks
    assert mask[t("TimeShift_2_0")] and mask[t("NoteOn_drums_36")] and mask[t("NoteOff_bass_40")]
    g.advance(t("TimeShift_1_11"))  # 47 ticks: one tick left
    mask = g.sampling_mask()
    assert mask[t("TimeShift_0_1")] and not mask[t("TimeShift_0_2")]
    g.advance(t("TimeShift_0_1"))
    due = np.flatnonzero(g.sampling_mask()).tolist()
    assert sorted(due) == sorted([t("NoteOff_third_60"), t("NoteOff_bass_40")])
    assert g.allowed()[t("TimeShift_2_0")]  # still valid: a prompt may hold it on
    g.advance(t("NoteOff_bass_40"))
    g.advance(t("NoteOff_third_60"))
    assert g.sampling_mask() is None


def test_the_bound_must_be_positive():
    with pytest.raises(MusicgenError, match="hold needs 3 tick counts"):
        GrooveGrammar((48, 0, 48))


def after(tok: GrooveTokenizer, names: list[str]) -> GrooveGrammar:
    """A grammar advanced over BOS and the named tokens."""
    g = tok.grammar()
    for i in [tok.bos_id, *map(tok.token_id, names)]:
        assert g.advance(i)
    return g


def test_redirects_name_the_sounding_notes_of_each_track(tok):
    t = tok.token_id
    pairs = after(tok, ["NoteOn_bass_40", "NoteOn_third_60", "NoteOn_third_64"]).redirects()
    assert len(pairs) == 2  # no drum note sounds
    (bass_from, bass_to), (third_from, third_to) = pairs
    assert bass_to.tolist() == [t("NoteOff_bass_40")] and len(bass_from) == 127 + 128
    assert t("NoteOff_bass_41") in bass_from and t("NoteOff_bass_40") not in bass_from
    assert t("NoteOn_bass_43") in bass_from  # the bass is `mono`: a new note ends the last
    assert third_to.tolist() == [t("NoteOff_third_60"), t("NoteOff_third_64")]
    assert len(third_from) == 126 and t("NoteOff_third_62") in third_from


def overlaps(notes: list[tuple[int, int, int]], track: int) -> int:
    """Notes of `track` still sounding at the track's next onset."""
    own = sorted((on, off) for tr, on, off in notes if tr == track)
    onsets = [on for on, _ in own]
    later = [next((o for o in onsets if o > on), None) for on, _ in own]
    return sum(nxt is not None and off > nxt for (_, off), nxt in zip(own, later, strict=True))


def test_the_bass_starts_no_note_while_one_sounds(tok):
    t = tok.token_id
    g = after(tok, ["NoteOn_bass_40", "NoteOn_third_60", "TimeShift_1_0"])
    mask = g.sampling_mask()
    assert not mask[t("NoteOn_bass_43")] and mask[t("NoteOn_third_64")]
    assert mask[t("NoteOff_bass_40")] and mask[t("NoteOn_drums_36")]
    assert g.allowed()[t("NoteOn_bass_43")]  # still valid: a prompt may play two at once
    g.advance(t("NoteOff_bass_40"))
    assert g.sampling_mask()[t("NoteOn_bass_43")]  # the third's note still sounds
    free = GrooveGrammar(mono=(False, False, False))
    for i in [tok.bos_id, t("NoteOn_bass_40")]:
        free.advance(i)
    assert free.sampling_mask()[t("NoteOn_bass_43")]
    with pytest.raises(MusicgenError, match="mono needs 3 flags"):
        GrooveGrammar(mono=(True,))


def test_a_walk_eager_for_notes_keeps_the_bass_to_one_note(tok):
    """A walk that starts notes often and seldom ends them: with the redirects applied as the
    sampler applies them, the bass never holds a note past its next onset; without `mono` it
    does."""
    eager = np.array([1.0, 1.0, 0.02, 1.0])  # special, NoteOn, NoteOff, TimeShift
    counts = {}
    for mono in ((True, False, False), (False, False, False)):
        rng, g, seq = np.random.default_rng(1), GrooveGrammar(mono=mono), [tok.bos_id]
        g.advance(tok.bos_id)
        for _ in range(800):
            logits = torch.from_numpy(np.log(eager[tok.tables.kind]))[None].clone()
            for sources, targets in g.redirects():
                redirect_mass(logits, 0, torch.from_numpy(sources), torch.from_numpy(targets))
            narrow = g.sampling_mask()
            mask = g.allowed() if narrow is None else g.allowed() & narrow
            mask[tok.eos_id] = False
            p = torch.softmax(logits[0].masked_fill(~torch.from_numpy(mask), -np.inf), 0)
            i = int(rng.choice(len(mask), p=p.double().numpy() / float(p.sum())))
            assert g.advance(i)
            seq.append(i)
        notes = notes_of(tok, seq + g.completion())
        counts[mono[0]] = (overlaps(notes, 0), sum(n[0] == 0 for n in notes))
    assert counts[True][0] == 0 and counts[True][1] > 20
    assert counts[False][0] > 5


def test_redirect_mass_moves_the_sources_probability_to_the_targets():
    p = torch.tensor([[0.1, 0.2, 0.3, 0.15, 0.25]])
    logits = p.log()
    redirect_mass(logits, 0, torch.tensor([0, 1]), torch.tensor([3, 4]))
    logits[0, :2] = float("-inf")  # the grammar mask removes the sources
    q = torch.softmax(logits, -1)[0]
    # 0.3 of mass moved, shared 0.15 : 0.25; the rest untouched, nothing renormalised
    assert torch.allclose(q, torch.tensor([0.0, 0.0, 0.3, 0.15 + 0.1125, 0.25 + 0.1875]))


def test_the_shipped_groove_model_holds_no_note_past_its_bound():
    model = musicgen.load("groove_sine_spe_gated")
    tok = model.tokenizer
    scratch = model.generate_many(4, bars=4, seed=0)
    continued = model.continue_many(TRIO_TEST, 4, bars=2, new_bars=4, seed=0)
    for piece in scratch + continued:
        assert piece.errors == 0
        prompt_end = int(tok.tables.shift[piece.ids[: piece.prompt_len]].sum())
        sampled = [n for n in notes_of(tok, piece.ids) if n[1] >= prompt_end]
        assert sampled and not [n for n in sampled if n[2] - n[1] > HOLD_TICKS[n[0]]]
        assert overlaps(sampled, 0) == 0
