"""The executor: results in item order for any worker count; abort stops workers mid-task."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline import executor
from pipeline.executor import Executor


def _square_after(delay_s: float, x: int) -> int:
    time.sleep(delay_s * (5 - x % 5))  # later items finish first: order must still hold
    return x * x


def _slow_write(path: str) -> None:
    time.sleep(1.0)
    Path(path).write_text("written")


def test_results_in_item_order_for_any_worker_count():
    items = list(range(10))
    fn = functools.partial(_square_after, 0.01)
    with Executor(1) as one, Executor(3) as three:
        assert one.map(fn, items) == three.map(fn, items) == [x * x for x in items]


def test_abort_stops_workers_before_they_write(tmp_path):
    target = tmp_path / "late.txt"
    ex = Executor(2)
    future = ex._get_pool().submit(_slow_write, str(target))
    time.sleep(0.3)  # the task is running in a worker now
    ex.abort()
    time.sleep(1.5)  # longer than the task would have needed
    assert not target.exists()
    assert not future.done() or future.cancelled() or future.exception() is not None


_ORPHAN_SCRIPT = """
import functools, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from pipeline.executor import Executor

def park(folder, i):
    Path(folder, f"{os.getpid()}.pid").write_text("")
    time.sleep(120)

if __name__ == "__main__":
    with Executor(2) as ex:
        ex.map(functools.partial(park, sys.argv[1]), range(2))
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie awaiting its reaper is gone too
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_when_the_parent_is_killed(tmp_path):
    """SIGKILL of the run's process (the OOM killer) must not leave workers running."""
    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN_SCRIPT)
    src = str(Path(__file__).resolve().parents[1] / "src")
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path), src])
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2:
            assert parent.poll() is None and time.monotonic() < deadline, "workers never started"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
    pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
    deadline = time.monotonic() + 15
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [p for p in pids if not _gone(p)]
    for p in alive:  # do not leak them into the rest of the test session
        os.kill(p, signal.SIGKILL)
    assert not alive


def test_watchdog_exits_when_the_parent_is_gone(monkeypatch):
    """The portable fallback (no prctl): a worker polls for its run's process."""
    exits = []
    monkeypatch.setattr(executor, "WATCH_S", 0.01)
    monkeypatch.setattr(executor.os, "_exit", exits.append)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    thread = threading.Thread(target=executor._watch_parent, args=(proc.pid,), daemon=True)
    thread.start()
    time.sleep(0.1)
    assert thread.is_alive() and not exits  # parent alive: keep working
    proc.kill()
    proc.wait()
    thread.join(10)
    assert exits == [1]
