"""The one prompt builder: prompts come back note for note, the continuation starts at bar N+1,
the overlap rules, the tempo on the tokenizer's grid, and one prompt for every caller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import symusic
from grammars import ValidityOnly
from paths import DATA

import musicgen
from musicgen.evaluate import song_prompt
from musicgen.generation.api.prompt import (
    Prompt,
    bars_with_music,
    encode_song,
    load_prompt,
    merge,
    midi_pairing,
    only_notes,
    select_bars,
    tempo_at_bar,
)

POP = sorted((DATA / "pop909").glob("*/*.mid"))
GROOVES = sorted((DATA / "groove_drums").rglob("*.mid"))


def note_set(score: symusic.Score, keep=lambda n: True) -> list[tuple]:
    return sorted(
        (n.time, n.duration, n.pitch, n.velocity) for t in score.tracks for n in t.notes if keep(n)
    )


@pytest.fixture(scope="module")
def models(tiny_checkpoints) -> dict[str, musicgen.Model]:
    return {k: musicgen.load(v) for k, v in tiny_checkpoints.items()}


@pytest.mark.parametrize("kind,songs", [("remi", POP), ("groove", GROOVES)])
@pytest.mark.parametrize("length", [{"bars": 2}, {"prompt_bars": (0, 2)}])
def test_every_bundled_two_bar_prompt_comes_back_note_for_note(
    models, kind, songs, length, tmp_path
):
    """`bars=2`: the first 2 bars that hold music (and a pickup's bar); `prompt_bars=(0, 2)`:
    bars 0-1 from time 0. Either way the output starts with exactly those notes, moved to 0."""
    model = models[kind]
    tok = model.tokenizer
    later = 0
    for song in songs:
        try:
            prompt = model.prompt(song, **length)
        except musicgen.MusicgenError as exc:  # only exact bars may be silent, and then say so
            assert "prompt_bars" in length and "hold no notes" in str(exc), song.name
            continue
        music = model.continue_midi(song, **length, seed=0, max_tokens=48)
        back = symusic.Score(str(music.save(tmp_path / "c.mid")))
        ref = tok.decode(tok.encode(song))  # the whole song at the tokenizer's resolution
        bar = 4 * ref.ticks_per_quarter
        begin, cut = prompt.first_bar * bar, prompt.bars * bar
        expected = midi_pairing(only_notes(ref, lambda n, b=begin, c=cut: b <= n.time < b + c))
        assert note_set(back, lambda n, c=cut: n.time < c) == note_set(
            expected.shift_time(-begin)
        ), song.name
        later += sum(n.time >= cut for t in back.tracks for n in t.notes)
    assert later > 0  # the continuations wrote notes, all after the prompt's bars


def _pickup_song(tmp_path, silent: int = 2) -> tuple[Path, symusic.Score]:
    """A bundled song (it starts on its first beat) moved `silent` + 1 bars later, with a
    pickup in the last beat of the bar before it: `silent` empty bars, a pickup, the music."""
    score = symusic.Score(str(POP[4]))  # 005.mid: its first note starts in bar 0, beat 1
    bar = 4 * score.ticks_per_quarter
    moved = score.shift_time((silent + 1) * bar)
    pickup = symusic.Track("pickup", 0, False)
    for k, pitch in enumerate((67, 69)):
        pickup.notes.append(
            symusic.Note((silent + 1) * bar - bar // 4 + k * bar // 8, 100, pitch, 90)
        )
    moved.tracks.append(pickup)
    path = tmp_path / "late.mid"
    moved.dump_midi(str(path))
    return path, score


def test_bars_are_the_first_that_hold_music_with_their_pickup(models, tmp_path):
    """`--bars 2` on a song with 2 silent bars and a pickup is the pickup's bar and the first 2
    bars of music, as `evaluate style` feeds, never a prompt without a note."""
    path, original = _pickup_song(tmp_path)
    model = models["remi"]
    tok = model.tokenizer
    prompt = model.prompt(path, bars=2)
    assert (prompt.first_bar, prompt.bars) == (2, 3)
    bar = 4 * prompt.notes.ticks_per_quarter
    onsets = sorted(n.time for t in prompt.notes.tracks for n in t.notes)
    assert bar // 2 <= onsets[0] < bar <= onsets[2]  # the pickup, then the music from bar 1
    ref = tok.decode(tok.encode(POP[4]))  # 005's own first 2 bars, a bar later in the prompt
    head = only_notes(ref, lambda n: n.time < 2 * bar).shift_time(bar)
    assert set(note_set(head)) <= set(note_set(prompt.notes))
    assert len(note_set(prompt.notes)) == len(note_set(head)) + 2
    assert song_prompt(tok, encode_song(tok, path), 2).ids == prompt.ids  # one rule
    with pytest.raises(musicgen.MusicgenError, match="bars 0:2 hold no notes"):
        model.prompt(path, prompt_bars=(0, 2))  # exact bars from time 0: silent, an error
    assert model.prompt(path, prompt_bars=(2, 5)).ids == prompt.ids
    assert original.note_num() + 2 == symusic.Score(str(path)).note_num()


def test_bars_with_music_is_what_a_bars_prompt_may_ask(models, tmp_path):
    """A bundled song, the same a bar later (a silent first bar, as the whole-song model often
    writes) and two bars and a pickup later: the same bars with music, and `select_bars` takes
    exactly that many, one more is refused with that count."""
    tok = models["remi"].tokenizer
    score = symusic.Score(str(POP[4]))  # its first note starts in bar 0, beat 1
    late = tmp_path / "late_by_a_bar.mid"
    score.shift_time(4 * score.ticks_per_quarter).dump_midi(str(late))
    pickup, _ = _pickup_song(tmp_path)
    own = encode_song(tok, POP[4])
    count = bars_with_music(tok, own)
    assert count == len(tok.bar_starts(np.asarray(own))) > 2
    for path in (late, pickup):
        ids = encode_song(tok, path)
        assert bars_with_music(tok, ids, path.name) == count, path.name
        assert len(tok.bar_starts(np.asarray(ids))) > count  # the silent bars are bars
        assert select_bars(tok, ids, count, where=path.name).notes.note_num() > 0
        with pytest.raises(musicgen.MusicgenError, match=f"has {count} bars, fewer than"):
            select_bars(tok, ids, count + 1, where=path.name)


def test_remi_prompt_is_fed_up_to_the_next_bar(models):
    tok = models["remi"].tokenizer
    ids = encode_song(tok, POP[0])  # the song's annotated chords included, as prompts read it
    starts = tok.bar_starts(np.asarray(ids))
    prompt = load_prompt(tok, POP[0], prompt_bars=(1, 3))
    assert prompt.ids == [tok.bos_id, *ids[starts[1] : starts[3] + 1]]  # ends with bar 4's Bar
    assert prompt.bars == 2 and prompt.offset == starts[1]


def _score(notes: list[tuple[int, int, int]], tpq: int = 4) -> symusic.Score:
    score = symusic.Score(tpq)
    track = symusic.Track("piano", 0, False)
    for t, d, p in notes:
        track.notes.append(symusic.Note(t, d, p, 80))
    score.tracks.append(track)
    return score


def test_overlap_rules():
    # 1 bar of 4/4 at 4 ticks per quarter: the continuation starts at tick 16
    prompt_notes = midi_pairing(_score([(0, 8, 60), (4, 2, 60), (12, 10, 64), (14, 1, 62)]))
    # nested same-pitch notes keep their onsets and ends; the earlier onset takes the earlier end
    assert note_set(prompt_notes) == [
        (0, 6, 60, 80),
        (4, 4, 60, 80),
        (12, 10, 64, 80),
        (14, 1, 62, 80),
    ]
    prompt = Prompt(ids=[1], bars=1, notes=prompt_notes)
    generated = _score([(2, 3, 67), (16, 4, 64), (22, 4, 64), (16, 8, 67)])
    merged = merge(prompt, generated)
    assert note_set(merged) == [
        (0, 6, 60, 80),
        (4, 4, 60, 80),
        (12, 10, 64, 80),
        (14, 1, 62, 80),  # the prompt
        (16, 8, 67, 80),  # the continuation from bar 2 on (67 at tick 2 is in the prompt's bar)
        (22, 4, 64, 80),  # 64 at 16 dropped: it starts while the prompt's 64 sounds (to 22)
    ]


def test_prompt_notes_are_what_a_written_file_reads_back(models, tmp_path):
    tok = models["remi"].tokenizer
    for song in POP:
        notes = load_prompt(tok, song, bars=4).notes
        notes.dump_midi(str(tmp_path / "p.mid"))
        assert note_set(symusic.Score(str(tmp_path / "p.mid"))) == note_set(notes), song.name


def test_tempo_is_read_on_the_tokenizers_four_four_grid(tmp_path):
    score = symusic.Score(480)
    score.time_signatures.append(symusic.TimeSignature(0, 3, 4))
    score.tempos.append(symusic.Tempo(0, 100.0))
    score.tempos.append(symusic.Tempo(2 * 3 * 480, 140.0))  # bar 2 of the file's 3/4 grid
    score.tempos.append(symusic.Tempo(2 * 4 * 480, 90.0))  # bar 2 of the tokenizer's 4/4 grid
    track = symusic.Track("piano", 0, False)
    track.notes.append(symusic.Note(0, 480, 60, 80))
    score.tracks.append(track)
    path = tmp_path / "three_four.mid"
    score.dump_midi(str(path))
    assert tempo_at_bar(path, 0) == pytest.approx(100.0)
    assert tempo_at_bar(path, 1) == pytest.approx(100.0)  # tick 1920: before both changes
    # tick 3840; on the file's 3/4 grid bar 2 would begin at 2880, where 140 qpm starts
    assert tempo_at_bar(path, 2) == pytest.approx(90.0, abs=0.01)
    # groove counts bars from the bar of the first note: with the note moved into bar 1, the
    # tokenizer's bar 1 begins at tick 3840
    score.tracks[0].notes[0] = symusic.Note(2000, 480, 60, 80)
    score.dump_midi(str(path))
    assert tempo_at_bar(path, 1, from_first_note=True) == pytest.approx(90.0, abs=0.01)
    assert tempo_at_bar(path, 1) == pytest.approx(100.0)


def test_continue_and_evaluate_style_feed_the_same_prompt(models):
    tok = models["remi"].tokenizer
    for song in POP:
        ids = encode_song(tok, song)  # as evaluate style reads a prompt song
        assert song_prompt(tok, ids, 2).ids == load_prompt(tok, song, bars=2).ids, song.name


def test_a_pop909_prompt_reads_its_chord_annotation_like_prepare():
    """A prompt beside a chord_midi.txt is encoded with the annotated chords (as the training
    data of `prepare --dataset pop909`), not with miditok's sparse detection."""
    from musicgen.tokenizers import build_tokenizer
    from musicgen.tokenizers.chords import read_chord_file

    tok = build_tokenizer("remi")
    song = DATA / "pop909" / "001" / "001.mid"
    ids = encode_song(tok, song)
    assert ids == tok.encode(song, chords=read_chord_file(song.parent / "chord_midi.txt"))
    chords = [i for i in ids if tok.token_name(i).startswith("Chord_")]
    detected = [i for i in tok.encode(song) if tok.token_name(i).startswith("Chord_")]
    assert len(chords) > 20 > len(detected) or len(chords) > 5 * max(1, len(detected))


@pytest.mark.parametrize("kind,songs", [("remi", POP), ("groove", GROOVES)])
@pytest.mark.parametrize("new_bars", [1, 3])
def test_new_bars_counts_the_bars_written_after_the_prompt(models, kind, songs, new_bars):
    """REMI's prompt ends by opening the next bar (its lead-in `Bar`): that bar is the first new
    one, so `new_bars=N` writes N bars after the prompt, not N + 1 (groove: no lead-in)."""
    m = models[kind]
    wrap = ValidityOnly if kind == "groove" else None  # untrained: see ValidityOnly
    piece = m.continue_midi(
        songs[0], bars=2, new_bars=new_bars, seed=5, min_tokens=4096, grammar_wrap=wrap
    )
    ids = np.asarray(piece.ids)
    prompt_bars = len(m.tokenizer.bar_starts(ids[: piece.prompt_len]))
    opened = kind == "remi"  # the lead-in Bar is counted among the prompt's starts
    written = len(m.tokenizer.bar_starts(ids)) - prompt_bars + int(opened)
    assert piece.stop == "bars" and written == new_bars


def test_a_list_of_prompts_continues_each_in_one_batch(models):
    """`Model.pieces(prompt=[...])` (what `evaluate form` uses): one piece per prompt, each
    starting with its own prompt's notes, in the order given; a wrong count is one line."""
    from musicgen.evaluate.style import prompt_check

    m = models["remi"]
    prompts = [m.prompt(POP[0], 2), m.prompt(POP[1], 2)]
    pieces = list(m.pieces(2, prompt=prompts, bars=1, seed=3, batch_size=2))
    assert len(pieces) == 2
    for p, piece in zip(prompts, pieces, strict=True):
        assert piece.ids[: len(p.ids)] == p.ids
        assert prompt_check(p, piece.score)["kept"]
    with pytest.raises(musicgen.MusicgenError, match="^prompt: 2 prompts for num=3 pieces"):
        m.pieces(3, prompt=prompts, bars=1)
    with pytest.raises(musicgen.MusicgenError, match="^chords: give one prompt"):
        m.pieces(2, prompt=prompts, bars=1, chords="C G")
