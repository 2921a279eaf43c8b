"""Worker processes for `musicgen prepare`: one job per worker at a time, every exit path clean.

A `multiprocessing.Pool` waits forever when a worker is killed (the OOM killer), prints a
traceback per worker on Ctrl-C and leaves its workers blocked when the parent is killed. Here:
- a worker that dies is noticed through its process sentinel: its job gets a reason, a fresh
  worker replaces it and the run goes on;
- workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent alone handles it and
  ends the workers), and die quietly on SIGTERM;
- the parent turns SIGTERM into `errors.Terminated` (`terminate_raises`), so a plain `kill`
  unwinds like Ctrl-C: the workers are terminated and joined, the command exits 143;
- a worker whose parent disappeared (SIGKILL) exits: on Linux the kernel sends it SIGTERM
  (PR_SET_PDEATHSIG); elsewhere it notices within `ORPHAN_POLL_S` while idle (it closes the
  inherited pipe ends of its siblings and checks its parent's pid).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import wait
from typing import Any

from musicgen.errors import MusicgenError, Terminated

ORPHAN_POLL_S = 1.0  # how often an idle worker checks that its parent is still there
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
JOIN_S = 5.0  # how long a finished worker may take to leave before it is terminated


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread for the duration of the block (elsewhere a
    no-op), so `finally` blocks run and the CLI exits 143 without a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _worker_main(conn, siblings: list, init: Callable[[Any], None], arg: Any, work) -> None:
    """A worker process: `init(arg)`, then one job in, one result out, until None or orphaned.
    A MusicgenError (the cache cannot be written: the disk is full) goes to the parent, which
    stops the run."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent()
    for other in siblings:  # the parent's ends of the workers' pipes, inherited by fork
        other.close()
    parent = os.getppid()
    init(arg)
    try:
        while True:
            while not conn.poll(ORPHAN_POLL_S):
                if os.getppid() != parent:
                    return
            job = conn.recv()
            if job is None:
                return
            try:
                result = work(job)
            except MusicgenError as exc:
                result = exc
            conn.send(result)
    except (EOFError, OSError):  # the parent went away mid-job: nothing to report to
        return


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM when its parent dies, even mid-job (elsewhere
    the idle check of `_worker_main` alone ends an orphan)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except (OSError, AttributeError):
        pass


def _died(exitcode: int | None) -> str:
    how = (
        f"killed by signal {-exitcode}"
        if exitcode is not None and exitcode < 0
        else f"exit code {exitcode}"
    )
    return f"the worker process died on this file ({how}; out of memory?)"


class _Workers:
    """The live worker processes; `stop(clean)` ends every one of them."""

    def __init__(self, init, arg, work) -> None:
        self.ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
        self.init, self.arg, self.work = init, arg, work
        self.all: dict = {}  # connection -> process

    def spawn(self):
        parent, child = self.ctx.Pipe()
        siblings = [*self.all, parent]  # parent ends the child must not keep open
        args = (child, siblings, self.init, self.arg, self.work)
        proc = self.ctx.Process(target=_worker_main, args=args, daemon=True)
        proc.start()
        child.close()
        self.all[parent] = proc
        return parent, proc

    def reap(self, conn) -> None:
        proc = self.all.pop(conn)
        conn.close()
        proc.join()

    def stop(self, clean: bool) -> None:
        """Clean: ask each worker to leave, then wait; else (an error, Ctrl-C, SIGTERM)
        terminate them at once. Either way every worker is joined."""
        for conn, proc in self.all.items():
            if clean:
                with contextlib.suppress(OSError):
                    conn.send(None)
            else:
                proc.terminate()
        for conn, proc in self.all.items():
            proc.join(timeout=JOIN_S if clean else None)
            if proc.is_alive():
                proc.terminate()
                proc.join()
            conn.close()
        self.all.clear()


def run_pool(
    jobs: list,
    workers: int,
    init: Callable[[Any], None],
    arg: Any,
    work: Callable[[Any], Any],
    died: Callable[[Any, str], Any],
    done: Callable[[], Any],
) -> list:
    """`work(job)` for every job on `workers` processes (each started with `init(arg)`), one job
    per worker at a time, so that when a worker dies the parent knows which job it held: that
    job's result is `died(job, reason)` and a fresh worker replaces it."""
    pool = _Workers(init, arg, work)
    todo, results = list(reversed(jobs)), []
    busy: dict = {}  # connection -> job
    clean = False
    try:
        idle = [pool.spawn() for _ in range(min(workers, len(jobs)))]
        while todo or busy:
            while idle and todo:
                conn, proc = idle.pop()
                job = todo.pop()
                try:
                    conn.send(job)
                except OSError:  # that worker died after its last answer: replace it, retry
                    pool.reap(conn)
                    idle.append(pool.spawn())
                    todo.append(job)
                    continue
                busy[conn] = job
            ready = set(wait([*busy, *(pool.all[c].sentinel for c in busy)]))
            for conn, job in list(busy.items()):
                proc = pool.all[conn]
                if conn not in ready and proc.sentinel not in ready:
                    continue
                del busy[conn]
                try:
                    res = conn.recv()
                except (EOFError, OSError):  # the worker died before answering
                    pool.reap(conn)
                    results.append(died(job, _died(proc.exitcode)))
                    idle.append(pool.spawn())
                else:
                    idle.append((conn, proc))
                    if isinstance(res, MusicgenError):
                        raise res
                    results.append(res)
                done()
        clean = True
    finally:
        pool.stop(clean)
    return results
