"""How a studio job runs under Gradio: in a worker thread of its own, with a stop flag that the
sampler polls every step (`cancel=`), so that cancelling a request stops the work and the
concurrency slot is freed only once the thread has ended; and which jobs each page has running,
so that the page's leaving stops them (`PageJobs`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from musicgen.errors import Cancelled

WORKERS = ThreadPoolExecutor(64, thread_name_prefix="studio-job")  # --concurrency is <= 64
LEAVE_WAIT_S = 60.0  # how long a page's leaving waits for its jobs' threads to end (one step each)


class JobFlag(threading.Event):
    """A job's stop flag for the sampler's `cancel=`: set by Stop (the job keeps what it wrote)
    or by `leave()` (the request was cancelled or its page closed: nobody will see a result),
    and also set once the client that asked has gone (`gone()`: its connection closed)."""

    def __init__(self, gone: Callable[[], bool] = lambda: False):
        super().__init__()
        self.gone = gone
        self._left = False
        self.ended = threading.Event()  # set once the job's thread has ended (`in_thread`)

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
    task = asyncio.get_running_loop().run_in_executor(WORKERS, context.run, _settled, work, flag)
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
    finally:
        flag.ended.set()


SERVER_PATH = re.compile(r"(?<![\w.])(?:/[^/\s:;,'\"()]+)+/([^/\s:;,'\"()]+)")


def page_line(message: str) -> str:
    """A message as the page shows it: its first line, each server path as its file's name
    (the page's user sees no folder of the server: uploads, models, results)."""
    lines = message.strip().splitlines() or [""]
    return SERVER_PATH.sub(r"\1", lines[0])


class JobError(RuntimeError):
    """An exception a Future cannot carry (StopIteration: asyncio refuses it and the request
    never ends, holding its slot; KeyboardInterrupt, SystemExit: they would stop the server),
    raised in its place as a bug of the job."""


def _settled(work: Callable[[threading.Event], object], flag: JobFlag):
    """`work(flag)`, whose every exception ends the job: one a Future cannot carry comes back
    as a `JobError` naming it."""
    try:
        return work(flag)
    except StopIteration as exc:
        raise JobError(f"StopIteration: {exc}") from None
    except Exception:
        raise
    except BaseException as exc:
        raise JobError(f"{type(exc).__name__}: {exc}") from None


class PageJobs:
    """The running jobs of each page (by its Gradio session hash), for the page's leaving to
    stop them. Two signals say a page has gone, in no fixed order: Gradio's queue marks its
    events dead as soon as the page's event stream closes (`JobFlag.gone`: the sampler stops at
    its next step), and `unload` runs once its heartbeat closes (`leave`). A job that ended on
    the first is remembered until the second, so `leave` counts every job the page's leaving
    stopped, whichever came first."""

    def __init__(self):
        self._running: dict[str, set[JobFlag]] = {}
        self._stopped: dict[str, int] = {}  # jobs that ended because their page had gone
        self._lock = threading.Lock()

    async def run(self, key: str, work: Callable[[threading.Event], object], flag: JobFlag):
        """`work(flag)` in a worker thread (`in_thread`), known as page `key`'s until it ends."""
        with self._lock:
            self._running.setdefault(key, set()).add(flag)
        gone = False
        try:
            return await in_thread(work, flag)
        except (Cancelled, asyncio.CancelledError):
            gone = flag.gone()  # stopped because its page's connection closed
            raise
        finally:
            with self._lock:
                mine = self._running.get(key, set())
                if gone and flag in mine:  # not yet counted by `leave`
                    self._stopped[key] = self._stopped.get(key, 0) + 1
                mine.discard(flag)
                if not mine:
                    self._running.pop(key, None)

    def leave(self, key: str, wait_s: float = LEAVE_WAIT_S) -> tuple[int, int]:
        """Page `key` has gone: stop its jobs for good and wait (up to `wait_s` each) for their
        threads to end. Returns (jobs its leaving stopped, jobs still ending after the wait)."""
        with self._lock:
            flags = self._running.pop(key, set())
            stopped = self._stopped.pop(key, 0)
        for flag in flags:
            flag.leave()
        ending = sum(not flag.ended.wait(wait_s) for flag in flags)
        return stopped + len(flags) - ending, ending
