"""How a studio job runs under Gradio: in a worker thread of its own, with a stop flag that the
sampler polls every step (`cancel=`), so that cancelling a request stops the work and the
concurrency slot is freed only once the thread has ended."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

WORKERS = ThreadPoolExecutor(64, thread_name_prefix="studio-job")  # --concurrency is <= 64


class JobFlag(threading.Event):
    """A job's stop flag for the sampler's `cancel=`: set by Stop (the job keeps what it wrote)
    or by `leave()` (the request was cancelled or its page closed: nobody will see a result),
    and also set once the client that asked has gone (`gone()`: its connection closed)."""

    def __init__(self, gone: Callable[[], bool] = lambda: False):
        super().__init__()
        self.gone = gone
        self._left = False

    def leave(self) -> None:
        """Stop the job for good: its result has no one to go to."""
        self._left = True
        self.set()

    @property
    def left(self) -> bool:
        return self._left or self.gone()

    def is_set(self) -> bool:
        return super().is_set() or self.gone()


async def in_thread(work: Callable[[threading.Event], object], flag: JobFlag):
    """`work(flag)` in a worker thread. When Gradio cancels the request (Stop, gradio_client's
    `job.cancel()`, its cancel route), the flag stops the sampler at its next step and the
    request ends only when the thread has: the concurrency slot is never freed early."""
    context = contextvars.copy_context()  # gradio's progress tracker lives in a context var
    task = asyncio.get_running_loop().run_in_executor(WORKERS, context.run, work, flag)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        flag.leave()
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller hears
        raise
