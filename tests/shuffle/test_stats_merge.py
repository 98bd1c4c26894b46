"""ShuffleStats built over runs of shards in tasks and merged equal one built in order."""

from __future__ import annotations

import numpy as np

from pipeline.shuffle import ShuffleStats


def test_merged_runs_equal_sequential_adds():
    rng = np.random.default_rng(0)
    sizes = np.array([30, 50, 20])
    src = rng.integers(0, 3, 100)
    orig = rng.permutation(100)
    whole = ShuffleStats(sizes)
    for a in range(0, 100, 9):
        whole.add(src[a : a + 9], orig[a : a + 9])
    merged = ShuffleStats(sizes)
    for a in range(0, 100, 18):  # runs of two shards each, as tasks would build them
        part = ShuffleStats(sizes)
        part.seek(a)
        for b in range(a, min(a + 18, 100), 9):
            part.add(src[b : b + 9], orig[b : b + 9])
        merged.merge(part.state())
    assert merged.result() == whole.result()
    assert whole.result()["same_source_rate"] > 0
