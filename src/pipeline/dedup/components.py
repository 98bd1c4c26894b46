"""Connected components of the verified near-duplicate pairs, partitioned: alternating
large-star and small-star rounds (Kiveris et al., "Connected Components in MapReduce and
Beyond", 2014), each a map over node ranges that reads and writes edge files.

Every round's edges are written in both orientations, sorted by source, so the task of a node
range reads exactly the neighbourhoods of its nodes (a range of every previous file). Large-star
links each node's larger neighbours to the smallest node of its closed neighbourhood;
small-star links each node and its smaller neighbours to the smallest of them. When a round of
both changes nothing, every component is a star around its smallest node: a node's label is
the smallest of itself and its neighbours. No process holds more than one range's edges.
"""

from __future__ import annotations

import numpy as np

from pipeline.dedup import files


def directed(pairs: np.ndarray) -> np.ndarray:
    """Undirected pairs int64 [2, E] -> both orientations, unique, sorted by (source, target)."""
    return unique_edges(np.concatenate([pairs, pairs[::-1]], axis=1))


def unique_edges(edges: np.ndarray) -> np.ndarray:
    """Distinct columns of int64 [2, E], sorted by (row 0, row 1)."""
    edges = edges.astype(np.int64)
    if edges.shape[1] == 0:
        return edges
    edges = edges[:, np.lexsort((edges[1], edges[0]))]
    new = np.ones(edges.shape[1], bool)
    new[1:] = (edges[0, 1:] != edges[0, :-1]) | (edges[1, 1:] != edges[1, :-1])
    return edges[:, new]


def _starts(src: np.ndarray) -> np.ndarray:
    """bool [E]: the edge starts its source's group (edges sorted by source)."""
    return np.concatenate([[True], src[1:] != src[:-1]]) if len(src) else np.zeros(0, bool)


def _group_min(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """For edges sorted by source: per edge, the smallest target of its source's group."""
    if len(src) == 0:
        return dst
    new = _starts(src)
    return np.minimum.reduceat(dst, np.flatnonzero(new))[np.cumsum(new) - 1]


def large_star(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges (both orientations, sorted by source) of some nodes -> undirected pairs [2, E']
    (m(u), v) for every neighbour v > u, m(u) the smallest of u and its neighbours; and how
    many of them differ from the input edge (u, v)."""
    m = np.minimum(src, _group_min(src, dst))
    up = dst > src
    return np.stack([m[up], dst[up]]), int((m[up] != src[up]).sum())


def small_star(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges (both orientations, sorted by source) -> undirected pairs: for every node u with
    smaller neighbours N, m = min N: (m, v) for v in N and (m, u); and how many differ from
    the input edge (v, u) (all but the one to m)."""
    down = dst < src
    s, d = src[down], dst[down]
    m = _group_min(s, d)
    heads = _starts(s)
    others = d != m
    pairs = np.concatenate(
        [np.stack([m[others], d[others]]), np.stack([m[heads], s[heads]])], axis=1
    )
    return pairs, int(others.sum())


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
    first = _starts(edges[0])
    node = edges[0][first]
    label = np.minimum(edges[0], _group_min(edges[0], edges[1]))[first]
    files.save(work_dir, "cc", index, np.stack([node, label]))
    order = np.lexsort((node, label))
    files.save(work_dir, "bylabel", index, np.stack([label[order], node[order]]))
    return len(node)


def star_components(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same rounds in memory over one range (tests, small graphs): (nodes int64 [m]
    sorted, labels int64 [m]) for the nodes of `pairs` int64 [2, E] (no self loops)."""
    edges, large, quiet = directed(pairs), True, 0
    while quiet < 2:  # a large and a small step in a row that changed nothing
        out, changed = (large_star if large else small_star)(edges[0], edges[1])
        edges, large = directed(out), not large
        quiet = quiet + 1 if changed == 0 else 0
    first = _starts(edges[0])
    return edges[0][first], np.minimum(edges[0], _group_min(edges[0], edges[1]))[first]
