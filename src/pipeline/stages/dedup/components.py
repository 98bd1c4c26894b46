"""Executor tasks of dedup's partitioned connected components: each round of
pipeline.dedup.components' large-star/small-star is a map over node ranges that reads and writes
edge files (work files in the stage's sketch folder, named by pipeline.stages.dedup.files).
"""

from __future__ import annotations

import numpy as np

from pipeline.dedup.components import (
    directed,
    group_min,
    large_star,
    small_star,
    starts,
    unique_edges,
)
from pipeline.stages.dedup import files


def read_range(work_dir: str, kind: str, count: int, lo: int, hi: int) -> np.ndarray:
    """Edges int64 [2, E] with source in [lo, hi) from files kind-0 .. kind-(count-1), unique."""
    got = [files.range_rows(files.load(work_dir, kind, j), lo, hi) for j in range(count)]
    return unique_edges(np.concatenate([np.zeros((2, 0), np.int64), *got], axis=1))


def scatter_task(index: int, work_dir: str) -> int:
    """Round 0: part `index`'s verified pairs (`near-i`) in both orientations (`cc0-i`)."""
    files.save(work_dir, "cc0", index, directed(np.array(files.load(work_dir, "near", index))))
    return 0


def star_task(item: tuple[int, int, int], work_dir: str, step: int, count: int, large: bool) -> int:
    """One range of nodes [lo, hi) of round `step`: read its edges from the `count` files of
    round step - 1, write the star step's pairs in both orientations (`cc<step>-q`); returns
    the number of edges that changed."""
    q, lo, hi = item
    edges = read_range(work_dir, f"cc{step - 1}", count, lo, hi)
    pairs, changed = (large_star if large else small_star)(edges[0], edges[1])
    files.save(work_dir, f"cc{step}", q, directed(pairs))
    return changed


def label_task(item: tuple[int, int, int], work_dir: str, step: int, count: int) -> int:
    """Part `index` (nodes [lo, hi)) after the last round: `cc-i` int64 [2, m] (node, label =
    the smallest of it and its neighbours) by node, `bylabel-i` the same by (label, node)."""
    index, lo, hi = item
    edges = read_range(work_dir, f"cc{step}", count, lo, hi)
    first = starts(edges[0])
    node = edges[0][first]
    label = np.minimum(edges[0], group_min(edges[0], edges[1]))[first]
    files.save(work_dir, "cc", index, np.stack([node, label]))
    order = np.lexsort((node, label))
    files.save(work_dir, "bylabel", index, np.stack([label[order], node[order]]))
    return len(node)
