"""Run a function over work items (usually Parquet parts), inline or in a local process pool.

Results come back in item order whatever the worker count, so a stage whose part i depends only
on part i, its config and its seed writes the same bytes for any `workers`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from pipeline.progress import Progress

T = TypeVar("T")
R = TypeVar("R")


class Executor:
    """`map(fn, items)`: fn must be picklable (a module-level function or a functools.partial)."""

    def __init__(self, workers: int = 1, progress: bool = False):
        self.workers = max(1, int(workers))
        self.progress = progress
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], items: Sequence[T], desc: str = "") -> list[R]:
        items = list(items)
        bar = Progress(
            len(items), desc or getattr(fn, "__name__", "work"), enabled=self.progress, unit="parts"
        )
        if self.workers == 1 or len(items) <= 1:
            out = []
            for item in items:
                out.append(fn(item))
                bar.update(1)
            bar.close()
            return out
        pool = self._get_pool()
        futures = [pool.submit(fn, item) for item in items]
        results: list[Any] = []
        for fut in futures:  # in submission order: deterministic
            results.append(fut.result())
            bar.update(1)
        bar.close()
        return results

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # forkserver: no fork() of a process that already runs pyarrow/numpy threads
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=mp.get_context("forkserver"),
                initializer=_init_worker,
                initargs=(os.getpid(),),
            )
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Stop now (Ctrl-C, a failed part): cancel queued work and end the worker processes,
        so none of them writes into a folder the runner is about to remove."""
        if self._pool is None:
            return
        processes = list(getattr(self._pool, "_processes", {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.terminate()
        for proc in processes:
            proc.join(timeout=10)
        self._pool = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


WATCH_S = 1.0  # how often a worker checks that the process that started it is still alive


def _init_worker(parent_pid: int) -> None:
    """Runs first in every worker: a worker never outlives the run that started it."""
    # Ctrl-C reaches the whole process group; only the parent handles it (and aborts the pool)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Linux: the kernel kills us when our parent (the forkserver, which itself exits when the
    # run's process goes) dies, even by SIGKILL or the OOM killer
    _set_parent_death_signal()
    # everywhere: a watchdog thread exits once the run's process is gone
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def _set_parent_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass  # the watchdog still covers it


def _watch_parent(parent_pid: int) -> None:
    ppid = os.getppid()  # the forkserver; reparented (ppid changes) once it is gone
    while _alive(parent_pid) and os.getppid() == ppid:
        time.sleep(WATCH_S)
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (the pid was reused)
        return False
    return True
