"""Recall (tokenizers.recall): a returning phrase's last telling placed in the model's context,
the same in training crops, scoring and generation, never written and never a target."""

import numpy as np
import pytest
import symusic
import torch
from paths import DATA, ROOT

from musicgen.data.pop909_structure import align_song
from musicgen.errors import MusicgenError
from musicgen.tokenizers import build_tokenizer, load_tokenizer
from musicgen.tokenizers.recall import RecallContext, strip_recall
from musicgen.tokenizers.remi_grammar import RemiTables

RECALL = ROOT / "configs" / "tokenizer" / "remi_song_recall.yaml"


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(RECALL)


@pytest.fixture(scope="module")
def song_ids(tok) -> np.ndarray:
    """POP909 song 001 with its phrases as tokens (i8 A8 A8 B4 ...: A and B return)."""
    score = symusic.Score(str(DATA / "pop909" / "001" / "001.mid"))
    aligned = align_song(score, DATA / "pop909_structure" / "001")
    return np.asarray(tok.encode(aligned.score, sections=aligned.sections), dtype=np.int64)


def phrase_ids(tok, ids: np.ndarray, section) -> list[int]:
    """A phrase's ids as written after its phrase tokens, up to the Bar of the bar after it."""
    bars = tok.bar_starts(ids)
    start = int(bars[section.bar]) + 3  # Bar, Section_X, SectionBars_n
    end = int(bars[section.bar + section.bars])
    return ids[start:end].tolist()


def test_the_vocabulary_only_grows_and_recall_needs_sections(tok):
    song = build_tokenizer(ROOT / "configs" / "tokenizer" / "remi_song.yaml")
    assert tok.vocab_size == song.vocab_size + 2
    names = [tok.token_name(i) for i in range(tok.vocab_size)]
    assert names[: song.vocab_size] == [song.token_name(i) for i in range(song.vocab_size)]
    assert names[-2:] == ["Recall_Start", "Recall_End"]
    assert tok.tables.family[-1] == RemiTables.RECALL
    assert load_tokenizer(tok.to_dict()).to_dict() == tok.to_dict()
    with pytest.raises(MusicgenError, match="recall needs sections"):
        load_tokenizer({"name": "remi", "recall": True})


def test_a_returning_phrase_hears_its_last_telling(tok, song_ids):
    context, said = RecallContext(tok).build(song_ids)
    assert np.array_equal(context[said], song_ids)  # the song's own ids, in order
    assert np.array_equal(strip_recall(tok, context), song_ids)
    sections = tok.sections(song_ids)
    start, end = tok.token_id("Recall_Start"), tok.token_id("Recall_End")
    blocks = np.flatnonzero(context == start)
    returns = [s for k, s in enumerate(sections) if s.label in {p.label for p in sections[:k]}]
    assert len(blocks) == len(returns) > 0
    for at, phrase in zip(blocks, returns, strict=True):
        last = [p for p in sections if p.label == phrase.label and p.bar < phrase.bar][-1]
        want = phrase_ids(tok, song_ids, last)
        got = context[at + 1 : at + 1 + len(want)].tolist()
        assert got == want and context[at + 1 + len(want)] == end
        assert tok.tables.family[context[at - 1]] == RemiTables.SECTION_BARS


def test_a_recalled_phrase_sits_where_its_return_will_and_leaves_the_song_time(tok, song_ids):
    from musicgen.model.musical import MusicalTime

    context, said = RecallContext(tok).build(song_ids)
    time = MusicalTime(tok.time_tables())
    ids = torch.from_numpy(context)[None]  # (1, M)
    onsets = time.onsets(ids)[0].numpy()
    own = tok.time_tables().onsets(song_ids[None])[0]
    assert np.array_equal(onsets[said], own)  # the song's time, as if nothing were recalled
    assert np.array_equal(tok.time_tables().onsets(context[None])[0], onsets)
    per_bar = tok.time_tables().positions_per_bar
    sections = tok.sections(song_ids)
    bars = tok.bar_starts(song_ids)
    starts = np.flatnonzero(context == tok.token_id("Recall_Start"))
    returns = [s for k, s in enumerate(sections) if s.label in {p.label for p in sections[:k]}]
    for at, phrase in zip(starts, returns, strict=True):
        last = [p for p in sections if p.label == phrase.label and p.bar < phrase.bar][-1]
        src = np.arange(int(bars[last.bar]) + 3, int(bars[last.bar + last.bars]))
        recalled = onsets[at + 1 : at + 1 + len(src)] - onsets[at] // per_bar * per_bar
        original = own[src] - own[src[0]] // per_bar * per_bar
        assert np.array_equal(recalled, original)  # the phrase's own bars and positions
    state, steps, notes = time.init_state(1, "cpu"), [], []
    for k in range(ids.shape[1]):
        steps.append(int(time.step(ids[:, k], state)[0]))
        notes.append(int(state.notes[0]))
    assert steps == onsets.tolist()
    assert notes == time.notes_at_onset(ids, torch.from_numpy(onsets)[None])[0].tolist()


def test_training_crops_never_target_a_recalled_id(tmp_path, tok, song_ids):
    from musicgen.data.dataset import IGNORE_INDEX, CropDataset

    context, said = RecallContext(tok).build(song_ids)
    data = CropDataset.__new__(CropDataset)
    data.tokenizer, data.context = tok, lambda ids: RecallContext(tok).build(ids)
    data.split, data.crop_len, data.drop_instrument_p = [song_ids], len(context), 0.0
    data.random_start_bar, data.lo, data.hi = False, 0, 0
    data.item_rng = lambda index: np.random.default_rng(0)
    data.song_index = lambda index: 0
    item = data[0]
    inp, tgt = item["input"].numpy(), item["target"].numpy()
    assert np.array_equal(inp[: len(context) - 1], context[:-1])
    assert np.array_equal(tgt[: len(context) - 1] != IGNORE_INDEX, said[1:])


def test_scoring_reports_the_songs_own_ids_in_their_context(tok, song_ids):
    from conftest import tiny_model_config

    from musicgen.measures.likelihood import per_position_nll
    from musicgen.model import build_model

    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size, pe="ape")).eval()
    ids = song_ids[:1500]
    context, said = RecallContext(tok).build(ids)
    got, counts = per_position_nll(
        model, [ids], len(ids) - 1, "cpu", context=lambda s: RecallContext(tok).build(s)
    )
    full, _ = per_position_nll(model, [context], len(context) - 1, "cpu")
    assert counts.tolist() == [1] * (len(ids) - 1)
    np.testing.assert_allclose(got, full[np.flatnonzero(said[1:])], rtol=1e-5)


def test_generation_feeds_the_recalled_phrase_and_never_writes_it(tmp_path, monkeypatch):
    from conftest import make_checkpoint

    import musicgen

    model = musicgen.load(make_checkpoint(tmp_path, str(RECALL)))
    tok = model.tokenizer
    fed: list[int] = []
    step = model.model.step

    def spy(ids, state):
        fed.append(int(ids[0]))
        return step(ids, state)

    monkeypatch.setattr(model.model, "step", spy)
    piece = model.generate(form="A1B1A1", seed=3, min_tokens=60)
    written = np.asarray(piece.ids)
    sections = tok.sections(written)
    assert [(s.label, s.bars) for s in sections] == [("A", 1), ("B", 1), ("A", 1)]
    start, end = tok.token_id("Recall_Start"), tok.token_id("Recall_End")
    assert start not in piece.ids and end not in piece.ids
    assert fed.count(start) == 1 and fed.count(end) == 1
    at = fed.index(start)
    assert fed[at + 1 : fed.index(end)] == phrase_ids(tok, written, sections[0])
    assert np.array_equal(strip_recall(tok, np.asarray(fed)), written[: len(written) - 1])


def test_growing_into_recall_keeps_every_row_the_model_had(tok):
    """Growing the song model (475 ids) into recall (477) had re-seeded its learned melody rows
    from the accompaniment's: its melodies then wandered over four octaves."""
    from conftest import tiny_model_config

    from musicgen.model import build_model
    from musicgen.train.vocabulary import extend_vocabulary

    song = build_tokenizer(ROOT / "configs" / "tokenizer" / "remi_song.yaml")
    torch.manual_seed(0)
    small = build_model(tiny_model_config(song.vocab_size), song)
    big = build_model(tiny_model_config(tok.vocab_size), tok)
    grown = extend_vocabulary(big, small.state_dict(), song.vocab_size, tok)
    for name in ("embed.weight", "head.weight"):
        torch.testing.assert_close(grown[name][: song.vocab_size], small.state_dict()[name])
