"""How well an order is shuffled, streamed over output shards (shard stage, `pipeline shuffle`).

Not to be confused with document quality (pipeline.quality): these only measure an order.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ShuffleStats:
    """Streaming shuffle statistics over output shards added in order.

    spearman: rank correlation of output vs original position (0 = no trace of the input order).
    same_source_ratio: rate of consecutive samples from the same source shard / Σ(n_s/N)²
    (1.0 = as often as a uniform shuffle). max_share_deviation_samples: over output shards and
    sources, max |taken - shard_len * n_s / N|.
    """

    def __init__(self, source_sizes: np.ndarray):
        self.n_s = np.asarray(source_sizes, np.int64)
        self.total = int(self.n_s.sum())
        self.sq = 0.0
        self.same = 0
        self.last = -1
        self.pos = 0
        self.start = 0  # pos at the first add (a run of shards starting mid-order)
        self.first = -1  # source of the first row added
        self.max_dev = 0.0

    def seek(self, pos: int) -> None:
        """Start counting output positions at `pos` (statistics of a later run of shards)."""
        self.pos = self.start = pos

    def add(self, src: np.ndarray, orig: np.ndarray) -> None:
        """src: source index per output row of the next shard; orig: its original position."""
        n = len(src)
        if not n:
            return
        if self.first < 0 and self.pos == self.start:
            self.first = int(src[0])
        d = np.arange(self.pos, self.pos + n, dtype=np.float64) - orig
        self.sq += float(np.dot(d, d))
        self.same += int((src[1:] == src[:-1]).sum()) + int(src[0] == self.last)
        self.last = int(src[-1])
        counts = np.bincount(src, minlength=len(self.n_s))
        expected = n * self.n_s / max(self.total, 1)
        self.max_dev = max(self.max_dev, float(np.abs(counts - expected).max()))
        self.pos += n

    def state(self) -> dict[str, Any]:
        """What `merge` needs of statistics built over one contiguous run of output shards
        (e.g. in a task); JSON-able."""
        return {
            "sq": self.sq,
            "same": self.same,
            "first": self.first,
            "last": self.last,
            "max_dev": self.max_dev,
            "n": self.pos - self.start,
        }

    def merge(self, state: dict[str, Any]) -> None:
        """Append the statistics of the next run of shards (their `state()`), in order: the
        same totals as if they had been `add`ed here."""
        if not state["n"]:
            return
        self.sq += state["sq"]
        self.same += state["same"] + int(state["first"] == self.last)
        self.last = state["last"]
        self.max_dev = max(self.max_dev, state["max_dev"])
        self.pos += state["n"]

    def result(self) -> dict[str, float]:
        n = self.total
        ideal = float(((self.n_s / n) ** 2).sum()) if n else 0.0
        rate = self.same / (n - 1) if n > 1 else 0.0
        rho = 1.0 - 6.0 * self.sq / (n * (n * n - 1.0)) if n > 1 else 0.0
        return {
            "spearman": round(rho, 6),
            "same_source_rate": round(rate, 6),
            "same_source_ideal": round(ideal, 6),
            "same_source_ratio": round(rate / ideal, 4) if ideal else 0.0,
            "max_share_deviation_samples": round(self.max_dev, 3),
        }
