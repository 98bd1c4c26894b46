"""Task functions for tests/test_ray_executor.py, in a module Ray workers import by name (the
test fixture puts tests/ on the workers' PYTHONPATH)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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
