"""`musicgen studio` in a real browser: headless Chromium (Debian's `chromium`) driven by
Playwright, against the studio started as a user starts it (`musicgen studio`, a subprocess on
a free port) with the shipped whole-song model pop909_sine_spe_gated (the page's default)
and 2-bar pieces.

One page generates, plays (the player's playhead moves), downloads, continues the piece it made
("Continue this piece": the piece from its first note) and a bundled POP909 song with chords,
gets a text file named .mid refused, shows a long job's progress in bars, stops it (the bars
written are kept, shown and downloadable) and still generates after it. The defaults: the
endpoints called with one argument get the model's own values, which the page shows, and the
same piece as the page for the same seed; ↺ brings a changed value back. Words and layout:
model names, the summary first, advanced settings folded, the progression bar by bar,
variations side by side, a page 400 px wide. A page reloaded mid-job stops that job. Two
gradio_client sessions generate at once and each gets its own result (the same bytes as that
seed alone). Skipped, with the reason, where gradio, Playwright or Chromium is missing (.ci/run
installs Chromium, so CI runs them).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import symusic

from tests.paths import ROOT

pytest.importorskip("gradio", reason="the studio extra is not installed (gradio)")
gradio_client = pytest.importorskip("gradio_client")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium") or "",
                 shutil.which("chromium-browser") or "") if p and Path(p).is_file()),
    None,
)  # fmt: skip
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium found (apt-get install chromium)"
)
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
LABEL = "pop909_sine_spe_gated"
MODEL = ROOT / "checkpoints" / LABEL
PROMPT = ROOT / "data" / "demo" / "pop909_005.mid"
WAIT_MS = 120_000  # a generous bound for one 2-bar job on a loaded 2-core machine
SERVER_LINES: list[str] = []  # what the studio printed (its "a page closed" lines)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def studio():
    """The URL of a studio started by the command, stopped after the module."""
    cmd = [sys.executable, "-m", "musicgen.cli", "studio", "--checkpoint", str(MODEL),
           "--port", str(free_port()), "--device", "cpu", "--concurrency", "2"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    url = None
    deadline = time.monotonic() + 300  # a busy machine starts it slowly
    while url is None and time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        lines.append(line)
        if line.startswith("musicgen studio: "):
            url = line.split(": ", 1)[1].strip()
    if url is None:
        proc.kill()
        pytest.fail("the studio did not start:\n" + "".join(lines))
    # keep its pipe drained, and what it says
    threading.Thread(target=lambda: SERVER_LINES.extend(proc.stdout), daemon=True).start()
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)
    assert proc.returncode is not None


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def set_number(page, elem_id: str, value) -> None:
    """Type into the number box of a slider or number field (as a user does), again where
    the box was drawn anew under the typing (a folded section opening on a busy machine)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    for _ in range(5):
        box.fill(str(value))
        box.press("Enter")
        box.blur()
        page.wait_for_timeout(200)
        if float(box.input_value() or "nan") == float(value):
            return


def number(page, elem_id: str) -> float:
    return float(page.locator(f"#{elem_id} input[type=number]").input_value())


def open_page(browser, width: int = 1280, height: int = 1600):
    page = browser.new_page(accept_downloads=True, viewport={"width": width, "height": height})
    page.set_default_timeout(WAIT_MS)  # a page of a busy machine loads slowly too
    page.goto(STUDIO_URL[0])
    page.wait_for_selector("#generate")
    page.wait_for_function("document.querySelector('#status').innerText.includes('ready')")
    return page


def open_advanced(page) -> None:
    """Unfold the advanced settings (the seed and the sampling), folded as the page opens."""
    if not page.locator("#seed").is_visible():
        page.locator("#advanced").get_by_text("Advanced").first.click()
    page.locator("#seed").wait_for()


def shown_piece(page) -> str:
    return page.locator("#piece input").input_value()


def wait_for_piece(page, starts: str, before: str = "") -> str:
    """Wait until the page shows a new piece whose label starts with `starts`: the piece
    chosen in the list, and the first variation's player and MIDI download that piece's (one
    update sets them all, but the page draws them one after the other)."""
    page.wait_for_function(
        """([starts, before]) => {
            const v = document.querySelector('#piece input').value;
            if (!v.startsWith(starts) || v === before) return false;
            const title = document.querySelector('#player-0 .mg-title');
            const midi = document.querySelector("#downloads-0 a[download$='.mid']");
            return title !== null
                && title.querySelector('b').innerText === v.slice(v.indexOf(': ') + 2)
                && midi !== null  // named by model, form or bars, seed and time
                && midi.getAttribute('download')
                    .includes('_seed' + v.match(/seed (\\d+)/)[1] + '_');
        }""",
        arg=[starts, before],
        timeout=WAIT_MS,
    )
    return shown_piece(page)


def download_midi(page, folder: Path, slot: int = 0) -> Path:
    with page.expect_download() as info:
        page.locator(f"#downloads-{slot} a[download$='.mid']").first.click()
    path = folder / f"{slot}_{info.value.suggested_filename}"
    info.value.save_as(path)
    return path


def notes_of(score: symusic.Score | Path, before_beat: float = 1e9) -> list[tuple[float, int]]:
    score = symusic.Score(str(score)) if isinstance(score, Path) else score
    score = score.to("quarter")
    found = {(round(n.time, 3), n.pitch) for t in score.tracks for n in t.notes}
    return sorted(x for x in found if x[0] < before_beat)


STUDIO_URL: list[str] = []


@pytest.fixture(autouse=True)
def _url(studio):
    STUDIO_URL[:] = [studio]


def test_generate_play_download_continue_and_bad_upload(studio, browser, tmp_path):
    page = open_page(browser)
    set_number(page, "bars", 2)
    open_advanced(page)
    set_number(page, "seed", 3)
    set_number(page, "temperature", 1.0)  # the piece of seed 3 at these opens with a pickup
    set_number(page, "repeat", 5)
    assert number(page, "seed") == 3
    page.wait_for_timeout(1500)  # the values typed reach the page's state (a user is slower)
    page.locator("#generate").click()
    first = wait_for_piece(page, "gen_001")
    assert "seed 3" in first and "2 bars" in first
    assert page.locator("#player-0 .mg-roll svg .mg-note").count() > 0  # the roll is drawn

    # play: the browser's player advances through the WAV, and the roll's playhead with it
    player = page.locator("#audio-0 audio")
    page.wait_for_function("document.querySelector('#audio-0 audio').readyState >= 1")
    player.scroll_into_view_if_needed()  # the form box pushes it down the page
    box = player.bounding_box()
    page.mouse.click(box["x"] + 20, box["y"] + box["height"] / 2)  # the player's play button
    page.wait_for_function("document.querySelector('#audio-0 audio').currentTime > 0.5")
    assert page.evaluate("document.querySelector('#audio-0 audio').duration") > 1.0
    head = "parseFloat(document.querySelector('#player-0 .mg-playhead').getAttribute('x1'))"
    page.wait_for_function(f"{head} > 60")  # the playhead follows the audio (after the axis)
    # a click on the roll moves the audio there: 80 % along the time axis
    page.evaluate("document.querySelector('#audio-0 audio').pause()")
    roll = page.locator("#player-0 svg")
    box = roll.bounding_box()
    left = float(page.locator("#player-0 .mg-roll").get_attribute("data-left"))
    roll.click(position={"x": box["width"] * (left + 0.8 * (1 - left)), "y": box["height"] / 2})
    seconds = float(page.locator("#player-0 .mg-roll").get_attribute("data-seconds"))
    at = page.evaluate("document.querySelector('#audio-0 audio').currentTime")
    assert abs(at - 0.8 * seconds) < 0.1 * seconds
    assert "bpm" in page.locator("#player-0 .mg-title").inner_text()  # its tempo in the title

    # download: a MIDI file of 2 bars (8 beats)
    made = download_midi(page, tmp_path)
    onsets = [t for t, _ in notes_of(made)]
    assert onsets and max(onsets) < 8

    # continue this piece: it is extended from its end (the piece of seed 3 opens with a
    # pickup in its first bar: the whole piece is kept all the same), and the result is the
    # whole piece, then the new bars
    assert 2 <= min(onsets) < 4
    page.locator("#continue-this-0").click()
    page.locator("#prompt-roll").scroll_into_view_if_needed()  # its picture loads once seen
    page.wait_for_selector("#prompt-roll img", timeout=WAIT_MS)
    assert page.locator("#mode input[value=end]").is_checked()
    set_number(page, "new-bars", 2)
    page.locator("#continue").click()
    label = wait_for_piece(page, "ext_", first)
    assert re.search(r"extends pop909_sine_spe_gated_2bars_seed3_[\d-]+\.mid \(2 bars\)", label)
    assert page.locator("#player-0 .mg-prompt-end").count() == 1  # where the piece ended
    continued = download_midi(page, tmp_path)
    assert notes_of(continued, 8) == notes_of(made)

    # continue a bundled song under chords: the prompt is kept, the new bars follow the chords
    page.locator("#prompt-file button[aria-label='Clear']").first.click()
    page.locator("#prompt-file input[type=file]").set_input_files(str(PROMPT))
    page.wait_for_selector("#prompt-roll img", timeout=WAIT_MS)
    page.locator("#mode").get_by_text("its opening, in bars").click()
    set_number(page, "prompt-bars", 2)  # the piece before set 1
    page.locator("#chords textarea").fill("Am F")
    page.locator("#continue").click()
    label = wait_for_piece(page, "cont_", label)
    assert "pop909_005.mid" in label
    song = download_midi(page, tmp_path)
    import musicgen

    prompt = musicgen.load(MODEL).prompt(PROMPT, bars=2)
    assert notes_of(song, 8) == notes_of(prompt.notes, 8)
    assert notes_of(song, 16) != notes_of(song, 8)  # the model wrote bars 3-4
    chords = page.locator("#player-0 .mg-chords").inner_text()
    assert "3 Am" in chords and "4 F" in chords  # the chords of the new bars, by name
    page.locator("#chords textarea").fill("")

    # a text file named .mid: a clear message in the page, and the studio goes on
    fake = tmp_path / "notes.mid"
    fake.write_text("these are not MIDI bytes\n")
    page.locator("#prompt-file button[aria-label='Clear']").first.click()
    page.locator("#prompt-file input[type=file]").set_input_files(str(fake))
    page.get_by_text("notes.mid: not a MIDI file").first.wait_for(timeout=WAIT_MS)
    page.get_by_role("tab", name="Generate").click()

    # a long job shows its progress in bars; Stop keeps the bars written
    set_number(page, "bars", 64)
    page.locator("#generate").click()
    page.get_by_text(re.compile(r"bar [2-9] of 64")).first.wait_for(timeout=WAIT_MS)
    page.locator("#stop-generate").click(no_wait_after=True)  # its effect is awaited below
    page.locator("#message").get_by_text("Stopped at bar").wait_for(timeout=WAIT_MS)
    stopped = wait_for_piece(page, "gen_", label)
    kept = int(re.search(r"stopped at bar (\d+) of 64", stopped).group(1))
    assert kept >= 1 and page.locator("#player-0 .mg-note").count() > 0
    onsets = [t for t, _ in notes_of(download_midi(page, tmp_path))]
    assert onsets and max(onsets) < 4 * kept  # whole bars only, downloadable
    set_number(page, "bars", 2)
    page.locator("#generate").click()
    assert wait_for_piece(page, "gen_", stopped).endswith("2 bars")
    # the page's own list holds all five pieces, the stopped one too
    page.wait_for_function("document.querySelectorAll('#history img').length === 5")
    page.close()


def test_defaults_are_the_model_own_through_the_api_and_the_page(studio, browser, tmp_path):
    """Each endpoint called with one argument: every other one is optional, the sampling
    ones None (the model's own), and the result is what the page makes with those values."""
    client = gradio_client.Client(studio, verbose=False, download_files=str(tmp_path))
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for name in ("/generate", "/continue"):
        params = {p["parameter_name"]: p for p in api[name]["parameters"]}
        assert all(p["parameter_has_default"] for p in params.values()), name
        for key in ("temperature", "top_k", "top_p", "repeat", "tempo"):
            assert params[key]["parameter_default"] is None, (name, key)
    result = client.predict(bars=2, api_name="/generate")
    message = result[-1]
    seed = int(re.search(r"take number (\d+)", message).group(1))
    page = open_page(browser)
    open_advanced(page)
    shown = {k: number(page, k) for k in ("temperature", "top-k", "top-p", "repeat")}
    assert shown == {"temperature": 0.9, "top-k": 0.0, "top-p": 0.9, "repeat": 4.5}
    used = "adventure 0.9, note choices considered 0, focus 0.9, repetition 4.5)"
    assert used in message  # the page's values, in its words
    set_number(page, "bars", 2)
    set_number(page, "seed", seed)
    page.locator("#generate").click()
    wait_for_piece(page, "gen_")
    mine = download_midi(page, tmp_path)
    assert mine.read_bytes() == Path(result[2][0]).read_bytes()  # the same piece

    # ↺: a changed setting back to the model's own
    set_number(page, "temperature", 1.7)
    page.locator("#reset-sampling").click()
    page.wait_for_function(
        "document.querySelector('#temperature input[type=number]').value === '0.9'"
    )
    # /continue with its one required thing, the prompt: the page's 2 bars, 4 new bars
    out = client.predict(prompt=gradio_client.handle_file(str(PROMPT)), api_name="/continue")
    assert used in out[-1]
    assert max(t for t, _ in notes_of(Path(out[2][0]))) < 24  # 2 + 4 bars
    page.close()


def test_words_progression_variations_and_a_narrow_window(studio, browser):
    page = open_page(browser, width=400, height=800)  # a phone's first screen
    title = "Pop songs with melody, form and chords"
    assert page.locator("#model input").input_value() == title
    cut = (
        "(() => { const i = document.querySelector('#model input');"
        " return i.scrollWidth > i.clientWidth; })()"
    )
    assert not page.evaluate(cut)  # the model's name is not cut
    box = page.locator("#generate").bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 800  # Generate on the first screen
    assert "POP909" in page.locator("#summary").inner_text()  # what to expect, first
    assert not page.locator("#temperature").is_visible()  # folded: advanced settings
    assert "tokens" not in page.locator("body").inner_text()  # no jargon on the page
    page.locator("#about").get_by_text("About this model").first.click()  # the card
    page.wait_for_function(
        "(() => { const imgs = [...document.querySelectorAll('#card img')];"
        " return imgs.length === 3 && imgs.every((i) => i.complete && i.naturalWidth > 0); })()"
    )  # its pictures show (none broken)
    assert "NLL" not in page.locator("#card").inner_text()
    page.locator("#about").get_by_text("About this model").first.click()
    page.locator("#chords textarea").fill("Am | F | C | G x2")
    page.set_viewport_size({"width": 400, "height": 1600})
    set_number(page, "bars", 8)
    page.locator("#progression").get_by_text("bar by bar").wait_for()
    table = page.locator("#progression").inner_text().split()
    assert table[-8:] == ["Am", "F", "C", "G", "Am", "F", "C", "G"]
    page.locator("#add-section").click()  # the form builder: a Verse of 8 bars
    page.wait_for_function("document.querySelector('#form textarea').value === 'A8'")
    page.locator("#progression").get_by_text("Verse 8").wait_for()
    page.locator("#clear-form").click()
    page.wait_for_function("document.querySelector('#form textarea').value === ''")
    set_number(page, "bars", 2)
    set_number(page, "num", 2)
    page.locator("#generate").click()
    page.locator("#player-1 .mg-roll").wait_for(timeout=WAIT_MS)
    first = page.locator("#downloads-0 a[download$='.mid']").first.get_attribute("download")
    second = page.locator("#downloads-1 a[download$='.mid']").first.get_attribute("download")
    assert first != second  # each variation its own files
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 400  # nothing wider than the window
    roll = page.locator("#player-0 svg").bounding_box()
    assert roll["width"] > 300 and roll["height"] > 90
    page.close()


def test_reloading_a_page_stops_its_job(studio, browser):
    """A page reloaded mid-job (4 pieces of 64 bars): the server says its job stopped, which
    it does once the job's thread has ended (its slot free), whichever told it first that the
    page had gone (the closed event stream or the unload); the reloaded page generates."""
    page = open_page(browser)
    set_number(page, "bars", 64)
    set_number(page, "num", 4)
    page.locator("#generate").click()
    page.get_by_text(re.compile(r"bar [1-9] of 64")).first.wait_for(timeout=WAIT_MS)
    before = len([x for x in SERVER_LINES if "a page closed" in x])
    page.reload()
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        if len([x for x in SERVER_LINES if "a page closed; 1 job(s)" in x]) > before:
            break
        time.sleep(0.5)
    else:
        pytest.fail("the reloaded page's job was not stopped:\n" + "".join(SERVER_LINES[-20:]))
    closed = [x for x in SERVER_LINES if "a page closed" in x][before:]
    assert closed == ["studio: a page closed; 1 job(s) of it stopped\n"]  # ended, said once
    page.wait_for_selector("#generate")
    page.wait_for_function("document.querySelector('#status').innerText.includes('ready')")
    set_number(page, "bars", 2)
    page.locator("#generate").click()
    assert wait_for_piece(page, "gen_").endswith("2 bars")
    page.close()


def test_pieces_survive_a_reload(studio, browser, tmp_path):
    """Nothing lost: a piece made, the page reloaded, the piece is still listed, shown and
    downloadable (its browser's session kept on the server), its file named by model, bars,
    seed and time; a new piece goes on from its number."""
    page = open_page(browser)
    set_number(page, "bars", 2)
    page.wait_for_timeout(300)
    page.locator("#generate").click()
    made = wait_for_piece(page, "gen_001")
    name = page.locator("#downloads-0 a[download$='.mid']").first.get_attribute("download")
    assert re.fullmatch(r"pop909_sine_spe_gated_2bars_seed\d+_\d{8}-\d{6}\.mid", name)
    before = download_midi(page, tmp_path).read_bytes()
    page.reload()
    page.wait_for_selector("#generate")
    page.locator("#message").get_by_text("1 piece(s) kept").wait_for(timeout=WAIT_MS)
    assert shown_piece(page) == made  # listed and shown again
    page.wait_for_function("document.querySelectorAll('#history img').length === 1")
    again = page.locator("#downloads-0 a[download$='.mid']").first.get_attribute("download")
    assert again == name and download_midi(page, tmp_path).read_bytes() == before
    page.wait_for_function("document.querySelector('#status').innerText.includes('ready')")
    set_number(page, "bars", 2)  # (the settings are the page's own: a reload resets them)
    page.wait_for_timeout(300)
    page.locator("#generate").click()
    assert wait_for_piece(page, "gen_002", made).endswith("2 bars")
    page.close()


def test_two_generations_at_once_get_their_own_results(studio, tmp_path):
    """Two sessions at once (gradio_client, the `generate` endpoint), each its own piece."""
    results: dict[int, tuple] = {}

    def call(seed: int) -> None:
        client = gradio_client.Client(
            studio, verbose=False, download_files=str(tmp_path / str(seed))
        )
        results[seed] = client.predict(LABEL, 2, 1, seed, 1.2, 0, 0.9, 0, "", api_name="/generate")

    threads = [threading.Thread(target=call, args=(seed,)) for seed in (11, 12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=WAIT_MS / 1000)
    assert sorted(results) == [11, 12]
    midi = {seed: Path(r[2][0]) for seed, r in results.items()}
    assert all(p.suffix == ".mid" for p in midi.values())
    assert midi[11].read_bytes() != midi[12].read_bytes()
    for seed, r in results.items():
        assert f"take number {seed}" in r[-1]  # the message names this call's seed
    call_again = {}
    client = gradio_client.Client(studio, verbose=False, download_files=str(tmp_path / "again"))
    call_again = client.predict(LABEL, 2, 1, 11, 1.2, 0, 0.9, 0, "", api_name="/generate")
    assert Path(call_again[2][0]).read_bytes() == midi[11].read_bytes()  # no cross-talk

    # bad input through the API: a clear error, the server still answers
    fake = tmp_path / "fake.mid"
    fake.write_text("not midi")
    with pytest.raises(Exception, match="fake.mid: not a MIDI file"):
        client.predict(
            LABEL, gradio_client.handle_file(str(fake)), "bars", 2, 8, 2, 1, 5, 1.2, 0, 0.9, 0,
            api_name="/continue",
        )  # fmt: skip


def test_no_other_server_file_is_served(studio, tmp_path):
    """Gradio's file route answers only for the studio's own folder: not a model's files, not
    the system's; an upload over the cap is refused."""
    for path in (MODEL / "README.md", Path("/etc/passwd"), ROOT / "pyproject.toml"):
        url = f"{studio}gradio_api/file={path}"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=30)
        assert refused.value.code in (403, 404), url
    big = tmp_path / "big.mid"
    big.write_bytes(PROMPT.read_bytes() + b"\0" * 3_000_000)  # 3 MB, over the 2 MB cap
    import httpx  # gradio's own HTTP client

    with big.open("rb") as f:  # straight to the server (gradio_client checks the size first)
        answer = httpx.post(f"{studio}gradio_api/upload", files={"files": f}, timeout=60)
    assert answer.status_code == 413 and "maximum allowed size" in answer.text


def phrase_marks(path: Path) -> list[tuple[float, str]]:
    """(beat, text) of a file's phrase markers (its form: 'i2', 'A4'; not its chords)."""
    score = symusic.Score(str(path)).to("quarter")
    return [(round(m.time, 3), m.text) for m in score.markers if not m.text.startswith("Chord ")]


def test_extend_undo_rewrite_and_reload(studio, browser, tmp_path):
    """The songwriter's round: a song in a form, extended by 8 bars (the whole song
    and its markers, then 8 bars), undone (the song again), its chorus written again (the rest
    kept), the page reloaded (every piece still there); the melody on its own instrument."""
    import pretty_midi

    page = open_page(browser)
    page.locator("#form textarea").fill("i2 A4 B4")
    page.wait_for_timeout(500)
    page.locator("#generate").click()
    song = wait_for_piece(page, "gen_")
    assert "form i2A4B4" in song
    first = download_midi(page, tmp_path)
    assert [t for _, t in phrase_marks(first)] == ["i2", "A4", "B4"]

    page.locator("#continue-this-0").click()  # extended from its end by 8 bars
    page.locator("#prompt-roll").scroll_into_view_if_needed()
    page.wait_for_selector("#prompt-roll img", timeout=WAIT_MS)
    assert page.locator("#form textarea").input_value() == ""  # the song has its form
    set_number(page, "new-bars", 8)
    page.locator("#continue").click()
    longer = wait_for_piece(page, "ext_", song)
    assert "(10 bars) by 8 bars" in longer
    extended = download_midi(page, tmp_path)
    assert notes_of(extended, 40) == notes_of(first)  # the whole song as it was
    onsets = [t for t, _ in notes_of(extended)]
    assert max(onsets) >= 40 and max(onsets) < 72  # then 8 bars: 18 in all
    assert phrase_marks(extended)[:3] == phrase_marks(first)  # its form's markers kept
    page.locator("#player-0 .mg-roll").get_by_text("Chorus").first.wait_for()

    page.locator("#undo").click()  # back to the song
    page.wait_for_function(f"document.querySelector('#piece input').value === {song!r}")
    page.locator("#redo-section input").click()
    page.get_by_role("option", name="Chorus, bars 7-10").click()
    page.locator("#redo").click()
    again = wait_for_piece(page, "redo_", song)
    assert "bars 7-10" in again
    rewritten = download_midi(page, tmp_path)
    assert notes_of(rewritten, 24) == notes_of(first, 24)  # intro and verse kept
    assert notes_of(rewritten) != notes_of(first)  # the chorus is new
    assert phrase_marks(rewritten) == phrase_marks(first)
    tracks = {i.name: i.program for i in pretty_midi.PrettyMIDI(str(rewritten)).instruments}
    assert tracks["Melody"] != tracks["Piano"]  # the tune on a lead, over the piano

    page.reload()
    page.wait_for_selector("#generate")
    page.locator("#message").get_by_text("3 piece(s) kept").wait_for(timeout=WAIT_MS)
    assert shown_piece(page) == again
    page.wait_for_function("document.querySelectorAll('#history img').length === 3")
    page.close()
