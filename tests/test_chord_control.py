"""Chord control: progressions from symbols, Harte labels, POP909 annotations and MIDI; the
grammar wrapper that forces them; `chords=` in the API and `--chords` on the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from grammars import controls, steered
from paths import DATA

import musicgen
from musicgen.cli import main
from musicgen.data.trio_patterns import parse_chord
from musicgen.errors import MusicgenError
from musicgen.generation.api.prompt import encode_song, prompt_from_ids
from musicgen.generation.controls.chord_plan import (
    NO_CHORD_TOKENS,
    check_progression,
    chord_events,
    chord_id,
    load_progression,
    parse_progression,
    progression_from_chord_file,
    progression_from_midi,
    read_chord,
)
from musicgen.measures.metrics import notes_from_score, notes_per_onset
from musicgen.tokenizers import build_tokenizer
from musicgen.tokenizers.chords import (
    SYMBOL_SUFFIXES,
    label_pitch_classes,
    parse_harte,
    read_chord_file,
    symbol_to_harte,
)

SONGS = sorted((DATA / "pop909").glob("*/*.mid"))
SONG = DATA / "pop909" / "001" / "001.mid"


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer("remi")


@pytest.fixture(scope="module")
def tiny(tiny_checkpoints):
    return musicgen.load(tiny_checkpoints["remi"])


def names(tok, events) -> list[tuple[int, int, str]]:
    return [(b, p, tok.token_name(c).removeprefix("Chord_")) for b, p, c in events]


def slot_tokens(tok, prog) -> list[list[str | None]]:
    """Each bar's chords as token names (None for N)."""
    out = []
    for bar in prog.bars:
        ids = [chord_id(tok, s, strict=True) for s in bar]
        out.append([None if i is None else tok.token_name(i).removeprefix("Chord_") for i in ids])
    return out


# --- the one Harte parser and chord symbols --------------------------------------------------


@pytest.mark.parametrize(
    "label, pcs, token",
    [
        ("C:9", {0, 4, 7, 10, 2}, "C:7dom"),  # Harte 2005: 9 = 1,3,5,b7,9 (the ninth is there)
        ("C:maj9", {0, 4, 7, 11, 2}, "C:7maj"),
        ("C:min9", {0, 3, 7, 10, 2}, "C:7min"),
        ("C:maj(9)", {0, 4, 7, 2}, "C:maj"),  # an added ninth: the triad wins the tie with sus2
        ("D:sus4(b7)", {0, 5, 7, 10}, "D:sus4"),
        ("A:13", {0, 4, 7, 10, 2, 5, 9}, "A:7dom"),
    ],
)
def test_ninth_chords_hold_their_ninth_in_both_readers(tok, label, pcs, token):
    """A ninth chord is voiced with its ninth, not read as a seventh (C:9 is not C7)."""
    chord = parse_harte(label)
    assert chord.pitch_classes == frozenset(pcs)
    assert frozenset(parse_chord(label).intervals) == frozenset(pcs)  # the trio's reading
    assert label_pitch_classes(label) == (chord.root, frozenset(pcs))  # the tokenizer's
    slot = read_chord(label)
    assert tok.token_name(chord_id(tok, slot, strict=True)) == f"Chord_{token}"


@pytest.mark.parametrize("suffix", sorted(SYMBOL_SUFFIXES))
def test_every_chord_symbol_is_its_harte_label(suffix):
    harte = symbol_to_harte(f"Eb{suffix}")
    assert harte == f"Eb:{SYMBOL_SUFFIXES[suffix]}"
    assert parse_harte(harte).root == 3


def test_symbols_and_harte_labels_give_the_same_tokens(tok):
    symbols = parse_progression("C G Am F Bdim E7 Fmaj7 Dm7 F#m7b5 Gsus4 Ebaug Cdim7 C/E Am7/G")
    harte = parse_progression(
        "C:maj G:maj A:min F:maj B:dim E:7 F:maj7 D:min7 F#:hdim7 G:sus4 Eb:aug C:dim7 C:maj/3 "
        "A:min7/b7"
    )
    assert slot_tokens(tok, symbols) == slot_tokens(tok, harte)
    assert slot_tokens(tok, symbols)[:4] == [["C:maj"], ["G:maj"], ["A:min"], ["F:maj"]]
    assert symbol_to_harte("Am7/G") == "A:min7/b7" and parse_harte("A:min7/b7").bass == 7


# --- progression syntax -----------------------------------------------------------------------


def test_progression_syntax(tok):
    prog = parse_progression("C G Am F")
    assert prog.labels() == ["C", "G", "Am", "F"] and prog.repeat
    bars = parse_progression("C | G D | Am x2 | F C G Em")
    assert bars.labels() == ["C", "G D", "Am", "Am", "F C G Em"]
    assert [s.onset for s in bars.bars[1]] == [0.0, 0.5]
    assert [s.onset for s in bars.bars[4]] == [0.0, 0.25, 0.5, 0.75]
    assert parse_progression("C x3 G").labels() == ["C", "C", "C", "G"]
    assert parse_progression(["C", "G D", "N"]).labels() == ["C", "G D", "N"]
    assert parse_progression("C|G").labels() == ["C", "G"]
    assert slot_tokens(tok, parse_progression("N C"))[0] == [None]


@pytest.mark.parametrize(
    "text, labels",
    [
        ("Am F C G x2", ["Am", "F", "C", "G"] * 2),
        ("Am | F | C | G x2", ["Am", "F", "C", "G"] * 2),  # a chart's x2 at the line's end
        ("Am | F | C | G | x2", ["Am", "F", "C", "G"] * 2),
        ("Am F C G\nx2", ["Am", "F", "C", "G"] * 2),  # a line of its own: the line above
        ("Am | F x2\nC | G x2", ["Am", "F", "Am", "F", "C", "G", "C", "G"]),  # line by line
        ("C | G x3 |", ["C", "G", "G", "G"]),  # closed by '|': the bar it ends
        ("Am x2 | F", ["Am", "Am", "F"]),  # inside a line: the bar it ends
    ],
)
def test_x_n_after_a_line_repeats_the_whole_line(text, labels):
    assert parse_progression(text).labels() == labels


@pytest.mark.parametrize(
    "text, words",
    [
        ("C G Hm F", "unknown chord 'Hm'"),
        ("C Gblues", "unknown chord 'Gblues'"),
        ("C:blues", "unknown chord 'C:blues'"),
        ("C | G Am D | F", "bar 2 has 3 chords; give 1, 2 or 4"),
        ("", "empty progression"),
        ("x2 C", "'x2' repeats no bar"),
    ],
)
def test_bad_progressions_are_one_line_errors(text, words):
    with pytest.raises(MusicgenError, match="^chords: ") as exc:
        parse_progression(text)
    assert words in str(exc.value) and "\n" not in str(exc.value)
    if "unknown chord" in words:  # the message says what is accepted
        assert "chord symbols (C, Am, G7" in str(exc.value) and "Harte labels" in str(exc.value)


def test_a_chord_without_a_token_and_a_model_without_chords_are_errors(tok):
    with pytest.raises(MusicgenError, match="^chords: 'C5' has no chord token in this model"):
        check_progression(tok, "C C5")
    with pytest.raises(MusicgenError) as exc:
        check_progression(build_tokenizer("groove"), "C G")
    assert str(exc.value) == NO_CHORD_TOKENS


# --- progressions from files ------------------------------------------------------------------


def test_chord_file_progression_is_what_the_tokenizer_writes(tok):
    """The wrapper forcing a song's own annotation accepts that song's annotated encoding id for
    id: chords at the bars and positions where the tokenizer puts them, nowhere else."""
    for song in SONGS:
        ids = tok.encode(song, chords=read_chord_file(song.parent / "chord_midi.txt"))
        prog = progression_from_chord_file(song.parent / "chord_midi.txt")
        grammar = steered(tok, prog)(tok.grammar(), [])
        assert all(grammar.advance(t) for t in ids), song
        assert grammar.errors == 0 and grammar.finished()


def test_chord_file_progression_of_a_bundled_song(tmp_path):
    prog = progression_from_chord_file(DATA / "pop909" / "001" / "chord_midi.txt")
    assert not prog.repeat and len(prog.bars) > 16
    first = next(s for bar in prog.bars for s in bar if s.chord is not None)
    assert first.label == "B:maj"  # the file's first chord after its leading N
    alone = tmp_path / "chord_midi.txt"
    alone.write_bytes((SONG.parent / "chord_midi.txt").read_bytes())
    with pytest.raises(MusicgenError, match="needs its MIDI file for the tempo map"):
        progression_from_chord_file(alone)
    assert progression_from_chord_file(alone, midi=SONG) == prog


def test_midi_progression_is_the_tokenizers_detection(tok):
    prog = progression_from_midi(SONG, tok)
    detected = chord_events(tok, tok.encode(SONG))
    assert [(b, int(s.onset * 16)) for b, bar in enumerate(prog.bars) for s in bar] == [
        (b, p) for b, p, _ in detected
    ]


def test_load_progression_dispatches_on_the_spec(tok, tmp_path):
    assert load_progression("C G", tok).labels() == ["C", "G"]
    assert load_progression(["Am", "F"], tok).labels() == ["Am", "F"]
    assert not load_progression(str(SONG.parent / "chord_midi.txt"), tok).repeat
    assert not load_progression(SONG, tok).repeat
    with pytest.raises(MusicgenError, match="^chords: .*nope.mid: file not found"):
        load_progression(str(tmp_path / "nope.mid"), tok)
    with pytest.raises(MusicgenError, match="^chords: give a string"):
        load_progression(3, tok)


# --- the wrapper ------------------------------------------------------------------------------


def random_walk(tok, wrap, prompt, steps: int, seed: int) -> list[int]:
    """Draw uniformly among the allowed ids; the mask must never be empty."""
    rng = np.random.default_rng(seed)
    base = tok.grammar()
    for t in prompt:
        base.advance(t)
    g = wrap(base, list(prompt))
    ids = list(prompt)
    for _ in range(steps):
        if g.finished():
            break
        allowed = np.flatnonzero(g.allowed())
        assert len(allowed) > 0, [tok.token_name(i) for i in ids[-6:]]
        tok_id = int(rng.choice(allowed))
        eos = tok.eos_id
        if tok_id == eos and len(allowed) > 1:  # walk on: end only when nothing else is left
            tok_id = int(rng.choice(allowed[allowed != eos]))
        assert g.advance(tok_id)
        ids.append(tok_id)
    assert g.errors == 0
    return ids


@pytest.mark.parametrize("text", ["C G Am F", "C G | Am F | N | Dm G7 C Am x2", "C"])
def test_the_wrapper_never_forbids_everything(tok, text):
    wrap = steered(tok, text)
    for seed in range(3):
        ids = random_walk(tok, wrap, [tok.bos_id], 600, seed)
        plain = tok.grammar()
        assert all(plain.advance(t) for t in ids)  # and the result is valid REMI


def expected(tok, text: str, bars: int) -> list[tuple[int, int, str]]:
    """The chord changes the tokenizer would write for a repeated progression."""
    prog, out, current = parse_progression(text), [], None
    for b in range(bars):
        for s in prog.bar(b):
            cid = chord_id(tok, s, strict=True)
            if cid is not None and cid != current:
                out.append((b, int(s.onset * 16), tok.token_name(cid).removeprefix("Chord_")))
            current = cid
    return out


@pytest.mark.parametrize("text", ["C G Am F", "C G | Am | N | Am", "C C G", "Dm7 G7 | C Am"])
def test_forced_chords_appear_at_their_bars(tiny, text):
    tok = tiny.tokenizer
    pieces = tiny.generate_many(2, bars=6, seed=3, chords=text, max_tokens=1500)
    for piece in pieces:
        assert piece.errors == 0
        got = chord_events(tok, piece.ids)
        bars = len(tok.bar_starts(np.asarray(piece.ids)))
        assert names(tok, got) == expected(tok, text, bars) and bars >= 1


def test_the_shipped_model_writes_notes_under_the_chords():
    m = musicgen.load("pop909_sine_spe_gated")
    piece = m.generate(bars=4, seed=1, chords="C G Am F")
    assert names(m.tokenizer, chord_events(m.tokenizer, piece.ids)) == [
        (0, 0, "C:maj"),
        (1, 0, "G:maj"),
        (2, 0, "A:min"),
        (3, 0, "F:maj"),
    ]
    assert len(piece.score.tracks[0].notes) > 8


def test_the_shipped_model_keeps_its_texture_under_the_chords():
    """The chord tones choose pitches, they do not stack them: 4 seeded 4-bar pieces forcing
    "C G Am F" strike under 2.5 notes per onset, as real songs do (about 2; the nats added
    plainly stacked 5-6 in 16-bar pieces)."""
    m = musicgen.load("pop909_sine_spe_gated")
    pieces = m.generate_many(4, bars=4, seed=1, chords="C G Am F")
    stack = np.mean([notes_per_onset(notes_from_score(p.score)) for p in pieces])
    assert 1.0 < stack < 2.5


def test_a_continuation_is_forced_from_its_first_new_bar(tiny, tok):
    ids = encode_song(tok, SONG)
    prompt = prompt_from_ids(tok, ids, 2, 4)  # ends with the Bar that opens the first new bar
    kept = chord_events(tok, prompt.ids)
    wrap = steered(tok, "Em A")
    walked = random_walk(tok, wrap, prompt.ids, 300, 0)
    got = chord_events(tok, walked)
    assert got[: len(kept)] == kept  # the prompt's own chords, untouched
    assert names(tok, got[len(kept) :])[:2] == [(2, 0, "E:min"), (3, 0, "A:maj")]
    # the untrained model may end the piece early (EOS); seed 3 writes both new bars
    piece = tiny.continue_midi(SONG, 2, new_bars=2, seed=3, chords="Em A", max_tokens=800)
    assert tok.token_name(piece.ids[piece.prompt_len - 1]) == "Bar_None"  # the lead-in
    new = chord_events(tok, piece.ids[piece.prompt_len - 1 :])  # bar 0: the first new bar
    assert names(tok, new) == [(0, 0, "E:min"), (1, 0, "A:maj")]


def test_a_songs_chord_file_keeps_its_bars_after_the_prompt(tiny):
    """Continuing a song with its own chord_midi.txt: the first new bar gets the song's chord
    of that bar (the progression is not restarted at the song's bar 0)."""
    tok, chord_file = tiny.tokenizer, SONG.parent / "chord_midi.txt"
    prompt = tiny.prompt(SONG, 2)
    after = prompt.first_bar + prompt.bars
    prog = progression_from_chord_file(chord_file)
    want = tok.token_name(chord_id(tok, prog.sounding(after), strict=False))
    piece = tiny.continue_midi(SONG, 2, new_bars=1, seed=0, chords=str(chord_file))
    new = chord_events(tok, piece.ids[piece.prompt_len - 1 :])
    assert new[0][:2] == (0, 0) and tok.token_name(new[0][2]) == want
    assert prog.sounding(0) is None or prog.sounding(0).label != prog.sounding(after).label


def test_chords_need_the_grammar(tiny):
    with pytest.raises(MusicgenError, match="^chords and grammar: chords need the grammar"):
        tiny.generate(bars=2, chords="C G", grammar=False)


# --- the command line -------------------------------------------------------------------------


def test_cli_chords_end_to_end(tiny_checkpoints, tmp_path, capsys):
    ckpt, out = tiny_checkpoints["remi"], tmp_path / "out"
    common = ["--checkpoint", ckpt, "--out", out, "--num", "1", "--seed", "5", "--save-tokens"]
    rc = main(
        [
            str(a)
            for a in [
                "generate",
                *common,
                "--bars",
                "4",
                "--min-tokens",
                "2000",
                "--chords",
                "Am F C G",
            ]
        ]
    )
    assert rc == 0
    tok = build_tokenizer("remi")
    record = json.loads(next(out.glob("*.json")).read_text())
    assert [n for _, _, n in names(tok, chord_events(tok, record["ids"]))][:4] == [
        "A:min",
        "F:maj",
        "C:maj",
        "G:maj",
    ]
    chord_file = SONG.parent / "chord_midi.txt"
    argv = ["continue", *common, "--prompt", SONG, "--new-bars", "2", "--chords", chord_file]
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    rc = main([str(a) for a in ["generate", *common, "--bars", "2", "--chords", "C Xyz"]])
    err = capsys.readouterr().err
    assert (
        rc == 1 and err.startswith("error: --chords: unknown chord 'Xyz'") and err.count("\n") == 1
    )


def test_chord_tones_get_the_bonus_where_their_chord_sounds(tok):
    """The soft rule (`tones`): at every step of a random walk in "C | G", exactly the Pitch ids
    of the bar's chord carry the bonus, as a choice among all the Pitch ids; without it the
    grammar adds nothing, and it adds no plain bonus either way."""
    plain = steered(tok, "C G", chord_tones=0)(tok.grammar(), [tok.bos_id])
    assert plain.choice(tok.vocab_size) is None and plain.bonus() is None
    g = steered(tok, "C G", chord_tones=2.0)(tok.grammar(), [tok.bos_id])
    rng, bars, pitch = np.random.default_rng(0), -1, tok.tables.pitch
    chords = [{0, 4, 7}, {7, 11, 2}]
    for _ in range(300):
        assert g.bonus() is None
        if bars >= 0:
            bonus, group = g.choice(tok.vocab_size)
            boosted = {int(p) % 12 for p in pitch[bonus == 2.0]}
            assert boosted == chords[bars % 2] and set(np.unique(bonus)) == {0.0, 2.0}
            assert (bonus[pitch < 0] == 0).all() and (group == (pitch >= 0)).all()
        allowed = np.flatnonzero(g.allowed())
        tok_id = int(rng.choice(allowed[allowed != tok.eos_id]))
        assert g.advance(tok_id)
        bars += tok_id == tok.bar_id


def test_chord_tones_leave_the_chance_of_another_note_at_the_onset_unchanged(tok):
    """After a note in a C bar the model chooses between another note (a Pitch) and moving on
    (a Position, a Bar): through the sampler's filters, the chord tones' nats change which
    pitch comes, never the probability of another note (nats added plainly raise it: they
    stacked chords)."""
    from musicgen.generation.decoding.sample import SamplingOptions, filter_logits

    g = steered(tok, "C", chord_tones=2.0)(tok.grammar(), [tok.bos_id])
    pitch = tok.tables.pitch
    assert g.advance(tok.bos_id)
    while True:  # Bar, Position_0, the C chord, a note's Pitch
        ids = np.flatnonzero(g.allowed())
        ids = [int(i) for i in ids if not tok.token_name(int(i)).startswith("Tempo")]
        notes = [i for i in ids if pitch[i] >= 0]
        assert g.advance(notes[0] if notes else ids[0])
        if notes:
            break
    for _ in range(2):  # its Velocity and Duration
        assert g.advance(int(np.flatnonzero(g.allowed())[0]))
    assert g.allowed()[tok.bar_id] and g.allowed()[pitch >= 0].any()
    logits = torch.randn(1, tok.vocab_size, generator=torch.Generator().manual_seed(0))
    allowed = torch.from_numpy(g.allowed())[None]
    nats, group = (torch.from_numpy(a)[None] for a in g.choice(tok.vocab_size))
    options = SamplingOptions(temperature=1.0)
    plain = torch.softmax(filter_logits(logits, options, allowed), -1)[0]
    added = torch.softmax(filter_logits(logits, options, allowed, nats), -1)[0]
    chosen = torch.softmax(filter_logits(logits, options, allowed, choice=(nats, group)), -1)[0]
    another = torch.from_numpy(pitch >= 0)
    assert torch.isclose(chosen[another].sum(), plain[another].sum())
    assert added[another].sum() > plain[another].sum() + 0.05  # the nats added plainly
    tones = torch.from_numpy(tok.pitch_class_mask({0, 4, 7}))
    assert chosen[tones].sum() > plain[tones].sum()


def test_a_strong_chord_tone_bonus_keeps_every_note_in_the_chord(tiny):
    """Through the sampler: an untrained model with 30 nats for chord tones writes only C-major
    tones in C bars and G-major tones in G bars (until an onset has struck them all: the grammar
    allows a pitch once per onset); `tones` < 0 is an error."""
    from musicgen.generation.decoding.sample import SamplingOptions, generate

    tok = tiny.tokenizer
    res = generate(tiny.model, tok, [[tok.bos_id]] * 2, SamplingOptions(1.0, chord_tones=30.0),
                   800, bars=4, controls=controls(tok, "C G"),
                   generator=torch.Generator().manual_seed(0))  # fmt: skip
    chords, seen, pitch = [{0, 4, 7}, {7, 11, 2}], 0, tok.tables.pitch
    for r in res:
        bar, struck = -1, set()  # the pitches at the current onset
        for t in r.ids[: 1 + r.sampled]:
            bar += t == tok.bar_id
            struck = set() if tok.tables.position[t] >= 0 or t == tok.bar_id else struck
            if pitch[t] >= 0:
                tones = {int(p) for p in pitch[pitch >= 0] if p % 12 in chords[bar % 2]}
                # a note outside the chord only once every chord tone is struck at the onset
                assert int(pitch[t]) in tones or tones <= struck
                struck.add(int(pitch[t]))
                seen += 1
    assert seen > 10
    with pytest.raises(MusicgenError, match="^chord_tones: must be >= 0"):
        steered(tok, "C G", chord_tones=-1)


def test_chord_tones_is_a_sampling_option_from_the_api_to_the_grammar(tok):
    """`chord_tones` (CLI `--chord-tones`) reaches the chord grammar the API builds: 0 turns the
    soft rule off, N puts N nats on the bar's chord tones; the default is the measured one."""
    from musicgen.generation.api.request import GenerationRequest
    from musicgen.generation.rules import ChordControl

    measured = ChordControl.option.default
    assert GenerationRequest(chords="C G").options("remi").chord_tones == measured == 2.0

    def after_first_bar(nats: float):
        request = GenerationRequest(chords="C G", chord_tones=nats)
        wrap = steered(tok, request.chords, chord_tones=request.options("remi").chord_tones)
        g = wrap(tok.grammar(), [tok.bos_id])
        assert g.advance(tok.bos_id) and g.advance(tok.bar_id)
        return g.choice(tok.vocab_size)

    assert after_first_bar(0) is None
    bonus, _ = after_first_bar(5)
    assert {int(p) % 12 for p in tok.tables.pitch[bonus == 5.0]} == {0, 4, 7}
    with pytest.raises(MusicgenError, match="^chord_tones: must be >= 0"):
        GenerationRequest(chords="C G", chord_tones=-1)


def test_cli_rejects_a_negative_chord_tone_bonus(tiny_checkpoints, tmp_path, capsys):
    argv = ["generate", "--checkpoint", tiny_checkpoints["remi"], "--out", tmp_path / "o"]
    argv += ["--bars", "2", "--chords", "C G", "--chord-tones", "-1"]
    assert main([str(a) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --chord-tones: must be >= 0") and err.count("\n") == 1
