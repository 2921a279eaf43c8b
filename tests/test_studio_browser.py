"""`musicgen studio` in a real browser: headless Chromium (Debian's `chromium`) driven by
Playwright, against the studio started as a user starts it (`musicgen studio`, a subprocess on
a free port) with the shipped pop909_sine_spe_gated model and 2-bar pieces.

One page generates, plays, downloads, continues a bundled POP909 song, gets a text file named
.mid refused, shows a long job's progress, stops it and still generates after it; two
gradio_client sessions generate at once and each gets its own result (the same bytes as that
seed alone). Skipped, with the reason, where gradio,
Playwright or Chromium is missing (.ci/run installs Chromium, so CI runs them).
"""

from __future__ import annotations

import os
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
MODEL = ROOT / "checkpoints" / "pop909_sine_spe_gated"
PROMPT = ROOT / "data" / "demo" / "pop909_005.mid"
WAIT_MS = 120_000  # a generous bound for one 2-bar job on a loaded 2-core machine


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
    deadline = time.monotonic() + 120
    while url is None and time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        lines.append(line)
        if line.startswith("musicgen studio: "):
            url = line.split(": ", 1)[1].strip()
    if url is None:
        proc.kill()
        pytest.fail("the studio did not start:\n" + "".join(lines))
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep its pipe drained
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    assert proc.returncode is not None


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def set_number(page, elem_id: str, value) -> None:
    """Type into the number box of a slider or number field (as a user does)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    box.blur()


def shown_piece(page) -> str:
    return page.locator("#piece input").input_value()


def wait_for_piece(page, starts: str, before: str = "") -> str:
    """Wait until the page shows a new piece whose label starts with `starts`."""
    page.wait_for_function(
        """([starts, before]) => {
            const v = document.querySelector('#piece input').value;
            return v.startsWith(starts) && v !== before;
        }""",
        arg=[starts, before],
        timeout=WAIT_MS,
    )
    return shown_piece(page)


def download_midi(page, folder: Path) -> symusic.Score:
    with page.expect_download() as info:
        page.locator("#downloads a[download$='.mid']").first.click()
    path = folder / info.value.suggested_filename
    info.value.save_as(path)
    return symusic.Score(str(path))


def notes_of(score: symusic.Score, before_beat: float) -> list[tuple[float, int]]:
    score = score.to("quarter")
    found = {(round(n.time, 3), n.pitch) for t in score.tracks for n in t.notes}
    return sorted(x for x in found if x[0] < before_beat)


def test_generate_play_download_continue_and_bad_upload(studio, browser, tmp_path):
    page = browser.new_page(accept_downloads=True, viewport={"width": 1280, "height": 1600})
    page.goto(studio)
    page.wait_for_selector("#generate")
    set_number(page, "bars", 2)
    set_number(page, "seed", 3)
    page.locator("#generate").click()
    first = wait_for_piece(page, "gen_001")
    assert "seed 3" in first and "2 bars" in first
    assert page.locator("#roll img").get_attribute("src")  # the piano roll is shown

    # play: the browser's player advances through the WAV
    player = page.locator("#audio audio")
    page.wait_for_function("document.querySelector('#audio audio').readyState >= 1")
    box = player.bounding_box()
    page.mouse.click(box["x"] + 20, box["y"] + box["height"] / 2)  # the player's play button
    page.wait_for_function("document.querySelector('#audio audio').currentTime > 0.2")
    assert page.evaluate("document.querySelector('#audio audio').duration") > 1.0

    # download: a MIDI file of 2 bars (8 beats)
    score = download_midi(page, tmp_path)
    onsets = [n.time for t in score.to("quarter").tracks for n in t.notes]
    assert onsets and max(onsets) < 8

    # continue a bundled song: the prompt is shown, the result starts with its 2 bars
    page.get_by_role("tab", name="Continue").click()
    page.locator("#prompt-file input[type=file]").set_input_files(str(PROMPT))
    page.wait_for_selector("#prompt-roll img", timeout=WAIT_MS)
    set_number(page, "new-bars", 2)
    page.locator("#continue").click()
    label = wait_for_piece(page, "cont_", first)
    assert "pop909_005.mid" in label
    continued = download_midi(page, tmp_path)
    import musicgen

    prompt = musicgen.load(MODEL).prompt(PROMPT, bars=2)
    assert notes_of(continued, 8) == notes_of(prompt.notes, 8)
    assert notes_of(continued, 16) != notes_of(continued, 8)  # the model wrote bars 3-4

    # a text file named .mid: a clear message in the page, and the studio goes on
    fake = tmp_path / "notes.mid"
    fake.write_text("these are not MIDI bytes\n")
    page.locator("#prompt-file button[aria-label='Clear']").first.click()
    page.locator("#prompt-file input[type=file]").set_input_files(str(fake))
    page.get_by_text("notes.mid: not a MIDI file").first.wait_for(timeout=WAIT_MS)
    page.get_by_role("tab", name="Generate").click()

    # a long job shows its progress and stops on Stop; the next job runs
    set_number(page, "bars", 64)
    page.locator("#generate").click()
    page.locator("#roll").get_by_text("sampling").first.wait_for(timeout=WAIT_MS)
    page.locator("#stop-generate").click()
    # the page takes a new click once the stopped job is over (gradio's trigger_mode "once")
    page.locator("#roll").get_by_text("sampling").first.wait_for(state="hidden", timeout=WAIT_MS)
    set_number(page, "bars", 2)
    page.locator("#generate").click()
    assert wait_for_piece(page, "gen_", label).endswith("2 bars")
    # the page's own list holds all three pieces
    assert page.locator("#history img").count() == 3
    page.close()


def test_two_generations_at_once_get_their_own_results(studio, tmp_path):
    """Two sessions at once (gradio_client, the `generate` endpoint), each its own piece."""
    results: dict[int, tuple] = {}

    def call(seed: int) -> None:
        client = gradio_client.Client(
            studio, verbose=False, download_files=str(tmp_path / str(seed))
        )
        results[seed] = client.predict(
            "pop909_sine_spe_gated", 2, 1, seed, 1.2, 0, 0.9, 0, "", api_name="/generate"
        )

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
        assert f"seed {seed}" in r[-1]  # the message names this call's seed
    call_again = {}
    client = gradio_client.Client(studio, verbose=False, download_files=str(tmp_path / "again"))
    call_again = client.predict(
        "pop909_sine_spe_gated", 2, 1, 11, 1.2, 0, 0.9, 0, "", api_name="/generate"
    )
    assert Path(call_again[2][0]).read_bytes() == midi[11].read_bytes()  # no cross-talk

    # bad input through the API: a clear error, the server still answers
    fake = tmp_path / "fake.mid"
    fake.write_text("not midi")
    with pytest.raises(Exception, match="fake.mid: not a MIDI file"):
        client.predict(
            "pop909_sine_spe_gated", gradio_client.handle_file(str(fake)), "bars", 2, 8, 2, 1,
            5, 1.2, 0, 0.9, 0, api_name="/continue",
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
