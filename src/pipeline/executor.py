"""Run a function over work items (usually Parquet parts): inline, in a local process pool, or
as Ray tasks (pipeline.run.ray, `executor: {kind: ray}`).

Results come back in item order whatever the worker count or executor, so a stage whose part i
depends only on part i, its config and its seed writes the same bytes for any `workers`.

`BaseExecutor` is the one interface of every executor (the runner and the stages use nothing
else): `map`, `map_beside`, `start_beside`, `bind`, `check_shared`, `abort`, `close`, `workers`,
`remote_nodes`. While the runner has bound a stage's ledger (pipeline.run.resume), tasks that
write part files are recorded as they finish and a re-run after a crash returns their recorded
results instead; while it has bound a sync (pipeline.run.remote, a URL run folder on remote
nodes), each map keeps the URL and the driver's working copy in step.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pipeline.io import pid_alive
from pipeline.progress import Progress
from pipeline.semaphores import own_semaphores, sweep_semaphores

if TYPE_CHECKING:
    from pathlib import Path


T = TypeVar("T")
R = TypeVar("R")


class TaskLedger(Protocol):
    """What a map needs of a stage's resume record (pipeline.run.resume.PartLedger)."""

    def keys(self, desc: str, n: int) -> list[str]: ...

    def recorded(self, keys: list[str]) -> tuple[list[Any], list[int]]: ...

    def wrap(self, fn: Callable[[Any], Any]) -> Callable[[tuple[str, Any]], Any]: ...


class TaskSync(Protocol):
    """What a map needs to keep a URL run folder in step (pipeline.run.remote.MapSync)."""

    token: str  # names the run's copies on other nodes, removed when the executor closes

    def wrap(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]: ...

    def after(self) -> None: ...


class BaseExecutor(ABC):
    """`map(fn, items, desc)`: fn must be picklable (a module-level function or a partial).
    A subclass implements `_map` (run fn over items, results in item order) and may extend
    `bind`, `check_shared`, `abort` and `close`."""

    workers: int = 1
    progress: bool = False
    remote_nodes = False  # whether tasks may run on another machine than the driver
    _ledger: TaskLedger | None = None
    _sync: TaskSync | None = None

    def bind(self, ledger: TaskLedger | None, sync: TaskSync | None = None) -> None:
        """Attach a stage's ledger and sync to every later map; `bind(None)` detaches them
        (the runner binds before a stage runs and unbinds after, however it ends). A sync is
        only for an executor with `remote_nodes`: local workers share the driver's copy."""
        self._ledger, self._sync = ledger, sync

    def map(self, fn: Callable[[T], R], items: Sequence[T], desc: str = "") -> list[R]:
        items = list(items)
        name = desc or getattr(fn, "__name__", "work")
        bar = Progress(len(items), name, enabled=self.progress, unit="parts")
        ledger = self._ledger
        if ledger is None:
            results = self._synced_map(fn, items, bar)
        else:
            keys = ledger.keys(name, len(items))
            results, todo = ledger.recorded(keys)
            bar.update(len(items) - len(todo))
            jobs = [(keys[i], items[i]) for i in todo]
            done = self._synced_map(ledger.wrap(fn), jobs, bar)
            for i, r in zip(todo, done, strict=True):
                results[i] = r
        bar.close()
        return results

    def _synced_map(self, fn: Callable[[Any], Any], items: list[Any], bar: Progress) -> list[Any]:
        sync = self._sync
        if sync is None or not items:
            return self._map(fn, items, bar)
        results = self._map(sync.wrap(fn), items, bar)
        sync.after()
        return results

    @abstractmethod
    def _map(self, fn: Callable[[Any], Any], items: list[Any], bar: Progress) -> list[Any]:
        """fn over items, results in item order; `bar.update(1)` per finished item."""

    @abstractmethod
    def check_shared(self, run_dir: Path | None) -> None:
        """Fail early if workers cannot see `run_dir` (only remote workers can fail this);
        None: the run folder is on a URL, only the workers' code version is checked."""

    @abstractmethod
    def abort(self) -> None:
        """Stop now (Ctrl-C, a failed task): no worker may go on writing after it returns."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers (the end of a run)."""

    def __enter__(self) -> BaseExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Executor(BaseExecutor):
    """The local executor: inline for one worker, else a forkserver process pool."""

    def __init__(self, workers: int = 1, progress: bool = False):
        self.workers = max(1, int(workers))
        self.progress = progress
        self._pool: ProcessPoolExecutor | None = None

    def _map(self, fn: Callable[[Any], Any], items: list[Any], bar: Progress) -> list[Any]:
        if self.workers == 1 or len(items) <= 1:
            out = []
            for item in items:
                out.append(fn(item))
                bar.update(1)
            return out
        pool = self._get_pool()
        futures = [pool.submit(fn, item) for item in items]
        results: list[Any] = []
        for fut in futures:  # in submission order: deterministic
            results.append(fut.result())
            bar.update(1)
        return results

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            sweep_semaphores()  # what a SIGKILLed run's pool left in /dev/shm
            own_semaphores()  # this pool's, named after our pid for the next sweep
            # forkserver: no fork() of a process that already runs pyarrow/numpy threads
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=forkserver_context(),
                initializer=_init_worker,
                initargs=(os.getpid(),),
            )
        return self._pool

    def check_shared(self, run_dir: Path | None) -> None:
        """Local workers share the driver's filesystem and code: nothing to check."""

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


# What every worker imports, imported once by the forkserver instead: each forked worker starts
# with the stages loaded (~0.6 CPU-s and ~70 MB of private memory less per worker)
PRELOAD = ["pipeline.stages"]
# The forkserver forks every worker, so it must stay single-threaded: pyarrow's jemalloc
# starts a background purge thread at import unless told not to, OpenBLAS a thread pool
# unless limited to one thread. These settings reach the forkserver and the workers through
# the environment (the driver's own threads are already running and do not fork).
SINGLE_THREADED_ENV = {
    "JE_ARROW_MALLOC_CONF": "background_thread:false",
    "OPENBLAS_NUM_THREADS": "1",
}


def forkserver_context() -> Any:
    """The forkserver context, with PRELOAD when the environment keeps the forkserver
    single-threaded (the defaults of SINGLE_THREADED_ENV are set here when unset; a user's own
    other values turn the preload off, and the workers import the stages themselves)."""
    ctx = mp.get_context("forkserver")
    for key, value in SINGLE_THREADED_ENV.items():
        os.environ.setdefault(key, value)
    if all(os.environ[k] == v for k, v in SINGLE_THREADED_ENV.items()):
        ctx.set_forkserver_preload(PRELOAD)  # no effect once the forkserver runs
    return ctx


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
    # pid_alive is True for a pid reused by another user's process: then the forkserver is
    # gone too (getppid changes) and the parent-death signal has already fired on Linux
    while pid_alive(parent_pid) and os.getppid() == ppid:
        time.sleep(WATCH_S)
    os._exit(1)
