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
        ["811de429d7ae344b5e0936b926aba20a879c5569", "214da8e3aa21f3bfc1ce1a911ac6c36595c8fd3d"],
    ),
    "continue": (
        ["continue", "--checkpoint", "pop909_sine_spe_gated", "--prompt", str(SONG)]
        + ["--bars", "2", "--new-bars", "4"],
        ["b6b1044aa990bcba1d9ae287be5022b68ca72f63", "ecc9368aa628e3366b44dadffd75ff94f119e45b"],
    ),
    "chords": (
        ["generate", "--checkpoint", "pop909_sine_spe_gated", "--bars", "4"]
        + ["--chords", "C G Am F"],
        ["cc6671fc6bcf2ca48331189406b51b5075119827", "38aa69d548b8836c41d9dd748466c49437ab2f46"],
    ),
    "groove": (
        ["generate", "--checkpoint", "groove_sine_spe_gated", "--bars", "4"]
        + ["--temperature", "0.8", "--top-k", "40"],
        ["8c5e0e6ce5e5bb5a339d3a19846c82479bdd28e1", "f28f2fed1f67e499ee58ada3c24efb12bf1279b5"],
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
