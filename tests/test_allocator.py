"""musicgen.allocator: with it, freed large tensors stay mapped (reused without page faults)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys, torch
from musicgen.allocator import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
x = torch.ones(64 * 2**20)  # 256 MiB, touched
before = resident_mib()
del x
print(kept, before - resident_mib())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)")
def test_freed_large_tensor_stays_resident_only_with_keep_freed_memory():
    def released(mode: str) -> tuple[str, float]:
        out = subprocess.run(
            [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
        ).stdout.split()
        return out[0], float(out[1])

    kept, freed_with = released("keep")
    _, freed_without = released("system")
    assert kept == "True"
    assert freed_without > 200  # glibc's default: an mmap, returned on free
    assert freed_with < 50  # kept in the heap for the next tensor
