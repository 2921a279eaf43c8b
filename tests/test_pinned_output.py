"""The MIDI bytes `musicgen generate` and `continue` write for a fixed seed, pinned.

A change to how options are gathered, checked or passed on must not change what is sampled:
these digests were taken from the shipped models on the CPU (one thread, the torch version
below); another torch build may round differently, so there the test is skipped.
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
        ["5ee721026a5cc70c9bcb9876851d95f4b8e5fba5", "b763f786347eb5f183c8f9b573bc993cb8f1cf00"],
    ),
    "continue": (
        ["continue", "--checkpoint", "pop909_sine_spe_gated", "--prompt", str(SONG)]
        + ["--bars", "2", "--new-bars", "4"],
        ["0e73fe0684a68c22beae6b9d874e36cf2021725f", "645d6568d03e07596aa0bf1b1122c328e6e2b6c1"],
    ),
    "chords": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--bars", "4"]
        + ["--chords", "C G Am F"],
        ["f7ad644dbb6f92789ebb0b2a59d1b2ad4abb50a6", "5ce9539d77d45cae5b79b1e79e96ab42b05c2f48"],
    ),
    "form": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--form", "i1A2o1"],
        ["24773071e883033c60741e57a8feb2115974ea2b", "8e70c746902defd455ecb0d78a8c05a064c1f5c1"],
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
