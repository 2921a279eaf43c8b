"""Nothing lost on a reload (`studio.keep`), without a browser: a browser's key brings its
session back (pieces, files, numbering), a page closing keeps a kept session's files, an idle
one is closed and its files deleted, downloads are named by model, form, seed and time. The
reload in Chromium: test_studio_browser.py."""

from __future__ import annotations

import time

import pytest

from musicgen.studio import jobs
from musicgen.studio.keep import Kept, release
from tests.paths import ROOT

LABEL = "pop909_sine_spe_gated"


class Clock:
    """The monotonic clock a session's use is stamped with, moved on by hand."""

    def __init__(self):
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


def piece_in(session: jobs.Session) -> jobs.Piece:
    name = session.next_stem("gen")
    midi = session.dir() / f"{name}.mid"
    midi.write_bytes(b"MThd")
    return session.add(jobs.Piece(f"{name}: a piece", midi, midi.with_suffix(".png"), None, 1))


def test_a_browser_key_brings_its_session_back(tmp_path):
    kept = Kept()
    first = jobs.Session(tmp_path)
    key, session = kept.restore(None, first)
    assert session is first and isinstance(key, str) and len(key) > 20
    piece = piece_in(first)
    release(first)  # the page reloaded: its state is deleted, its files stay
    assert piece.midi.is_file()
    again, back = kept.restore(key, jobs.Session(tmp_path))
    assert again == key and back is first and back.pieces == [piece]
    assert back.next_stem("gen") == "gen_002"  # numbering goes on
    other, fresh = kept.restore("not-a-key-of-this-server", jobs.Session(tmp_path))
    assert other != key and fresh is not first and fresh.pieces == []
    assert kept.restore(12, jobs.Session(tmp_path))[0] not in (key, other)  # not a string


def test_a_session_not_kept_is_deleted_with_its_page(tmp_path):
    session = jobs.Session(tmp_path)
    piece = piece_in(session)
    release(session)
    assert not piece.midi.exists() and session.pieces == []


def test_an_idle_session_is_closed_and_a_running_one_waits(tmp_path):
    clock = Clock()
    kept = Kept(idle_s=60, clock=clock)
    key, session = kept.restore(None, jobs.Session(tmp_path))
    piece = piece_in(session)
    busy_key, busy = kept.restore(None, jobs.Session(tmp_path))
    flag = busy.start_job()
    clock.now += 61
    kept.restore(None, jobs.Session(tmp_path))  # any page opening sweeps
    assert not piece.midi.exists() and session.folder is None
    assert kept.restore(busy_key, jobs.Session(tmp_path))[1] is busy  # its job still runs
    busy.end_job(flag)
    new_key, fresh = kept.restore(key, jobs.Session(tmp_path))
    assert new_key != key and fresh is not session
    piece_in(session)  # a page still holding the closed session writes anew
    assert session.folder is not None and session.folder.is_dir()


def test_the_page_restores_its_pieces(tmp_path):
    pytest.importorskip("gradio")
    from musicgen.studio import app

    cache = jobs.ModelCache(jobs.model_choices([ROOT / "checkpoints" / LABEL]), "cpu")
    act = app.Actions(cache, LABEL)
    out = act.restore(None, jobs.Session(tmp_path))
    key, session = out[0], out[1]
    assert out[-1] == "" and out[6] == []  # nothing yet: no message, an empty list
    piece_in(session)
    out = act.restore(key, jobs.Session(tmp_path))
    assert out[1] is session and [label for _, label in out[6]] == ["gen_001: a piece"]
    assert out[-1].startswith("1 piece(s) kept")
