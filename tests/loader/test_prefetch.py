"""BatchPrefetcher: order, errors, early stop and stall accounting (CPU); CUDA copies (GPU only)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from pipeline.loader.prefetch import BatchPrefetcher


def batches(n: int):
    for i in range(n):
        yield {
            "input_ids": np.full((2, 4), i, np.uint16),
            "segment_ids": np.ones((2, 4), np.uint16),
        }


def test_cpu_path_keeps_order_and_counts():
    pf = BatchPrefetcher(batches(7), "cpu", depth=3)
    got = [int(b["input_ids"][0, 0]) for b in pf]
    assert got == list(range(7))
    s = pf.stats()
    assert s["batches"] == 7 and 0.0 <= s["stall_s"] <= s["loop_s"]
    assert 0.0 <= s["stall_fraction"] <= 1.0


def test_stall_is_the_time_the_consumer_waited():
    """The loader holds batch 1 until a timer releases it 0.3 s later: the consumer waits at
    least that long, so stall_s >= 0.3 (a lower bound that load on the machine cannot break)."""
    gate = threading.Event()

    def gated():
        yield {"x": np.zeros(1)}
        gate.wait()
        yield {"x": np.ones(1)}

    pf = BatchPrefetcher(gated(), "cpu")
    it = iter(pf)
    next(it)
    threading.Timer(0.3, gate.set).start()
    next(it)
    assert list(it) == []
    s = pf.stats()
    assert s["stall_s"] >= 0.29 and s["stall_fraction"] > 0.5 and s["batches"] == 2


def test_a_slow_consumer_does_not_stall():
    """Data is ready long before each step ends: the stall is a small part of the loop."""
    pf = BatchPrefetcher(batches(4), "cpu", depth=4)
    for _ in pf:
        time.sleep(0.1)  # the "training step"
    s = pf.stats()
    assert s["loop_s"] >= 0.4 and s["stall_s"] < s["loop_s"] / 2


def test_loader_errors_reach_the_consumer():
    def broken():
        yield {"x": np.zeros(1)}
        raise RuntimeError("shard 3 is gone")

    pf = BatchPrefetcher(broken(), "cpu")
    with pytest.raises(RuntimeError, match="shard 3 is gone"):
        list(pf)


def test_early_stop_ends_the_thread():
    pf = BatchPrefetcher(batches(1000), "cpu", depth=2)
    for i, _ in enumerate(pf):
        if i == 2:
            break
    assert not pf._thread.is_alive() and pf.stats()["batches"] == 3


def test_bad_depth():
    with pytest.raises(ValueError, match="depth must be >= 1"):
        BatchPrefetcher([], "cpu", depth=0)


def test_cuda_path():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    pf = BatchPrefetcher(batches(5), "cuda", depth=2)
    seen = []
    for b in pf:
        assert b["input_ids"].is_cuda and b["input_ids"].dtype == torch.int32
        seen.append(int(b["input_ids"][0, 0].item()))  # compute stream waited for the copy
    assert seen == list(range(5)) and pf.stats()["batches"] == 5
