"""Connected components of the verified near-duplicate pairs, partitioned: alternating
large-star and small-star rounds (Kiveris et al., "Connected Components in MapReduce and
Beyond", 2014), in memory; the partitioned rounds
(executor tasks over edge files) are in pipeline.stages.dedup.components.

Every round's edges are written in both orientations, sorted by source, so the task of a node
range reads exactly the neighbourhoods of its nodes (a range of every previous file). Large-star
links each node's larger neighbours to the smallest node of its closed neighbourhood;
small-star links each node and its smaller neighbours to the smallest of them. When a round of
both changes nothing, every component is a star around its smallest node: a node's label is
the smallest of itself and its neighbours. No process holds more than one range's edges.
"""

from __future__ import annotations

import numpy as np


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


def starts(src: np.ndarray) -> np.ndarray:
    """bool [E]: the edge starts its source's group (edges sorted by source)."""
    return np.concatenate([[True], src[1:] != src[:-1]]) if len(src) else np.zeros(0, bool)


def group_min(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """For edges sorted by source: per edge, the smallest target of its source's group."""
    if len(src) == 0:
        return dst
    new = starts(src)
    return np.minimum.reduceat(dst, np.flatnonzero(new))[np.cumsum(new) - 1]


def large_star(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges (both orientations, sorted by source) of some nodes -> undirected pairs [2, E']
    (m(u), v) for every neighbour v > u, m(u) the smallest of u and its neighbours; and how
    many of them differ from the input edge (u, v)."""
    m = np.minimum(src, group_min(src, dst))
    up = dst > src
    return np.stack([m[up], dst[up]]), int((m[up] != src[up]).sum())


def small_star(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, int]:
    """Edges (both orientations, sorted by source) -> undirected pairs: for every node u with
    smaller neighbours N, m = min N: (m, v) for v in N and (m, u); and how many differ from
    the input edge (v, u) (all but the one to m)."""
    down = dst < src
    s, d = src[down], dst[down]
    m = group_min(s, d)
    heads = starts(s)
    others = d != m
    pairs = np.concatenate(
        [np.stack([m[others], d[others]]), np.stack([m[heads], s[heads]])], axis=1
    )
    return pairs, int(others.sum())
