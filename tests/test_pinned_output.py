"""The MIDI bytes `musicgen generate` and `continue` write for a fixed seed, pinned.

A change to how options are gathered, checked or passed on must not change what is sampled:
these digests were taken from the shipped models on the CPU (one thread, the torch version
below); another torch build may round differently, so there the test is skipped. The pop
model's cases with a melody written at `--no-legato` pin what is sampled; "form, legato" pins
the melody's legato (`generation.legato`) on top of it. The second "continue" file was
re-pinned when its new notes joined the prompt's Piano track (the same notes; issue 66). The
melody's lead instrument (`generation.finish`) is set back to the piano where a case writes a
melody, so the digests still pin what is sampled (issue 65).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from paths import DATA

from musicgen.cli import main

TORCH = "2.13.0+cpu"  # the build the digests come from
SONG = DATA / "pop909" / "001" / "001.mid"
CASES = {
    "generate": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--bars", "4"],
        ["44901949930bfd32ba17627c6d4ddbaaa6c7e985", "85f1b2ef85e4e212d24661dd06fa9bae18f1520d"],
    ),
    "continue": (
        ["continue", "--checkpoint", "pop909_sine_spe_gated", "--prompt", str(SONG)]
        + ["--bars", "2", "--new-bars", "4", "--no-legato", "--melody-program", "0"],
        ["d3bed964e159efb5d9a8788c3790e94a05fe49a9", "f60e2b2621b301771879bcb93fc0c7f16bf49679"],
    ),
    "chords": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--bars", "4"]
        + ["--chords", "C G Am F"],
        ["6e8764459a658e46ef329e1d5f1dd0a8652c8a8b", "0abad9fe680153bea2ca8bcf7be9bae49020fd6f"],
    ),
    "form": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--form", "i1A2o1", "--no-legato"]
        + ["--melody-program", "0"],
        ["78d0a5f5340901ff6d1af5cdec89e8b2f22a272f", "048c7b94faebf04c19bbbf97f2f7163d61404a50"],
    ),
    "form, legato": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--form", "i1A2o1"]
        + ["--melody-program", "0"],
        ["607d2d4336978da6642e91014ceddbaa5c60930c", "9a0b5bfe9e5b4bffc13a102e80987d54aec30658"],
    ),
    "groove": (
        ["generate", "--checkpoint", "groove_sine_spe_gated", "--bars", "4"]
        + ["--temperature", "0.8", "--top-k", "40"],
        ["8badd8968f92332d9796173d75f138e521fb0915", "93f6634bdce73b619f5e0825b9d889f381527d27"],
    ),
}


@pytest.mark.skipif(torch.__version__ != TORCH, reason=f"digests taken with torch {TORCH}")
@pytest.mark.parametrize("case", list(CASES))
def test_a_fixed_seed_writes_the_same_bytes(case, tmp_path):
    argv, digests = CASES[case]
    out = tmp_path / case
    assert main([*argv, "--num", "2", "--seed", "7", "--out", str(out)]) == 0
    files = sorted(Path(out).glob("*.mid"))
    assert [hashlib.sha1(f.read_bytes()).hexdigest() for f in files] == digests
