"""How many rows each output shard of `pipeline shuffle` takes from each input shard: a pure
plan (numpy in, numpy out); the command that moves the rows is pipeline.rebalance."""

from __future__ import annotations

import numpy as np


def apportion(source_sizes: np.ndarray, out_sizes: list[int]) -> np.ndarray:
    """[num_out, num_sources] rows each output shard takes from each source.

    Cumulative takes track the proportional target E_j * n_s / N: each shard takes the floor of
    the new target, then the rest by largest deficit (ties: lowest source). Every row is taken
    exactly once; each entry is within about one row of proportional.
    """
    n_s = np.asarray(source_sizes, np.int64)
    total = int(n_s.sum())
    taken = np.zeros(len(n_s), np.int64)
    out = np.zeros((len(out_sizes), len(n_s)), np.int64)
    end = 0
    for j, m in enumerate(out_sizes):
        end += m
        target = end * n_s / total
        x = np.clip(np.floor(target).astype(np.int64) - taken, 0, n_s - taken)
        while (diff := m - int(x.sum())) != 0:
            deficit = target - taken - x
            if diff > 0:
                ok = np.flatnonzero(taken + x < n_s)
                pick = ok[np.argsort(-deficit[ok], kind="stable")[:diff]]
                x[pick] += 1
            else:
                ok = np.flatnonzero(x > 0)
                pick = ok[np.argsort(deficit[ok], kind="stable")[:-diff]]
                x[pick] -= 1
        out[j] = x
        taken += x
    return out
