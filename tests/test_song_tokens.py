"""Whole-song tokens on real POP909 songs: the structure aligned onto the MIDI's bars, the melody
as its own voice, phrases as section tokens, and the form control's grammar."""

import numpy as np
import pytest
import symusic
from grammars import controls, steered
from paths import DATA, ROOT

from musicgen.data.pop909_structure import MIN_MATCH, align, align_song, read_form, read_melody
from musicgen.errors import MusicgenError
from musicgen.generation.controls.form_plan import form_sections, read_form_arg, with_form
from musicgen.generation.rules import FormControl
from musicgen.tokenizers import build_tokenizer
from musicgen.tokenizers.form import Phrase, Section, parse_form, place
from musicgen.tokenizers.remi_grammar import RemiTables

SONGS = DATA / "pop909"
STRUCTURE = DATA / "pop909_structure"
ALIGNED = ["001", "002", "003", "200", "733"]  # match >= 0.99
UNALIGNED = ["005", "010"]  # their melody.txt meets under 80 % of the MIDI melody


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi_song.yaml")


@pytest.fixture(scope="module")
def plain():
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")


def song(n: str):
    return symusic.Score(str(SONGS / n / f"{n}.mid")), STRUCTURE / n


def notes16(track: symusic.Track, tpq: int) -> set[tuple[int, int]]:
    return {(int(np.floor(n.time * 4 / tpq + 0.5)), n.pitch) for n in track.notes}  # halves up


# --- structure ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", ALIGNED)
def test_aligned_song_puts_its_bar_0_on_a_bar_line(n):
    score, folder = song(n)
    got = align_song(score, folder)
    assert got.aligned and got.match >= 0.99
    shift, match = align(got.score, read_melody(folder))
    assert shift % 16 == 0 and match >= got.match - 0.01  # now on a bar line
    first = got.sections[0]
    assert first.bar == shift // 16 and first.label == read_form(folder)[0].label
    bars = [s.bar for s in got.sections]
    assert bars == sorted(bars) and all(
        b.bar == a.bar + a.bars for a, b in zip(got.sections, got.sections[1:], strict=False)
    )


@pytest.mark.parametrize("n", UNALIGNED)
def test_unaligned_song_keeps_its_score_and_gets_no_sections(n):
    score, folder = song(n)
    got = align_song(score, folder)
    assert got.match < MIN_MATCH and not got.aligned
    assert got.sections == [] and got.score is score and got.delay == 0


def test_delay_moves_every_note_and_keeps_the_first_tempo():
    score, folder = song("002")
    got = align_song(score, folder)
    ticks = got.delay * score.ticks_per_quarter // 4
    assert got.delay == 14
    before = score.tracks[0].notes.numpy()["time"]
    after = got.score.tracks[0].notes.numpy()["time"]
    np.testing.assert_array_equal(after, before + ticks)
    assert got.score.tempos[0].time == 0
    assert got.score.tempos[0].qpm == pytest.approx(score.tempos[0].qpm, rel=1e-4)


def test_form_text_errors_are_one_line():
    assert parse_form("i4A8b4o2") == [
        Phrase("i", 4),
        Phrase("A", 8),
        Phrase("b", 4),
        Phrase("o", 2),
    ]
    for bad in ("", "A4B", "A4 + B4", "A0"):
        with pytest.raises(MusicgenError, match="form"):
            parse_form(bad)
    assert read_form_arg("auto") == "auto"
    assert read_form_arg(STRUCTURE / "001" / "human_label1.txt")[0] == Phrase("i", 4)
    with pytest.raises(MusicgenError, match="cannot read the form"):
        read_form_arg(STRUCTURE / "nope.txt")


# --- tokens -------------------------------------------------------------------------------------


def test_song_vocabulary_extends_remi(tok, plain):
    names = [tok.token_name(i) for i in range(tok.vocab_size)]
    assert names[: plain.vocab_size] == [plain.token_name(i) for i in range(plain.vocab_size)]
    extra = names[plain.vocab_size :]
    assert sum(x.startswith("MelodyPitch_") for x in extra) == 88
    assert [x for x in extra if x.startswith("Section_")] == [f"Section_{c}" for c in "iABCDEbxXo"]
    assert sum(x.startswith("SectionBars_") for x in extra) == 32
    seeds = tok.seed_ids()
    assert len(seeds) == 88
    assert all(
        tok.token_name(s) == tok.token_name(m).replace("Melody", "") for m, s in seeds.items()
    )


@pytest.mark.parametrize("n", ["001", "002", "005"])
def test_melody_round_trip(tok, plain, n):
    score, folder = song(n)
    aligned = align_song(score, folder)
    ids = tok.encode(aligned.score, sections=aligned.sections)
    out = tok.decode(ids)
    assert [t.name for t in out.tracks] == ["Melody", "Piano"]
    melody = next(t for t in aligned.score.tracks if t.name == "MELODY")
    assert notes16(out.tracks[0], out.ticks_per_quarter) == notes16(
        melody, aligned.score.ticks_per_quarter
    )
    # the voices split the notes the plain REMI writes as one
    merged = plain.decode(plain.encode(aligned.score))
    assert len(out.tracks[0].notes) + len(out.tracks[1].notes) == len(merged.tracks[0].notes)
    assert len(ids) == len(plain.encode(aligned.score)) + 2 * len(aligned.sections)


def test_sections_follow_their_bars(tok):
    score, folder = song("001")
    aligned = align_song(score, folder)
    ids = tok.encode(aligned.score, sections=aligned.sections)
    assert tok.sections(ids) == aligned.sections
    t = tok.tables
    for k in np.flatnonzero(t.family[np.array(ids)] == RemiTables.SECTION):
        assert ids[k - 1] == tok.bar_id and t.family[ids[k + 1]] == RemiTables.SECTION_BARS
    grammar = tok.grammar()
    assert all(grammar.advance(i) for i in ids) and grammar.finished()


def test_written_songs_mark_their_phrases_and_the_roll_draws_them(tok, tmp_path, monkeypatch):
    """decode writes a marker per phrase; a MIDI file read back gives the same phrases, and
    `render` draws them."""
    from musicgen.generation.api import render
    from musicgen.tokenizers.form import read_markers

    score, folder = song("001")
    aligned = align_song(score, folder)
    ids = tok.encode(aligned.score, sections=aligned.sections)
    path = tmp_path / "001.mid"
    tok.decode(ids).dump_midi(str(path))
    assert read_markers(symusic.Score(str(path))) == aligned.sections
    assert read_markers(symusic.Score(str(DATA / "pop909" / "001" / "001.mid"))) == []
    drawn = {}
    monkeypatch.setattr(render, "piano_roll", lambda *a, **k: drawn.update(k) or a[1])
    render.render_midi(path, tmp_path)
    assert drawn["sections"] == aligned.sections


def test_a_bar_wanted_after_the_forms_last_bar_is_the_end(tok):
    """A model that wants a new bar at every step: in the form's last bar that wish is the
    song's end, not notes piled onto the bar (the masked Bar's probability goes to the end)."""
    import torch
    from conftest import tiny_model_config

    from musicgen.generation.decoding.sample import SamplingOptions, generate
    from musicgen.model import build_model

    torch.manual_seed(0)
    model = build_model(tiny_model_config(tok.vocab_size)).eval()
    eager = torch.zeros(tok.vocab_size)
    eager[tok.bar_id] = 6.0
    model.head.register_forward_hook(lambda _m, _i, logits: logits + eager)
    gen = torch.Generator().manual_seed(1)
    (row,) = generate(model, tok, [[tok.bos_id]], SamplingOptions(), 500, generator=gen,
                      controls=controls(tok, form="i1b1"))  # fmt: skip
    last = len(row.ids) - 1 - row.ids[::-1].index(tok.bar_id)
    assert row.stop == "end" and len(row.ids) - last <= 6  # Bar, its phrase tokens, a note?, EOS


def test_unknown_label_is_refused(tok):
    score, _ = song("001")
    with pytest.raises(MusicgenError, match="unknown phrase label 'Q'"):
        tok.encode(score, sections=[Section(0, "Q", 4)])


def test_transposition_keeps_the_voices(tok):
    score, folder = song("002")
    ids = np.array(tok.encode(score))
    up = tok.transpose(ids, 2)
    t = tok.tables
    np.testing.assert_array_equal(t.melody[up], t.melody[ids])
    pitched = t.family[ids] == RemiTables.PITCH
    np.testing.assert_array_equal(t.pitch[up][pitched], t.pitch[ids][pitched] + 2)


def test_grammar_places_phrase_tokens_and_one_pitch_per_voice_pair(tok):
    g = tok.grammar()
    section, length = tok.section_ids("A", 8)
    for i in (tok.bos_id, tok.bar_id):
        assert g.advance(i)
    assert g.allowed()[section] and not g.allowed()[length]
    assert g.advance(section)
    allowed = g.allowed()
    assert allowed[length] and allowed.sum() == 32  # only a length may follow a label
    assert g.advance(length)
    assert not g.allowed()[section]  # one label per bar
    melody_60 = tok.token_id("MelodyPitch_60")
    for name in ("Position_0",):
        assert g.advance(tok.token_id(name))
    assert g.advance(melody_60)
    g.advance(tok.token_id("Velocity_63"))
    g.advance(tok.token_id("Duration_1.0.4"))
    assert not g.allowed()[tok.token_id("Pitch_60")]  # the same pitch in the other voice
    assert g.allowed()[tok.token_id("Pitch_64")]
    assert not g.allowed()[section]  # no label inside a bar


# --- the form control's grammar -----------------------------------------------------------------


def walk(tok, grammar, rng, limit=3000):
    """Ids drawn uniformly among those the grammar allows, as a sampler with a flat model."""
    ids = []
    while not grammar.finished() and len(ids) < limit:
        choices = np.flatnonzero(grammar.allowed())
        bars = [c for c in choices if c == tok.bar_id]
        # a flat draw would open a new bar almost never; favour it so bars pass
        pick = bars[0] if bars and rng.random() < 0.3 else int(rng.choice(choices))
        assert grammar.advance(pick)
        ids.append(int(pick))
    return ids


@pytest.mark.parametrize("form", ["i2A4B4", "A1b3A1o2"])
def test_form_grammar_forces_the_phrases_and_ends_the_song(tok, form):
    phrases = parse_form(form)
    grammar = steered(tok, form=phrases)(tok.grammar(), [])
    ids = walk(tok, grammar, np.random.default_rng(0))
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.sections(ids) == place(phrases)
    assert len(tok.bar_starts(np.array(ids))) == sum(p.bars for p in phrases)
    assert grammar.errors == 0


def test_prompt_gets_the_phrases_of_its_bars_not_of_its_lead_in(tok):
    phrases = parse_form("i1A2B2")
    score, _ = song("001")
    ids = tok.encode(score)
    two_bars = ids[: int(tok.bar_starts(np.array(ids))[2])] + [tok.bar_id]  # bars 0-1 + lead-in
    fed = with_form(tok, two_bars, phrases)
    assert tok.sections(fed) == [Section(0, "i", 1), Section(1, "A", 2)]
    grammar = steered(tok, form=phrases)(tok.grammar(), fed)
    (form,) = [r for r in grammar.rules if isinstance(r, FormControl)]
    assert form.pending == []  # bar 2 continues phrase A: nothing to force
    fed3 = with_form(tok, ids[: int(tok.bar_starts(np.array(ids))[3])] + [tok.bar_id], phrases)
    grammar3 = steered(tok, form=phrases)(tok.grammar(), fed3)
    (form3,) = [r for r in grammar3.rules if isinstance(r, FormControl)]
    assert form3.pending == tok.section_ids("B", 2)  # bar 3 opens phrase B


def test_a_model_without_section_tokens_refuses_a_form(plain):
    with pytest.raises(MusicgenError, match="no section tokens"):
        form_sections(plain, parse_form("A4"))


def test_prepare_writes_forms_for_aligned_songs(tmp_path, tok):
    from musicgen.data.layout import manifest_forms
    from musicgen.data.prepare import prepare

    src = tmp_path / "pop909"
    for n in ("001", "005"):
        (src / n).mkdir(parents=True)
        for f in (SONGS / n).iterdir():
            (src / n / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "prepared"
    yaml = ROOT / "configs" / "tokenizer" / "remi_song.yaml"
    prepare("pop909", src, out, yaml, workers=1, structure=STRUCTURE)
    import json

    entries = {json.loads(x)["path"]: json.loads(x) for x in (out / "manifest.jsonl").open()}
    assert entries["001/001.mid"]["form"] == "i4A4B8A4A4b4B8A4A4b4b4A4A4b4A4o3"
    assert "form" not in entries["005/005.mid"]  # it does not align
    split = entries["001/001.mid"]["split"]
    assert manifest_forms(out, split)[0] == entries["001/001.mid"]["form"]
    with pytest.raises(MusicgenError, match="structure folder not found"):
        prepare("pop909", src, out, yaml, workers=1, structure=tmp_path / "nope")


def test_vocabulary_growth_keeps_rows_and_seeds_melody_from_pitch(tok, plain):
    import torch
    from conftest import tiny_model_config

    from musicgen.model import build_model
    from musicgen.train.vocabulary import extend_vocabulary

    small = build_model(tiny_model_config(plain.vocab_size), plain)
    big = build_model(tiny_model_config(tok.vocab_size), tok)
    grown = extend_vocabulary(big, small.state_dict(), plain.vocab_size, tok)
    old = small.state_dict()["embed.weight"]
    new = grown["embed.weight"]
    assert new.shape[0] == tok.vocab_size
    torch.testing.assert_close(new[: plain.vocab_size], old)
    m60, p60 = tok.token_id("MelodyPitch_60"), plain.token_id("Pitch_60")
    torch.testing.assert_close(new[m60], old[p60])
    torch.testing.assert_close(grown["head.weight"][m60], small.state_dict()["head.weight"][p60])


def test_crops_start_where_phrases_start(tok):
    from musicgen.data.dataset import CropDataset

    score, folder = song("001")
    aligned = align_song(score, folder)
    ids = np.array(tok.encode(aligned.score, sections=aligned.sections))
    data = CropDataset.__new__(CropDataset)
    data.tokenizer, data.start_at_sections, data.start_bar_every = tok, True, 4
    starts = data._crop_bars(ids)
    bars = tok.bar_starts(ids)
    assert list(starts) == [int(bars[s.bar]) for s in aligned.sections]
    assert all(tok.tables.family[ids[s + 1]] == RemiTables.SECTION for s in starts)


def test_copy_rule_copies_the_same_bar_of_the_last_phrase_with_the_label(tok):
    from musicgen.generation.rules import BarEcho

    score, folder = song("001")
    aligned = align_song(score, folder)
    ids = tok.encode(aligned.score, sections=aligned.sections)
    bars = tok.bar_starts(np.array(ids))
    first_a, second_a = [s for s in aligned.sections if s.label == "A"][:2]
    b_phrase = next(s for s in aligned.sections if s.label == "B")
    # two bars into the second A phrase: the source is two bars into the first A phrase
    at = int(bars[second_a.bar + 2])
    echo = BarEcho(tok, ids[: at + 1])
    assert echo._sources == [int(bars[first_a.bar + 2])]
    # a B bar has no earlier B phrase: no candidate, whatever the lag
    echo = BarEcho(tok, ids[: int(bars[b_phrase.bar + 1]) + 1])
    assert echo._sources == []
    # without phrase tokens the lags rule: bars 8 and 4 back
    plain_ids = [i for i in ids if not tok.section_mask()[i]]
    pb = tok.bar_starts(np.array(plain_ids))
    echo = BarEcho(tok, plain_ids[: int(pb[12]) + 1])
    assert set(echo._sources) <= {int(pb[4]), int(pb[8])}


def test_chords_per_phrase_follow_the_form():
    from musicgen.generation.api.request import GenerationRequest
    from musicgen.generation.controls.form_plan import parse_section_chords

    per = parse_section_chords("A: C G Am F; B: F G C Am")
    prog = per.over(parse_form("A4B2A2"))
    firsts = [bar[0].label for bar in prog.bars]
    assert firsts == ["C", "G", "Am", "F", "F", "G", "C", "G"]
    assert not prog.repeat
    with pytest.raises(MusicgenError, match="no progression for the form's phrase 'i'"):
        per.over(parse_form("i2A4"))
    assert parse_section_chords("C:maj G:maj") is None  # Harte labels are not phrase labels
    with pytest.raises(MusicgenError, match="needs a form"):
        GenerationRequest.build(chords="A: C G; B: F")
    request = GenerationRequest.build(chords="A: C G; B: F", form="A2B2")
    assert isinstance(request.chords, type(per)) and request.form == parse_form("A2B2")


def test_a_form_sets_the_bars_of_a_piece_from_scratch(tmp_path, monkeypatch):
    """`Model.generate(form=...)` without `bars` asks for the form's bars (None: the form
    decides), not the 16 of a piece without one; `bars=` given is kept; one real piece has
    its form's phrases."""
    from conftest import make_checkpoint

    import musicgen

    model = musicgen.load(make_checkpoint(tmp_path, str(ROOT / "configs/tokenizer/remi_song.yaml")))
    piece = model.generate(form="A1B1", seed=1, min_tokens=200)
    assert [(s.label, s.bars) for s in model.tokenizer.sections(piece.ids)] == [("A", 1), ("B", 1)]
    asked = []
    monkeypatch.setattr(model, "pieces", lambda num, bars, **fields: asked.append(bars) or [0])
    model.generate(form="A9B8")
    model.generate(form="A9B8", bars=2)
    model.generate()
    assert asked == [None, 2, 16]
