"""The studio against hostile and careless clients, on 127.0.0.1 only: every test is bounded
in count (a fixed number of clients and requests) and in time (every wait has a deadline).

A studio runs in this process (`app.launch`, one job at a time) with the shipped
pop909_sine_spe_gated model, the one-voice piano model (no song sections) and a `slow` model:
the same song model behind a sampler that takes one short step at a time for as long as it is
not cancelled, and counts the jobs running at once.
The command (`musicgen studio`, a subprocess) is started for the signal and port cases.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from musicgen.cli import main
from musicgen.errors import Cancelled, MusicgenError
from musicgen.studio import inputs, jobs, pieces
from tests import hostile
from tests.paths import ROOT

gr = pytest.importorskip("gradio", reason="the studio extra is not installed (gradio)")
gradio_client = pytest.importorskip("gradio_client")
httpx = pytest.importorskip("httpx")

MODEL = ROOT / "checkpoints" / "pop909_sine_spe_gated"
LABEL = "pop909_sine_spe_gated"
PIANO = "pop909_piano_sine_spe_gated"  # no song sections: a form is refused for it
HOST = "127.0.0.1"
WAIT_S = 120  # the bound of any one wait (a 1-bar job on a loaded 2-core machine)
STEP_S = 0.02  # one step of the slow model's sampler


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_until(check, what: str, limit: float = WAIT_S) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {limit} s: {what}")
        time.sleep(0.05)


class Slow:
    """The real model, with a sampler that steps until cancelled (`max_steps` bounds it) and a
    count of the jobs inside it at once, then returns one real 1-bar piece."""

    def __init__(self, model, max_steps: int = 3000):
        self.model, self.max_steps = model, max_steps
        self.tokenizer = model.tokenizer
        self.lock = threading.Lock()
        self.inside = self.most = self.started = 0
        self.steps_after_cancel: list[int] = []

    def options(self, **sampling):
        return self.model.options(**sampling)

    def pieces(self, request, *, prompt=None, progress=None, cancel=None, grammar_wrap=None):
        with self.lock:
            self.inside += 1
            self.started += 1
            self.most = max(self.most, self.inside)
        try:
            for _ in range(self.max_steps if request.bars > 1 else 1):
                if cancel is not None and cancel.is_set():
                    raise Cancelled("stopped: the job was cancelled")
                time.sleep(STEP_S)
            return self.model.generate_many(1, bars=1, seed=request.seed, cancel=cancel)
        finally:
            with self.lock:
                self.inside -= 1


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """(url, root, slow model) of a studio in this process, one job at a time."""
    from musicgen.studio import app

    root = tmp_path_factory.mktemp("studio")
    models = jobs.ModelCache({LABEL: MODEL, "slow": MODEL, PIANO: MODEL.parent / PIANO}, "cpu")
    slow = Slow(models.get(LABEL))
    models._models["slow"] = slow
    page = app.launch(models, root, HOST, free_port(), concurrency=1, default=LABEL)
    yield app.local_url(page), root, slow
    page.close()


def client(url: str, **kw):
    return gradio_client.Client(url, verbose=False, download_files=False, **kw)


def call(c, *args, api_name: str):
    """One request, bounded in time: a job that has not ended within WAIT_S fails the test
    instead of holding the suite."""
    return c.submit(*args, api_name=api_name).result(timeout=WAIT_S)


def sent(job) -> None:
    """Wait until the server has the job (its event id is known): gradio_client's `cancel()`
    before that cannot reach the server, which then runs the job (a client-side race)."""
    wait_until(lambda: job.communicator.event_id is not None, "the job reached the server")


def generate_args(label=LABEL, bars=1, seed=1, temperature=1.0, top_k=0, chords="", form=""):
    """/generate's arguments in order up to the form (tempo and transpose left out)."""
    return (label, bars, 1, seed, temperature, top_k, 0.9, 0, chords, form)


def one_line_error(call) -> str:
    with pytest.raises(Exception) as refused:
        call()
    message = str(refused.value)
    assert "\n" not in message.strip() and "bug" not in message, message
    return message


def result_urls(result) -> dict[str, str]:
    """suffix -> URL of the result's piano roll, audio and MIDI."""
    png, wav, files = result[0], result[1], result[2]
    out = {".png": png["url"], ".wav": wav["url"]}
    out.update({Path(f["path"]).suffix: f["url"] for f in files})
    return out


# ---------------------------------------------------------------------------------------------
# served files


def test_a_result_is_served_as_a_download_at_its_unguessable_address(studio):
    url, root, _ = studio
    result = call(client(url), *generate_args(seed=3), api_name="/generate")
    urls = result_urls(result)
    assert set(urls) == {".png", ".wav", ".mid"}
    kinds = {".mid": "audio/midi", ".wav": "audio/wav", ".png": "image/png"}
    for suffix, address in urls.items():
        answer = httpx.get(address, timeout=30)
        assert answer.status_code == 200, address
        assert answer.headers["content-type"] == kinds[suffix]
        assert answer.headers["content-disposition"].startswith("attachment")
        assert answer.headers["x-content-type-options"] == "nosniff"
        path = Path(address.split("file=", 1)[1])
        token = path.parent.name
        assert path.parent.parent == root / jobs.SESSIONS and len(token) >= 32
    # written once, where it is served from: no copy in Gradio's cache
    assert all(p.parent.parent == root / jobs.SESSIONS for p in root.rglob("*.wav"))


def test_a_result_address_with_another_token_or_path_is_not_found(studio):
    url, root, _ = studio
    result = call(client(url), *generate_args(seed=4), api_name="/generate")
    midi = Path(result[2][0]["path"])
    folder = midi.parent
    guesses = [
        folder.parent / ("A" * 32) / midi.name,  # another page's token, guessed
        folder,  # the page's folder itself
        folder / ".." / ".." / "gradio",  # a detour out of the pages' folders
        folder / "nope.mid",
        MODEL / "README.md",
        Path("/etc/passwd"),
        ROOT / "pyproject.toml",
    ]
    for path in guesses:
        for route in ("file=", "file/"):
            answer = httpx.get(f"{url}gradio_api/{route}{path}", timeout=30)
            assert answer.status_code == 404, (route, path)
    answer = httpx.get(f"{url}gradio_api/proxy=http://127.0.0.1:1/x", timeout=30)
    assert answer.status_code == 404


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("x.html", b"<html><script>alert(1)</script></html>"),
        ("x.svg", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'),
        ("x.mid.html", b"<html></html>"),
    ],
)
def test_an_upload_that_is_not_midi_is_refused_and_deleted(studio, name, body):
    url, root, _ = studio
    answer = httpx.post(f"{url}gradio_api/upload", files={"files": (name, body)}, timeout=30)
    assert answer.status_code == 415 and "only MIDI files" in answer.text
    assert not [p for p in root.rglob("*") if p.name == name]  # nothing kept


def test_an_uploaded_midi_is_never_served_back(studio):
    url, _, _ = studio
    song = hostile.scale()
    answer = httpx.post(f"{url}gradio_api/upload", files={"files": ("a.mid", song)}, timeout=30)
    assert answer.status_code == 200
    [stored] = answer.json()
    assert Path(stored).read_bytes() == song
    assert httpx.get(f"{url}gradio_api/file={stored}", timeout=30).status_code == 404


# ---------------------------------------------------------------------------------------------
# cancellation and the queue


def wait_running(slow: Slow, started: int) -> None:
    wait_until(lambda: slow.started > started and slow.inside > 0, "the slow job started")


def test_cancel_from_the_api_stops_the_job_and_frees_the_slot(studio):
    url, _, slow = studio
    before = slow.started
    c = client(url)
    job = c.submit(*generate_args("slow", bars=64), api_name="/generate")
    wait_running(slow, before)
    job.cancel()
    wait_until(lambda: slow.inside == 0, "the cancelled job's sampler stopped")
    # the only slot is free: a 1-bar job of another client runs to its end
    result = call(client(url), *generate_args(seed=5), api_name="/generate")
    assert "1 piece(s)" in result[-1]
    assert slow.started == before + 1 and slow.most == 1


def test_a_client_that_disconnects_stops_its_job(studio):
    url, _, slow = studio
    before = slow.started
    session = "hostile-disconnect"
    data = list(generate_args("slow", bars=64)) + [None] * 4  # tempo, transpose, melody, state
    join = {"data": data, "fn_index": fn_index(url, "generate"), "session_hash": session}
    assert httpx.post(f"{url}gradio_api/queue/join", json=join, timeout=30).status_code == 200
    with httpx.stream(
        "GET", f"{url}gradio_api/queue/data", params={"session_hash": session}, timeout=30
    ):
        wait_running(slow, before)  # the stream is open while the job runs, then closed
    wait_until(lambda: slow.inside == 0, "the job of a client that left stopped")


def fn_index(url: str, api_name: str) -> int:
    config = httpx.get(f"{url}config", timeout=30).json()
    return next(d["id"] for d in config["dependencies"] if d.get("api_name") == api_name)


def test_twenty_clients_submitting_and_cancelling_keep_one_job_at_a_time(studio):
    url, root, slow = studio
    before = slow.started
    clients = [client(url) for _ in range(20)]
    submitted = [c.submit(*generate_args("slow", bars=64), api_name="/generate") for c in clients]
    wait_running(slow, before)
    for k, job in enumerate(submitted):  # cancels as fast as the server has the jobs
        sent(job)
        job.cancel()
        if k % 5 == 4:
            again = clients[k].submit(*generate_args("slow", bars=64), api_name="/generate")
            sent(again)
            again.cancel()
    wait_until(lambda: slow.inside == 0, "every cancelled job stopped")
    result = call(client(url), *generate_args(seed=6), api_name="/generate")
    assert "1 piece(s)" in result[-1]
    assert slow.most == 1  # never two jobs at once
    assert slow.inside == 0


# ---------------------------------------------------------------------------------------------
# numbers, sizes, the chord string and the form


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"temperature": 1e-300}, "temperature: must be"),
        ({"bars": "abc"}, "bars: must be a whole number, got 'abc'"),
        ({"bars": 0}, "bars: must be >= 1 and <= 64, got 0"),  # None: the page's 16 bars
        ({"bars": 1.5}, "bars: must be a whole number, got 1.5"),
        ({"bars": 65}, "bars: must be >= 1 and <= 64"),
        ({"seed": 1.5}, "seed: must be a whole number, got 1.5"),
        ({"top_k": 2.5}, "top_k: must be a whole number, got 2.5"),
        ({"temperature": "hot"}, "temperature: must be a number"),
        ({"chords": ["C"]}, "chords: unknown chord"),
        ({"form": "/etc/human_label1.txt"}, "form: give a form like"),  # no server file read
        ({"label": PIANO, "form": "A2B2"}, "form: this model writes no song sections"),
    ],
)
def test_a_bad_number_through_the_api_is_one_line_naming_it(studio, change, message):
    url, _, _ = studio
    args = {"label": LABEL, "bars": 1, "seed": 1, "temperature": 1.0, "top_k": 0, "chords": ""}
    args.update(change)
    got = one_line_error(lambda: call(client(url), *generate_args(**args), api_name="/generate"))
    assert message in got


def test_ten_million_chord_repeats_are_refused_without_holding_the_slot(studio):
    url, _, slow = studio
    before = slow.started
    got = one_line_error(
        lambda: call(client(url), *generate_args(chords="C x10000000"), api_name="/generate")
    )
    assert got.startswith("chords") or "chords:" in got
    assert slow.started == before  # no job ran for it
    result = call(client(url), *generate_args(seed=7), api_name="/generate")
    assert "1 piece(s)" in result[-1]  # the slot is free


def slow_prompt(folder: Path, tempo: bytes) -> Path:
    """A 1-bar prompt (C E G C quarters) at the tempo of `tempo` (3 bytes, microseconds a beat)."""
    path = folder / f"tempo_{tempo.hex()}.mid"
    events = [(0, b"\xff\x51\x03" + tempo), *hostile.notes([60, 64, 67, 72], 0, 480)]
    path.write_bytes(hostile.midi_bytes(events))
    return path


def test_the_audio_of_a_prompt_at_the_slowest_tempo_is_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(pieces, "MAX_AUDIO_SECONDS", 6.0)  # read where the audio is written
    song = slow_prompt(tmp_path, (3_000_000).to_bytes(3, "big"))  # 20 bpm: 12 s a bar
    model = jobs.ModelCache({LABEL: MODEL}, "cpu").get(LABEL)
    session = jobs.Session(tmp_path / "root")
    [piece] = jobs.run_continue(model, session, LABEL, song, prompt_bars=1, new_bars=1)
    from hostile import read_wav

    frames, rate = read_wav(piece.audio)
    assert len(frames) / rate <= 6.0 + 3.0  # the cap, and the synthesizer's release tail
    assert [p.name for p in session.dir().glob("*.wav")] == [piece.audio.name]  # one copy


def test_a_prompt_with_tempo_ff_ff_ff_is_one_line_before_any_job(tmp_path):
    song = slow_prompt(tmp_path, b"\xff\xff\xff")
    model = jobs.ModelCache({LABEL: MODEL}, "cpu").get(LABEL)
    session = jobs.Session(tmp_path / "root")
    with pytest.raises(MusicgenError, match="tempo") as refused:
        jobs.run_continue(model, session, LABEL, song, prompt_bars=1, new_bars=4)
    assert "\n" not in str(refused.value) and not session.pieces and not session.running


# ---------------------------------------------------------------------------------------------
# disk


def test_a_session_over_its_disk_budget_drops_its_oldest_pieces(tmp_path):
    session = jobs.Session(tmp_path, budget_mb=0.002)  # 2 kB
    for k in range(4):
        midi = session.dir() / f"{k}.mid"
        midi.write_bytes(b"x" * 900)
        session.add(jobs.Piece(f"p{k}", midi, midi.with_suffix(".png"), None, k))
    assert [p.label for p in session.pieces] == ["p2", "p3"]
    assert session.bytes() <= 2000 and not (session.dir() / "0.mid").exists()


def test_a_server_over_its_disk_budget_refuses_new_jobs(tmp_path):
    session = jobs.Session(tmp_path)
    (session.dir() / "big.bin").write_bytes(b"\0" * 3000)
    with pytest.raises(MusicgenError, match=r"^studio: the server's disk budget \(0.002 MB\)"):
        jobs.check_disk(session, server_mb=0.002)
    jobs.check_disk(session, server_mb=1)


def test_a_closed_or_expired_session_stops_its_job_and_deletes_its_files(tmp_path):
    session = jobs.Session(tmp_path)
    flag = session.start_job()
    folder = session.dir()
    (folder / "gen_001.mid").write_bytes(b"x")
    session.close()  # what Gradio's delete_callback calls for a session not kept
    assert flag.is_set() and not folder.exists() and session.folder is None


def test_an_api_clients_session_expires(tmp_path, monkeypatch):
    from musicgen.studio import app

    monkeypatch.setattr(inputs, "SESSION_IDLE_S", 2)
    models = jobs.ModelCache({LABEL: MODEL}, "cpu")
    page = app.launch(models, tmp_path, HOST, free_port(), concurrency=1)
    try:
        result = call(client(app.local_url(page)), *generate_args(), api_name="/generate")
        folder = Path(result[2][0]["path"]).parent
        assert folder.is_dir()
        wait_until(lambda: not folder.exists(), "the one-shot client's session was removed", 60)
    finally:
        page.close()


# ---------------------------------------------------------------------------------------------
# the command


def start_command(tmp_path: Path, *extra: str):
    port = free_port()
    cmd = [sys.executable, "-m", "musicgen.cli", "studio", "--checkpoint", str(MODEL),
           "--port", str(port), "--device", "cpu", *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADIO_ANALYTICS_ENABLED": "False",
           "TMPDIR": str(tmp_path)}  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.monotonic() + WAIT_S
    lines = []
    while time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        lines.append(line)
        if line.startswith("musicgen studio: "):
            return proc, line.split(": ", 1)[1].strip()
    proc.kill()
    pytest.fail("the studio did not start:\n" + "".join(lines))


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_remove_every_file(tmp_path, signum, code):
    proc, url = start_command(tmp_path)
    try:
        result = call(client(url), *generate_args(), api_name="/generate")
        studio_root = Path(result[2][0]["path"]).parents[2]
        assert studio_root.parent == tmp_path and any(studio_root.rglob("*.mid"))
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out
    assert not studio_root.exists() and "Traceback" not in out
    assert not (tmp_path / "gradio").exists()  # Gradio's temp folder, which the studio made


def test_a_port_in_use_is_one_line_naming_the_port(capsys):
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["studio", "--checkpoint", str(MODEL), "--port", str(port),
                     "--device", "cpu"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert f"--port: {port} is in use on 127.0.0.1" in err and "GRADIO_SERVER_PORT" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_host_other_than_loopback_warns_and_auth_is_parsed(monkeypatch, capsys, tmp_path):
    import musicgen.studio as studio_pkg
    from musicgen.studio import app

    monkeypatch.setattr(app, "launch", lambda *a: _Page())
    studio_pkg.serve([MODEL], host="0.0.0.0", device="cpu")  # nothing binds: launch is stubbed
    assert "warning: --host 0.0.0.0: the studio is reachable" in capsys.readouterr().err
    studio_pkg.serve([MODEL], host="127.0.0.1", device="cpu")
    assert "warning" not in capsys.readouterr().err
    assert studio_pkg.is_loopback("::1") and not studio_pkg.is_loopback("192.168.1.2")
    assert studio_pkg.parse_auth("ann:s3:cret") == [("ann", "s3:cret")]
    logins = tmp_path / "logins"
    logins.write_text("# who may use it\nann:one\n\nbob:two\n")
    assert studio_pkg.parse_auth(None, str(logins)) == [("ann", "one"), ("bob", "two")]
    with pytest.raises(MusicgenError, match="^--auth: give USER:PASSWORD"):
        studio_pkg.parse_auth("ann")


class _Page:
    studio_root = None


def test_with_auth_the_studio_asks_for_a_login(tmp_path):
    from musicgen.studio import app

    models = jobs.ModelCache({LABEL: MODEL}, "cpu")
    page = app.launch(models, tmp_path, HOST, free_port(), auth=[("ann", "s3cret")])
    url = app.local_url(page)
    try:
        assert httpx.get(f"{url}config", timeout=30).status_code == 401
        with pytest.raises(ValueError, match="login"):
            client(url, auth=("ann", "wrong"))
        result = call(client(url, auth=("ann", "s3cret")), *generate_args(), api_name="/generate")
        assert "1 piece(s)" in result[-1]
    finally:
        page.close()


def test_the_file_route_refuses_a_listing_of_the_sessions(studio):
    url, root, _ = studio
    for path in (root, root / jobs.SESSIONS, root / "gradio"):
        assert httpx.get(f"{url}gradio_api/file={path}", timeout=30).status_code == 404
