"""Task functions for tests/test_ray_executor.py and test_executor.py, in a module Ray workers
import by name (the test fixture puts tests/ on the workers' PYTHONPATH)."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

from pipeline.errors import DataError


def _die_once(marker_dir: str, x: int) -> int:
    """Kills its own worker process the first time it sees item 1 (a crashed node/worker)."""
    flag = Path(marker_dir) / f"died-{x}"
    if x == 1 and not flag.exists():
        flag.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def _flaky(marker_dir: str, exc: str, x: int) -> int:
    """Raises `exc` on its first attempt at each item; counts attempts in files."""
    flag = Path(marker_dir) / f"attempt-{x}"
    n = int(flag.read_text()) + 1 if flag.exists() else 1
    flag.write_text(str(n))
    if n == 1:
        raise OSError("shared filesystem hiccup") if exc == "os" else DataError("part", "bad row")
    return x


def square(x: int) -> int:
    return x * x


def _unkey(fn: Any, job: tuple[str, Any]) -> Any:
    return fn(job[1])


def _plus_1000(fn: Any, item: Any) -> Any:
    return fn(item) + 1000


class FakeLedger:
    """A resume record holding item 0's result (10): only the other items run."""

    def keys(self, desc: str, n: int) -> list[str]:
        return [f"{desc}-{i}" for i in range(n)]

    def recorded(self, keys: list[str]) -> tuple[list[Any], list[int]]:
        return [10] + [None] * (len(keys) - 1), list(range(1, len(keys)))

    def wrap(self, fn: Any) -> Any:
        return functools.partial(_unkey, fn)


class FakeSync:
    """A map sync whose tasks add 1000 to their result; counts the syncs after each map."""

    def __init__(self, token: str):
        self.token, self.after_calls = token, 0

    def wrap(self, fn: Any) -> Any:
        return functools.partial(_plus_1000, fn)

    def after(self) -> None:
        self.after_calls += 1


def check_bind(executor: Any, token: str = "t") -> FakeSync:
    """bind(ledger, sync) reaches every later map; bind(None) detaches both."""
    ledger, sync = FakeLedger(), FakeSync(token)
    executor.bind(ledger, sync)
    assert executor.map(square, [0, 1, 2, 3], desc="sq") == [10, 1001, 1004, 1009]
    assert sync.after_calls == 1
    executor.bind(None)
    assert executor.map(square, [0, 1, 2, 3]) == [0, 1, 4, 9]
    assert sync.after_calls == 1
    return sync
