"""The studio without a browser: which models a page can reach, upload checks, sessions, jobs
through the generation API (progress, cancel, chords only where the API takes them), the form
box (a tiny untrained song model), the melody's colour in the player, an upload's parts kept
where the model has them (melody, groove parts), the endpoints' names and the command's errors.
The page in a browser: test_studio_browser.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import symusic

from musicgen.cli import main
from musicgen.errors import Cancelled, MusicgenError
from musicgen.studio import controls, inputs, jobs
from tests import hostile
from tests.paths import DATA, ROOT

LABEL = "pop909_sine_spe_gated"  # the page's default: whole songs with melody and form
MODEL = ROOT / "checkpoints" / LABEL
PIANO = "pop909_piano_sine_spe_gated"  # one voice, no sections: what a form box is hidden for
SONG = ROOT / "data" / "demo" / "pop909_005.mid"
SONG_TOKENS = ROOT / "configs" / "tokenizer" / "remi_song.yaml"


@pytest.fixture(scope="module")
def cache():
    return jobs.ModelCache(jobs.model_choices([MODEL]), "cpu")


@pytest.fixture(scope="module")
def songs(tmp_path_factory):
    """(cache, label) of a tiny untrained model with section and melody tokens, with two
    training forms beside it (`forms.json`, what `auto` draws from)."""
    from conftest import make_checkpoint

    folder = tmp_path_factory.mktemp("song")
    path = make_checkpoint(folder, str(SONG_TOKENS))
    (folder / "forms.json").write_text('["A2B2", "i4A32B32A32o4"]')
    choices = jobs.model_choices([path])
    return jobs.ModelCache(choices, "cpu"), next(iter(choices))


def write_score(path: Path, drums: bool, notes: int = 4) -> Path:
    score = symusic.Score(480)
    track = symusic.Track(name="t", program=0, is_drum=drums)
    for k in range(notes):
        track.notes.append(symusic.Note(k * 480, 480, 36 if drums else 60 + k, 90))
    score.tracks.append(track)
    score.dump_midi(str(path))
    return path


def test_only_the_given_and_shipped_models_are_reachable(cache, tmp_path):
    choices = jobs.model_choices([MODEL])
    assert list(choices)[0] == LABEL  # a --checkpoint comes first, once
    assert set(jobs.shipped_models()) <= set(choices)
    assert len(choices) == len(jobs.shipped_models())
    with pytest.raises(MusicgenError, match="not one of this studio's models"):
        cache.get(str(MODEL))  # a server path typed in the page is not a label
    with pytest.raises(MusicgenError, match="nope: model not found"):
        jobs.model_choices(["nope"])
    assert "pop909" in cache.card(LABEL)


def test_a_model_that_fails_to_load_is_one_line(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    cache = jobs.ModelCache(jobs.model_choices([broken]), "cpu")
    with pytest.raises(MusicgenError, match="^model broken: cannot be loaded"):
        cache.get("broken")
    assert "no model card" in cache.card("broken")


def test_uploads_are_checked_before_tokenizing(tmp_path):
    text = tmp_path / "notes.mid"
    text.write_text("not MIDI at all")
    with pytest.raises(MusicgenError, match="^notes.mid: not a MIDI file"):
        inputs.check_upload(text, "remi")
    empty = tmp_path / "empty.mid"
    empty.write_bytes(b"")
    with pytest.raises(MusicgenError, match="^empty.mid: empty file"):
        inputs.check_upload(empty, "remi")
    with pytest.raises(MusicgenError, match="over the upload limit of 0.001 MB"):
        inputs.check_upload(SONG, "remi", max_mb=0.001)
    huge = tmp_path / "huge.mid"
    huge.write_bytes(hostile.huge_delta(1))  # 45 bytes, 67 M bars
    with pytest.raises(MusicgenError, match="^huge.mid: too long"):
        inputs.check_upload(huge, "remi")
    drums = write_score(tmp_path / "drums.mid", drums=True)
    with pytest.raises(MusicgenError, match="^drums.mid: only drum notes"):
        inputs.check_upload(drums, "remi")
    assert inputs.check_upload(drums, "groove").tracks[0].is_drum  # the groove model reads drums
    silent = write_score(tmp_path / "silent.mid", drums=False, notes=0)
    with pytest.raises(MusicgenError, match="^silent.mid: no notes"):
        inputs.check_upload(silent, "remi")
    with pytest.raises(MusicgenError, match="upload a MIDI file first"):
        inputs.check_upload(None, "remi")
    assert len(inputs.check_upload(SONG, "remi").tracks) > 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: inputs.whole("bars", 0, 1, 64), "bars: must be >= 1 and <= 64, got 0"),
        (lambda: inputs.whole("bars", 1.5, 1, 64), "bars: must be a whole number, got 1.5"),
        (lambda: inputs.whole("num", "2", 1, 4), "num: must be a whole number, got '2'"),
        # the sampling numbers: the library's own ranges (the CLI's and the API's)
        (lambda: inputs.request(top_p=0), "top_p: must be >= "),
        (lambda: inputs.request(repeat=-1), "repeat: must be >= 0"),
        (lambda: inputs.request(temperature=float("nan")), "temperature: must be a finite"),
        (lambda: inputs.random_seed(-2), "seed: must be >= -1"),
        (lambda: inputs.prompt_length("seconds", seconds=0), "seconds: must be >= 0.1"),
    ],
)
def test_page_values_out_of_range_name_the_parameter(call, message):
    with pytest.raises(MusicgenError, match=message.replace("(", r"\(")):
        call()


def test_page_values_in_range_pass():
    assert inputs.whole("bars", 4.0, 1, 64) == 4 and inputs.whole("bars", None, 1, 64) is None
    assert inputs.random_seed(-1) is None and inputs.random_seed(7) == 7
    given = inputs.given(inputs.request(temperature=1.0, top_k=None, top_p=1, repeat=2))
    assert given == {"temperature": 1.0, "top_p": 1.0, "repeat": 2.0}
    assert inputs.request(top_k=40.0).top_k == 40  # a number box's whole float


def test_each_page_gets_its_own_session(tmp_path):
    template = jobs.Session(tmp_path)
    a, b = copy.deepcopy(template), copy.deepcopy(template)  # what gr.State does per page
    assert a is not b and a.running is not b.running and a.pieces is not b.pieces
    assert a.dir() != b.dir() and a.dir().parent == tmp_path / jobs.SESSIONS
    for k in range(jobs.MAX_SESSION_PIECES + 2):
        midi = a.dir() / f"{k}.mid"
        midi.write_bytes(b"x")
        a.add(jobs.Piece(f"p{k}", midi, midi.with_suffix(".png"), None, k))
    assert len(a.pieces) == jobs.MAX_SESSION_PIECES and a.pieces[0].label == "p2"
    assert not (a.dir() / "0.mid").exists() and (a.dir() / "2.mid").exists()
    assert a.find("p5").seed == 5 and a.find("nope") is None
    folder = a.dir()
    a.close()
    assert not folder.exists() and b.dir().exists() and not a.pieces


def test_generate_renders_midi_roll_and_audio_and_repeats_with_its_seed(cache, tmp_path):
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    [piece] = jobs.run_generate(model, session, "pop", bars=2, num=1, seed=3, temperature=1.0)
    assert piece.seed == 3 and piece.label.startswith("gen_001: pop, seed 3")
    assert notes_of(piece.midi)  # a piece with notes (seed 5 writes a silent bar)
    assert piece.midi.parent == session.dir() and piece.png.read_bytes()[:4] == b"\x89PNG"
    assert piece.audio is not None and piece.audio.stat().st_size > 44
    again = jobs.run_generate(model, session, "pop", bars=2, seed=3, temperature=1.0)
    assert again[0].midi.read_bytes() == piece.midi.read_bytes()
    assert [p.label[:7] for p in session.pieces] == ["gen_001", "gen_002"]
    with pytest.raises(MusicgenError, match="bars: must be >= 1"):
        jobs.run_generate(model, session, "pop", bars=0)
    with pytest.raises(MusicgenError, match="^chords: give chord symbols"):  # no server file
        jobs.run_generate(model, session, "pop", bars=1, chords=str(SONG))
    [forced] = jobs.run_generate(model, session, "pop", bars=2, seed=5, chords="C G")
    assert forced.midi.is_file()


def test_continue_keeps_the_prompt_and_refuses_bad_prompts(cache, tmp_path):
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    [piece] = jobs.run_continue(model, session, "pop", SONG, prompt_bars=2, new_bars=1, seed=2)
    assert "continues 2 bars of pop909_005.mid" in piece.label
    [one] = jobs.run_continue(model, session, "pop", SONG, prompt_bars=1, new_bars=1, seed=2)
    assert "continues 1 bar of pop909_005.mid" in one.label
    prompt = model.prompt(SONG, bars=2).notes.to("quarter")
    kept = symusic.Score(str(piece.midi)).to("quarter")

    def first_bars(score):
        return sorted(
            (round(n.time, 3), n.pitch) for t in score.tracks for n in t.notes if n.time < 8
        )

    assert first_bars(kept) == first_bars(prompt)
    roll = jobs.prompt_preview(model, session, SONG, "bars", 2)
    assert roll.read_bytes()[:4] == b"\x89PNG"
    drums = write_score(tmp_path / "drums.mid", drums=True)
    with pytest.raises(MusicgenError, match="only drum notes"):
        jobs.run_continue(model, session, "pop", drums)


def notes_of(path: Path) -> list[tuple[float, int]]:
    score = symusic.Score(str(path)).to("quarter")
    return sorted((round(n.time, 3), n.pitch) for t in score.tracks for n in t.notes)


def test_stop_keeps_the_whole_bars_written(cache, tmp_path):
    """Stop during a 64-bar job: the sampler ends at its next step, and the piece keeps the
    whole bars it had written, labelled with where it stopped: the same notes as that seed
    asked for exactly those bars."""
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    seen = []

    def progress(done, total):
        seen.append(done)
        if done / total * 64 >= 3 and not session.running.pop().set():
            pass  # the Stop button, once three bars are written (at most once: popped)

    [piece] = jobs.run_generate(model, session, "pop", bars=64, seed=1, progress=progress)
    assert piece.stopped_at is not None and 2 <= piece.stopped_at < 64  # the 3rd was begun
    assert f"stopped at bar {piece.stopped_at} of 64" in piece.label
    assert not session.running and piece in session.pieces and piece.midi.is_file()
    [whole] = jobs.run_generate(model, session, "pop", bars=piece.stopped_at, seed=1)
    assert whole.stopped_at is None
    assert notes_of(piece.midi) == notes_of(whole.midi)


def test_a_job_whose_page_left_keeps_nothing(cache, tmp_path):
    """Closing or reloading the page (`JobFlag.leave`) stops the job with nothing kept."""
    from musicgen.studio.running import JobFlag

    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    flag = JobFlag()

    def progress(done, total):
        if done > 50:
            flag.leave()

    with pytest.raises(Cancelled):
        jobs.run_generate(model, session, "pop", bars=64, seed=1, progress=progress, cancel=flag)
    assert not session.pieces and not session.running


def test_a_page_that_left_has_its_job_counted_once_whichever_signal_came_first():
    """`PageJobs`: a page's job stopped by its closed event stream (`JobFlag.gone`) before the
    page's unload, or by the unload itself (`leave`, which returns once the job's thread has
    ended), is counted once by the unload; a job that finished, or another page's, is not."""
    import asyncio
    import threading

    from musicgen.studio.running import JobFlag, PageJobs

    started = threading.Event()

    def sampler(flag):  # polls its flag every step, as the sampler does
        started.set()
        while not flag.is_set():
            threading.Event().wait(0.001)
        raise Cancelled("stopped: the job was cancelled")

    pages = PageJobs()
    asyncio.run(pages.run("page", lambda flag: "done", JobFlag()))  # finished: not counted
    closed = threading.Event()
    closed.set()  # the page's event stream closed: the queue marked its events dead
    with pytest.raises(Cancelled):
        asyncio.run(pages.run("page", sampler, JobFlag(closed.is_set)))
    assert pages.leave("other") == (0, 0)
    assert pages.leave("page") == (1, 0) and pages.leave("page") == (0, 0)

    started.clear()
    flag, raised = JobFlag(), []

    def page_job():
        try:
            asyncio.run(pages.run("page", sampler, flag))
        except Cancelled as exc:
            raised.append(exc)

    thread = threading.Thread(target=page_job)
    thread.start()
    started.wait()
    assert pages.leave("page") == (1, 0)  # the unload first: it stops the job and waits
    assert flag.ended.is_set() and flag.left
    thread.join()
    assert raised and pages.leave("page") == (0, 0)


def test_left_out_values_are_the_page_and_the_model_own(cache, tmp_path):
    """None for every value: the page's bars (inputs.PAGE) and the model's sampling, the same
    piece as those values given."""
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    own = jobs.sampling_defaults(model)
    assert own == {"temperature": 0.9, "top_k": 0, "top_p": 0.9, "repeat": 4.5}
    args = {"bars": 1, "seed": 4}
    [left] = jobs.run_generate(model, session, "pop", num=None, chords=None, tempo=None,
                               transpose=None, temperature=None, top_p=None, **args)  # fmt: skip
    [given] = jobs.run_generate(model, session, "pop", num=1, **own, **args)
    assert left.midi.read_bytes() == given.midi.read_bytes()
    assert inputs.or_page("bars", None) == inputs.PAGE["bars"] == 16


def test_tempo_and_transposition_change_the_result_only(cache, tmp_path):
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    [plain] = jobs.run_generate(model, session, "pop", bars=2, seed=3)  # (seed 2 is silent)
    [moved] = jobs.run_generate(model, session, "pop", bars=2, seed=3, tempo=90, transpose=-3)
    a, b = notes_of(plain.midi), notes_of(moved.midi)
    assert a
    assert [p - 3 for _, p in a] == [p for _, p in b] and [t for t, _ in a] == [t for t, _ in b]
    assert symusic.Score(str(moved.midi)).tempos[0].qpm == pytest.approx(90)
    with pytest.raises(MusicgenError, match="transpose: must be >= -12"):
        jobs.run_generate(model, session, "pop", bars=1, transpose=-13)
    with pytest.raises(MusicgenError, match="tempo: must be >= 20"):
        jobs.run_generate(model, session, "pop", bars=1, tempo=5)


def test_chord_names_and_the_prompt_end_reach_the_player(cache, tmp_path):
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path)
    [forced] = jobs.run_generate(model, session, "pop", bars=2, seed=5, chords="Am F")
    assert forced.roll.chords[:2] == ["Am", "F"] and forced.roll.prompt_end is None
    [up] = jobs.run_generate(model, session, "pop", bars=2, seed=5, chords="Am F", transpose=2)
    assert up.roll.chords[:2] == ["Bm", "G"]
    [cont] = jobs.run_continue(model, session, "pop", SONG, prompt_bars=2, new_bars=1, seed=2,
                               chords="C")  # fmt: skip
    assert cont.roll.prompt_end == pytest.approx(cont.roll.bars[2], abs=1e-3)
    assert cont.roll.chords[2] == "C"  # the new bar's chord, as asked
    from musicgen.studio.player import svg

    drawn = svg(cont.roll, "audio-0")
    assert "mg-prompt-end" in drawn and ">C<" in drawn and 'data-audio="audio-0"' in drawn


def test_continue_this_piece_hands_it_over_to_be_extended(cache, tmp_path):
    """'Continue this piece' (`Actions.take_on`): the piece becomes the Continue tab's file,
    to be extended from its end (mode 'end': the whole piece, then the bars to add), the form
    box emptied (a form given then is that of the new bars)."""
    pytest.importorskip("gradio")
    from musicgen.studio import app

    session = jobs.Session(tmp_path)
    midi = session.dir() / "gen_001.mid"
    symusic.Score(str(SONG)).dump_midi(str(midi))
    session.shown = [jobs.Piece("gen_001: a song", midi, midi.with_suffix(".png"), None, 1)]
    path, _, mode, _, form = app.Actions(cache, LABEL).take_on(0)(LABEL, session)
    assert (path, mode, form) == (str(midi), "end", "")
    with pytest.raises(MusicgenError, match="no piece here"):
        app.Actions(cache, LABEL).take_on(1)(LABEL, session)


def test_a_form_sets_the_bars_and_writes_its_sections(songs, tmp_path):
    """A form on a song model: the piece has the form's bars whatever the bars slider says,
    its ids hold the form's sections; chords per section follow it; `auto` draws a form that
    fits the page's bars; a continuation's form counts the prompt as its first bars."""
    cache, label = songs
    model = cache.get(label)
    session = jobs.Session(tmp_path)
    [piece] = jobs.run_generate(model, session, "song", bars=16, seed=1, form="A2 B2")
    assert piece.bars == 4 and piece.info["form"] == "A2B2" and "form A2B2, 4 bars" in piece.label
    music = model.generate(bars=None, form="A2B2", seed=1)  # the API's piece: the same one
    assert notes_of(piece.midi) == notes_of(music.save(tmp_path / "api.mid"))
    got = [(s.bar, s.label, s.bars) for s in model.tokenizer.sections(music.ids)]
    assert got == [(0, "A", 2), (2, "B", 2)]
    [chorded] = jobs.run_generate(model, session, "song", seed=1, form="A2B2",
                                  chords="A: C G; B: F Am")  # fmt: skip
    assert chorded.roll.chords[:3] == ["C", "G", "F"]  # (the untrained model ends in bar 4)
    names = [name for *_, name in chorded.roll.sections]  # the player's bands, by name
    assert names and names == ["Verse", "Chorus"][: len(names)]
    [drawn] = jobs.run_generate(model, session, "song", seed=1, form="auto")
    assert drawn.info["form"] == "A2B2"  # the other training form is over the page's 64 bars
    [cont] = jobs.run_continue(model, session, "song", SONG, prompt_bars=2, new_bars=9, seed=0,
                               form="A2B2")  # fmt: skip
    assert cont.bars == 4 and cont.info["new_bars"] == 2 and "in form A2B2" in cont.label


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ("A2Q2", "^form: unknown phrase label 'Q'"),
        ("verse chorus", "^form: not a form like"),
        ("../x/human_label1.txt", "^form: give a form like .* files cannot be named here"),
        ("A40B40", "^form: 80 new bars, more than the 64"),
        ("A2@3 B2", "^form: this model has no density tokens \\(phrase A2@3\\)"),
        ("A2@9", "^form: phrase A2@9: a density is 1 to 8"),
    ],
)
def test_a_bad_form_is_one_line(songs, tmp_path, form, message):
    cache, label = songs
    with pytest.raises(MusicgenError, match=message):
        jobs.run_generate(cache.get(label), jobs.Session(tmp_path), "song", seed=1, form=form)


def test_a_form_on_a_model_without_sections_is_one_line(cache, tmp_path):
    model = cache.get(PIANO)
    with pytest.raises(MusicgenError, match="^form: this model writes no song sections") as e:
        jobs.run_generate(model, jobs.Session(tmp_path), "pop", seed=1, form="A2B2")
    assert "\n" not in str(e.value)
    with pytest.raises(MusicgenError, match="needs a form"):  # chords per section, no form
        jobs.run_generate(model, jobs.Session(tmp_path), "pop", seed=1, chords="A: C; B: F")


def test_the_form_box_shows_for_song_models_only(cache, songs, tmp_path):
    """`Actions.on_model`: the chord box (index 2) and the form box (3) shown for a model they
    control, emptied and hidden for the others."""
    pytest.importorskip("gradio")
    from musicgen.studio import app

    song_cache, label = songs
    both = jobs.ModelCache({**cache.choices, **song_cache.choices}, "cpu")
    act = app.Actions(both, PIANO)
    pop, song = act.on_model(PIANO), act.on_model(label)
    assert pop[2]["visible"] is True and pop[3] == {"__type__": "update", "visible": False,
                                                    "value": ""}  # fmt: skip
    assert song[2]["visible"] is True and song[3]["visible"] is True
    assert len(song) == 6 + len(inputs.SAMPLING)
    assert song[-1]["visible"] is True and pop[-1]["visible"] is False  # the form builder
    assert act.on_model(LABEL)[3]["visible"] is True  # the default model writes sections


def test_the_form_preview_lays_chords_over_the_sections():
    table = controls.preview("A: C G; B: F", "A2 B2", 16)
    assert "**Form**: Verse 2, Chorus 2, 4 bars" in table
    assert "| 1 Verse | 2 | 3 Chorus | 4 |" in table
    assert "| C | G | F | F |" in table
    assert "2 bars" not in controls.preview("Am F", "", 2) and "Am | F" in controls.preview(
        "Am F", "", 2
    )
    assert controls.preview("A: C", "A2B2", 4).startswith("⚠ chords: no progression for")
    assert controls.preview("", "auto", 4).startswith("**Form**: one of the model's")
    assert controls.preview("", "", 4) == ""


def test_the_melody_is_drawn_in_its_colour(songs, tmp_path):
    """A song model's Melody track (here the prompt's melody, POP909's MELODY voice) is drawn
    in the melody's colour in the player."""
    from musicgen.studio.player import ROLE_COLOURS, svg

    cache, label = songs
    session = jobs.Session(tmp_path)
    [cont] = jobs.run_continue(cache.get(label), session, "song", SONG, prompt_bars=2,
                               new_bars=1, seed=2)  # fmt: skip
    roles = {role for *_, role in cont.roll.notes}
    assert {"melody", "piano"} <= roles
    drawn = svg(cont.roll, "audio-0")
    assert f'fill="{ROLE_COLOURS["melody"]}" class="mg-note mg-melody"' in drawn


def on_grid(track, per_beat: int, before: float = 8.0) -> list[tuple[float, int]]:
    """(onset in quarters on a grid of `per_beat` steps, pitch) of a track read in quarters,
    the onsets before `before` (the prompt's 2 bars)."""
    notes = {(round(n.time * per_beat) / per_beat, n.pitch) for n in track.notes}
    return sorted(x for x in notes if x[0] < before)


def tracks_by_name(path: Path) -> dict[str, symusic.Track]:
    return {t.name: t for t in symusic.Score(str(path)).to("quarter").tracks}


def test_an_uploaded_melody_comes_back_as_the_melody_track(songs, tmp_path):
    """A two-track upload (POP909's MELODY and PIANO, from bar 4 of a bundled song) continued
    by a model with a melody voice: the result's Melody track starts with the upload's melody
    notes and its Piano track with the piano's (on the tokenizer's sixteenths; a note both play
    is the melody's), as the library's prompt builder reads them."""
    cache, label = songs
    song = symusic.Score(str(ROOT / "tests" / "data" / "pop909" / "001" / "001.mid"))
    start = 4 * 4 * song.ticks_per_quarter
    upload = symusic.Score(song.ticks_per_quarter)
    upload.tempos = song.tempos.copy()
    for name in ("MELODY", "PIANO"):
        [track] = [t for t in song.tracks if t.name == name]
        upload.tracks.append(track.copy())
    upload = upload.clip(start, song.end() + 1).shift_time(-start)
    path = tmp_path / "two_tracks.mid"
    upload.dump_midi(str(path))
    sent = tracks_by_name(path)
    assert sorted(sent) == ["MELODY", "PIANO"] and min(len(t.notes) for t in sent.values()) > 4
    melody, piano = on_grid(sent["MELODY"], 4), on_grid(sent["PIANO"], 4)
    assert len(melody) >= 4  # the prompt's 2 bars hold melody notes

    [cont] = jobs.run_continue(cache.get(label), jobs.Session(tmp_path), "song", path,
                               prompt_bars=2, new_bars=1, seed=2)  # fmt: skip
    back = tracks_by_name(cont.midi)
    assert on_grid(back["Melody"], 4) == melody
    assert on_grid(back["Piano"], 4) == sorted(set(piano) - set(melody))


def test_uploaded_parts_stay_their_parts_on_the_groove_model(tiny_checkpoints, tmp_path):
    """A drums, bass and piano upload (a bundled groove's drums, a bass line and chords)
    continued by a groove model: each part comes back as its own (drums, bass, the third
    part), starting with the upload's notes on the groove grid (12 steps a beat)."""
    groove = DATA / "groove_drums" / "drummer1" / "eval_session"
    drums = symusic.Score(str(groove / "1_funk-groove1_138_beat_4-4.mid"))
    tpq = drums.ticks_per_quarter
    upload = symusic.Score(tpq)
    upload.tempos = drums.tempos.copy()
    [kit] = drums.tracks
    bass = symusic.Track(name="bass line", program=33)
    keys = symusic.Track(name="keys", program=0)
    for beat in range(16):
        bass.notes.append(symusic.Note(beat * tpq, tpq // 2, 36 + beat % 4 * 2, 90))
        for pitch in (60, 64, 67):
            keys.notes.append(symusic.Note(beat * tpq, tpq, pitch + beat // 4 % 2, 70))
    upload.tracks.extend([kit.copy(), bass, keys])
    path = tmp_path / "trio.mid"
    upload.dump_midi(str(path))
    sent = list(symusic.Score(str(path)).to("quarter").tracks)

    cache = jobs.ModelCache(jobs.model_choices([tiny_checkpoints["groove"]]), "cpu")
    label = next(iter(cache.choices))
    [cont] = jobs.run_continue(cache.get(label), jobs.Session(tmp_path), "groove", path,
                               prompt_bars=2, new_bars=1, seed=2)  # fmt: skip
    back = tracks_by_name(cont.midi)
    assert back["drums"].is_drum and back["bass"].program == 33
    for part, track in zip(("drums", "bass", "third"), sent, strict=True):
        assert len(on_grid(track, 12)) > 4
        assert on_grid(back[part], 12) == on_grid(track, 12), part


class FakeModel:
    """A model whose API takes progress= and cancel= (the newer API), to test the plumbing."""

    def __init__(self, session=None, stop_at: int | None = None):
        self.session, self.stop_at = session, stop_at
        self.calls: list[dict] = []

    def pieces(self, request, *, prompt=None, progress=None, cancel=None, grammar_wrap=None):
        self.calls.append({"progress": progress, "cancel": cancel, **request.sampling()})
        for step in range(4):
            if progress is not None:
                progress(step + 1, 4)
            if cancel is not None and cancel.is_set():
                raise Cancelled("stopped: the job was cancelled")
            if step + 1 == self.stop_at:
                self.session.stop()  # what the Stop button does, from another request
        return []


def test_progress_and_cancel_reach_an_api_that_takes_them(tmp_path):
    session = jobs.Session(tmp_path)
    seen = []
    fake = FakeModel()
    jobs.run_generate(fake, session, "fake", bars=1, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert fake.calls[0]["cancel"] is not None and not session.running  # the job's own flag
    assert session.stop() == 0  # a Stop with nothing running stops no later job
    jobs.run_generate(fake, session, "fake", bars=1)
    with pytest.raises(MusicgenError, match="stopped"):
        jobs.run_generate(FakeModel(session, stop_at=2), session, "fake", bars=1)
    assert not session.running


def test_the_page_exposes_generate_and_continue(cache, tmp_path):
    pytest.importorskip("gradio")
    from musicgen.studio import app

    config = app.build(cache, tmp_path).get_config_file()
    public = {d["api_name"] for d in config["dependencies"] if d["api_visibility"] == "public"}
    assert public == {"generate", "continue"}


def test_the_command_checks_its_options(capsys):
    assert main(["studio", "--port", "70000"]) == 1
    assert "--port: must be >= 1 and <= 65535, got 70000" in capsys.readouterr().err
    assert main(["studio", "--concurrency", "0"]) == 1
    assert "--concurrency: must be >= 1" in capsys.readouterr().err
    assert main(["studio", "--max-upload-mb", "0"]) == 1
    assert "--max-upload-mb: must be > 0" in capsys.readouterr().err
    assert main(["studio", "--checkpoint", "nope"]) == 1
    assert "nope: model not found" in capsys.readouterr().err


def test_a_handler_bound_by_name_gets_its_page_request():
    """Gradio passes the page's request to a handler by its type hint (not its signature):
    without it a job is not tied to its page, and reloading the page does not stop it."""
    import gradio as gr
    from gradio.utils import get_type_hints

    from musicgen.studio.app import _by_name

    async def act(bars=None, request=None, progress=None):
        return request

    assert get_type_hints(_by_name(act, ("bars",))).get("request") is gr.Request
