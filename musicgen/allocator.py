"""Keep freed memory in the process (glibc): large tensors are then reused, not page-faulted anew.

glibc serves every block over its mmap threshold (32 MiB at most) with a fresh mmap and returns
it to the kernel on free, and torch's CPU allocator does not cache blocks: each large activation
of a long sequence is new pages that the kernel zero-fills on first touch, which slows the
memory-bound operators (GELU, additions, copies) and so a training step at long lengths (how
much: docs/training.md and docs/benchmarks.md, "growth"; `scripts/bench/bench_growth.py`).
Serving them from the heap, and trimming it only past 2 GiB of free space at its top, keeps
those pages mapped; the process's resident memory then stays near its peak until it exits.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4  # glibc's mallopt parameters
TRIM_THRESHOLD = 2**31 - 1  # bytes free at the heap's top before it is returned (an int)
TOP_PAD = 64 * 2**20  # bytes the heap grows by beyond a request


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory (no mmap for large blocks, a high trim threshold); False
    where the C library is not glibc (nothing is changed there). Called by every command."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only: musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = [
        mallopt(M_MMAP_MAX, 0),
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        mallopt(M_TOP_PAD, TOP_PAD),
    ]
    return all(d == 1 for d in done)
