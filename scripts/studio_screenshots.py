"""The studio's screenshots in docs/studio.md: a running studio at 1280 and 400 px wide.

    musicgen studio --port 7860 &
    python scripts/studio_screenshots.py http://127.0.0.1:7860/ [--chromium /usr/bin/chromium]

Each page generates two variations (4 bars, `--bars`; seed 7) under `Am | F | C | G x2`, with
the Advanced settings open, and is saved whole to docs/figures/studio_<width>.png.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

FIGURES = Path(__file__).resolve().parent.parent / "docs" / "figures"


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    box.blur()


def shoot(browser, url: str, width: int, bars: int = 4) -> Path:
    """One page at `width` px after two variations of `bars` bars; returns the PNG written."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(900_000)  # a busy machine
    page.goto(url)
    page.wait_for_selector("#status")
    page.wait_for_function("document.querySelector('#status').innerText.includes('ready')")
    page.locator("#chords textarea").fill("Am | F | C | G x2")
    set_number(page, "bars", bars)
    set_number(page, "num", 2)
    page.locator("#advanced").get_by_text("Advanced").first.click()
    set_number(page, "seed", 7)
    page.locator("#generate").click()
    page.locator("#player-1 .mg-roll").wait_for()
    page.wait_for_timeout(1000)
    out = FIGURES / f"studio_{width}.png"
    page.screenshot(path=str(out), full_page=True)
    page.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--widths", type=int, nargs="+", default=[1280, 400])
    parser.add_argument("--bars", type=int, default=4)
    args = parser.parse_args()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=args.chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        for width in args.widths:
            print(shoot(browser, args.url, width, args.bars))
        browser.close()


if __name__ == "__main__":
    main()
