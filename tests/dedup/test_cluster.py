"""dedup.cluster: the first occurrence of each exact key."""

from __future__ import annotations

import numpy as np

from pipeline.dedup.cluster import exact_first


def test_exact_first_occurrence():
    keys = np.array([[1, 2], [3, 4], [1, 2], [1, 3], [3, 4]], np.uint64)
    assert exact_first(keys).tolist() == [0, 1, 0, 3, 1]
