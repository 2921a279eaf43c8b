"""Phrase densities (`densities: true`): each phrase's level of notes a bar written after its
label and length, on real POP909 songs; the grammar that wants one there; the form control that
leaves it to the model; a prompt's phrases measured from its own bars."""

import numpy as np
import pytest
import symusic
from grammars import steered
from paths import DATA, ROOT

from musicgen.data.pop909_structure import align_song
from musicgen.errors import MusicgenError
from musicgen.generation.api.chord_marks import phrase_marks
from musicgen.generation.controls.form_plan import form_sections, with_form
from musicgen.generation.rules import FormControl
from musicgen.tokenizers import build_tokenizer, from_description
from musicgen.tokenizers.form import (
    DENSITY_LEVELS,
    Section,
    density_level,
    form_text,
    parse_form,
    place,
)
from musicgen.tokenizers.remi_grammar import RemiTables

CONFIGS = ROOT / "configs" / "tokenizer"


@pytest.fixture(scope="module")
def dense():
    return build_tokenizer(CONFIGS / "remi_song_density.yaml")


@pytest.fixture(scope="module")
def song_tok():
    return build_tokenizer(CONFIGS / "remi_song.yaml")


def aligned(n: str):
    score = symusic.Score(str(DATA / "pop909" / n / f"{n}.mid"))
    return align_song(score, DATA / "pop909_structure" / n)


def density_ids(tok) -> np.ndarray:
    return np.flatnonzero(tok.tables.family == RemiTables.SECTION_DENSITY)


def test_the_vocabulary_grows_by_the_levels_after_the_song_vocabulary(dense, song_tok):
    names = [dense.token_name(i) for i in range(dense.vocab_size)]
    assert names[: song_tok.vocab_size] == [
        song_tok.token_name(i) for i in range(song_tok.vocab_size)
    ]
    assert names[song_tok.vocab_size :] == [f"SectionDensity_{k}" for k in range(1, 9)]
    assert DENSITY_LEVELS == 8


def test_densities_need_sections():
    cfg = {"name": "remi", "melody": True, "sections": False, "densities": True}
    with pytest.raises(MusicgenError, match="densities needs sections"):
        from_description(cfg)


def test_levels_rise_at_their_edges():
    assert [density_level(x) for x in (0, 12.9, 13, 17.9, 18, 27.9, 28, 90)] == [
        1, 1, 2, 3, 4, 7, 8, 8
    ]  # fmt: skip


@pytest.mark.parametrize("n", ["001", "002"])
def test_each_phrase_gets_the_level_of_its_own_bars(dense, song_tok, n):
    """Decoded, every phrase's bars hold the notes a bar its level says; the labels and lengths
    are the annotation's; the music is the song vocabulary's, note for note."""
    song = aligned(n)
    ids = dense.encode(song.score, sections=song.sections)
    written = dense.sections(ids)
    assert [(s.bar, s.label, s.bars) for s in written] == [
        (s.bar, s.label, s.bars) for s in song.sections
    ]
    score = dense.decode(ids)
    bar_ticks = 4 * score.ticks_per_quarter
    starts = np.array([note.time // bar_ticks for t in score.tracks for note in t.notes])
    inside = [np.count_nonzero((starts >= s.bar) & (starts < s.bar + s.bars)) for s in written]
    levels = [density_level(k / s.bars) for k, s in zip(inside, written, strict=True)]
    assert [s.density for s in written] == levels
    assert len(set(levels)) > 1  # a song's phrases differ
    plain = song_tok.decode(song_tok.encode(song.score, sections=song.sections))
    assert [t.notes for t in score.tracks] == [t.notes for t in plain.tracks]
    grammar = dense.grammar()
    assert all(grammar.advance(i) for i in ids) and grammar.finished()


def test_the_grammar_wants_a_density_after_a_phrase_length(dense):
    g = dense.grammar()
    for i in (dense.bos_id, dense.bar_id, *dense.section_ids("A", 8)):
        assert g.advance(i)
    assert np.array_equal(np.flatnonzero(g.allowed()), density_ids(dense))
    assert g.advance(int(density_ids(dense)[2]))
    allowed = g.allowed()
    assert allowed[dense.token_id("Position_0")] and not allowed[density_ids(dense)].any()
    cut = dense.grammar()
    for i in (dense.bos_id, dense.bar_id, dense.section_ids("A", 8)[0]):
        cut.advance(i)
    tail = cut.completion()  # a length, a density, the end
    check = dense.grammar()
    prefix = [dense.bos_id, dense.bar_id, dense.section_ids("A", 8)[0]]
    assert all(check.advance(i) for i in prefix + tail) and check.finished()


@pytest.mark.parametrize("form", ["i2A4B4", "A1b3A1o2"])
def test_a_form_forces_labels_and_lengths_and_leaves_the_density_to_the_model(dense, form):
    phrases = parse_form(form)
    grammar = steered(dense, form=phrases)(dense.grammar(), [])
    rng = np.random.default_rng(0)
    ids = []
    while not grammar.finished() and len(ids) < 3000:
        choices = np.flatnonzero(grammar.allowed())
        pick = (
            dense.bar_id if dense.bar_id in choices and rng.random() < 0.3 else rng.choice(choices)
        )
        assert grammar.advance(int(pick))
        ids.append(int(pick))
    written = dense.sections(ids)
    assert [Section(s.bar, s.label, s.bars) for s in written] == place(phrases)
    assert all(s.density in range(1, DENSITY_LEVELS + 1) for s in written)
    assert grammar.errors == 0


def test_a_form_cut_short_right_after_a_bar_closes_validly(dense):
    grammar = steered(dense, form=parse_form("A2"))(dense.grammar(), [])
    for i in (dense.bos_id, dense.bar_id):
        grammar.advance(i)
    assert pending(grammar) == dense.section_ids("A", 2)
    tail = grammar.completion()
    check = dense.grammar()
    assert all(check.advance(i) for i in [dense.bos_id, dense.bar_id, *tail]) and check.finished()


def test_a_prompt_phrase_takes_the_level_of_the_bars_it_holds(dense):
    song = aligned("001")
    ids = dense.encode(song.score)  # no phrases: a plain prompt
    first = int(song.sections[0].bar)
    bars = dense.bar_starts(np.array(ids))
    prompt = ids[: int(bars[first + 2])]  # through the form's first two bars
    phrases = [*parse_form(f"i{first}"), *parse_form("A8")] if first else parse_form("A8")
    fed = with_form(dense, prompt, phrases)
    last = dense.sections(fed)[-1]
    held = np.asarray(prompt)[int(bars[last.bar]) :]
    notes = np.count_nonzero(dense.tables.family[held] == RemiTables.PITCH)
    assert last.label == "A" and last.density == density_level(notes / 2)


def test_a_form_may_give_each_phrase_its_density():
    phrases = parse_form("i4@2A8@3B8o2")
    assert [p.density for p in phrases] == [2, 3, None, None]
    assert form_text(phrases) == "i4@2A8@3B8o2"
    assert [s.density for s in place(phrases)] == [2, 3, None, None]
    for bad, why in (("A8@9", "a density is 1 to 8"), ("A8@0", "a density is 1 to 8"),
                     ("A8@", "not a form")):  # fmt: skip
        with pytest.raises(MusicgenError, match=why):
            parse_form(bad)


def test_a_given_density_is_forced_and_a_model_without_densities_refuses_it(dense, song_tok):
    phrases = parse_form("A1@7B1")
    grammar = steered(dense, form=phrases)(dense.grammar(), [])
    for i in (dense.bos_id, dense.bar_id):
        grammar.advance(i)
    assert pending(grammar) == dense.section_ids("A", 1, density=7)
    assert dense.token_name(pending(grammar)[-1]) == "SectionDensity_7"
    with pytest.raises(MusicgenError, match="no density tokens"):
        form_sections(song_tok, phrases)
    form_sections(song_tok, parse_form("A1B1"))  # without densities: as before


def test_a_model_with_densities_writes_a_song_with_them(tmp_path):
    """End to end on a tiny untrained model: the given densities are written, the others drawn;
    the MIDI has the form's markers and its notes."""
    from conftest import make_checkpoint

    import musicgen

    model = musicgen.load(make_checkpoint(tmp_path, str(CONFIGS / "remi_song_density.yaml")))
    piece = model.generate(form="A1@6B1", seed=1, min_tokens=200)
    written = model.tokenizer.sections(piece.ids)
    assert [(s.label, s.bars, s.density) for s in written][0] == ("A", 1, 6)
    assert written[1].label == "B" and written[1].density in range(1, DENSITY_LEVELS + 1)
    path = piece.save(tmp_path / "song.mid")
    score = symusic.Score(str(path))
    assert phrase_marks(score) == ["A1", "B1"]  # the chord markers aside
    assert sum(len(t.notes) for t in score.tracks) > 0


def test_the_whole_song_evaluation_forces_the_songs_own_densities(tmp_path):
    """A case keeps its phrases' levels; the `densities` run writes them, the plain run leaves
    them to the model, and a continued song's prompt sheds its own phrase tokens (densities
    too) for the form's: every piece follows the grammar."""
    from conftest import make_checkpoint

    import musicgen
    from musicgen.evaluate.song import Run, make_song_case, plan_runs, run_pairs, write_song

    model = musicgen.load(make_checkpoint(tmp_path, str(CONFIGS / "remi_song_density.yaml")))
    tok = model.tokenizer
    case = make_song_case(
        tok, DATA / "pop909" / "001" / "001.mid", DATA / "pop909_structure" / "001", 5
    )
    levels = [p.density for p in case.phrases]
    assert all(d in range(1, DENSITY_LEVELS + 1) for d in levels)
    assert levels == [s.density for s in tok.sections(case.ids)][: len(levels)]
    for run in (Run("scratch", {}, densities=True), Run("continue", {})):
        piece = write_song(model, case, run, 0, 2)
        assert piece.errors == 0
        written = [s.density for s in tok.sections(piece.ids)]
        if run.densities:
            assert written == levels
    plan = plan_runs([{}, {"repeat": 0.0}], chords=False, densities=True)
    assert [r.label for r in plan][-2:] == ["scratch densities default", "scratch densities r=0"]
    assert ("scratch densities default", "scratch densities r=0") in run_pairs(plan)


def pending(grammar) -> list[int]:
    """The phrase tokens the form control of a steered grammar still has to write."""
    return next(r for r in grammar.rules if isinstance(r, FormControl)).pending
