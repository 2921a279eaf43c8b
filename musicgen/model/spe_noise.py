"""All randomness of SPE for one sequence: a seed, the draws named by keys, and their cache.

Each draw has its own generator (seeded from the sequence's seed and the draw's key), so a draw
is the same whatever was drawn before it, in whichever order or thread: the parallel forward and
the step-by-step generation see the same noise, and noise blocks can be drawn concurrently.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import Tensor


class SPENoise:
    """All randomness of SPE for one sequence: a seed and the (cached) draws made from it."""

    def __init__(self, seed: int, device: torch.device | str) -> None:
        self.seed, self.device = int(seed), torch.device(device)
        self._cache: dict[tuple, Tensor] = {}

    def _generator(self, key: tuple[int, ...]) -> torch.Generator:
        s = self.seed % (2**61 - 1)
        for k in key:
            s = (s * 1_000_003 + k + 1) % (2**61 - 1)
        return torch.Generator(device=self.device).manual_seed(s)

    def gaussian(self, key: tuple[int, ...], shape: tuple[int, ...], keep: bool = True) -> Tensor:
        """The draw named `key` (always the same for a seed); `keep=False`: do not cache it."""
        if key in self._cache:
            return self._cache[key]
        out = torch.randn(shape, generator=self._generator(key), device=self.device)
        if keep:
            self._cache[key] = out
        return out

    def gaussians(self, keys: list[tuple[int, ...]], shape: tuple[int, ...], keep: bool) -> list:
        """`gaussian` of several keys; on CPU the missing ones are drawn by a pool of threads
        (torch draws one tensor on one thread; each key has its own generator, so the values do
        not depend on which thread draws them). The tensors are allocated here, on the calling
        thread, so that their memory returns to its allocator."""
        missing = [k for k in keys if k not in self._cache]
        if self.device.type != "cpu" or len(missing) < 2 or torch.get_num_threads() < 2:
            return [self.gaussian(k, shape, keep) for k in keys]
        drawn = {k: torch.empty(shape) for k in missing}

        def draw(key: tuple[int, ...]) -> None:
            torch.randn(shape, generator=self._generator(key), out=drawn[key])

        list(_pool().map(draw, missing))
        if keep:
            self._cache.update(drawn)
        return [drawn[k] if k in drawn else self._cache[k] for k in keys]

    def drop_below(self, prefix: tuple[int, ...], block: int) -> None:
        """Forget cached noise blocks `prefix + (b,)` with b < block (they can be redrawn)."""
        n = len(prefix)
        for key in [k for k in self._cache if k[:n] == prefix and len(k) == n + 1]:
            if key[n] < block:
                del self._cache[key]


@functools.cache
def _pool() -> ThreadPoolExecutor:
    """The threads that draw noise blocks (made once, as many as torch's intra-op threads)."""
    return ThreadPoolExecutor(torch.get_num_threads(), thread_name_prefix="spe-noise")
