"""The executor: results in item order for any worker count; abort stops workers mid-task."""

from __future__ import annotations

import functools
import time
from pathlib import Path

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
