"""Oracles: slow, obviously correct implementations that tests (and benchmarks/bench_dedup.py,
bench_pack.py, which put tests/ on sys.path) compare the fast code in src/ against. Not part of
the package: nothing in src/ may import them.

- dedup: the in-memory dedup of one array set (band key groups, unique pairs, keeper choice,
  example members), union-find components, and the star rounds run in memory (star_components);
- packing: first fit and the textbook best-fit-decreasing loop.
"""

from __future__ import annotations

import numpy as np

from pipeline.dedup.cluster import EXACT_DUP, KEEP, NEAR_DUP
from pipeline.dedup.components import directed, group_min, large_star, small_star, starts
from pipeline.dedup.lsh import band_keys

# ---------------------------------------------------------------- dedup, in memory


def band_key_groups(
    sig: np.ndarray, cand: np.ndarray | None, bands: int, rows: int, mult: np.ndarray, group: int
):
    """Yield lists of `group` bands' keys (uint64 [n] each): the items of one executor.map."""
    for g in range(0, bands, group):
        yield [
            band_keys(sig, cand, range(b * rows, (b + 1) * rows), mult)
            for b in range(g, min(g + group, bands))
        ]


def unique_pairs(edge_lists: list[np.ndarray], num_nodes: int) -> np.ndarray:
    """Union of edge arrays as sorted unique (lo, hi) pairs, int64 [E, 2]."""
    if not edge_lists:
        return np.zeros((0, 2), np.int64)
    e = np.concatenate(edge_lists)
    lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    code = np.unique(lo * np.int64(num_nodes) + hi)
    return np.stack([code // num_nodes, code % num_nodes], axis=1)


def choose_keepers(labels: np.ndarray, exact: np.ndarray, score: np.ndarray | None) -> np.ndarray:
    """Decision uint8 [N] (KEEP / EXACT_DUP / NEAR_DUP) from component labels.

    In each component of size >= 2, the member with the highest `score` (None = first seen)
    among those that are not exact duplicates is kept; ties go to the lowest index.
    `labels` int64 [N] (smallest index of the component), `exact` bool [N].
    """
    n = len(labels)
    decision = np.where(exact, EXACT_DUP, KEEP).astype(np.uint8)
    sizes = np.bincount(labels, minlength=n)
    in_cluster = np.flatnonzero((sizes[labels] > 1) & ~exact)
    if in_cluster.size == 0:
        return decision
    lab = labels[in_cluster]
    key = np.zeros(in_cluster.size) if score is None else -score[in_cluster].astype(np.float64)
    order = np.lexsort((in_cluster, key, lab))  # by label, then best score, then first seen
    first = np.ones(order.size, bool)
    first[1:] = lab[order][1:] != lab[order][:-1]
    losers = in_cluster[order[~first]]
    decision[losers] = NEAR_DUP
    return decision


def example_members(
    labels: np.ndarray, decision: np.ndarray, ids: np.ndarray, sizes: np.ndarray, num: int, per: int
) -> np.ndarray:
    """bool [N]: members shown for the `num` largest clusters (the kept one + `per - 1` others)."""
    show = np.zeros(len(labels), bool)
    for c in ids[np.lexsort((ids, -sizes))][:num].tolist():
        members = np.flatnonzero(labels == c)
        kept = members[decision[members] == KEEP]
        show[np.concatenate([kept, members[decision[members] != KEEP][: per - 1]])] = 1
    return show


def star_components(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same rounds in memory over one range (tests, small graphs): (nodes int64 [m]
    sorted, labels int64 [m]) for the nodes of `pairs` int64 [2, E] (no self loops)."""
    edges, large, quiet = directed(pairs), True, 0
    while quiet < 2:  # a large and a small step in a row that changed nothing
        out, changed = (large_star if large else small_star)(edges[0], edges[1])
        edges, large = directed(out), not large
        quiet = quiet + 1 if changed == 0 else 0
    first = starts(edges[0])
    return edges[0][first], np.minimum(edges[0], group_min(edges[0], edges[1]))[first]


# ---------------------------------------------------------------- union-find


class UnionFind:
    """Disjoint sets over 0..n-1; `find` compresses paths, `union` hangs the smaller tree."""

    def __init__(self, n: int):
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, x: int) -> int:
        parent = self.parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression: point the whole path at the root
            parent[x], x = root, parent[x]
        return root

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self.size[ra] < self.size[rb] or (self.size[ra] == self.size[rb] and rb < ra):
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return ra


def components(num_nodes: int, edges: np.ndarray) -> np.ndarray:
    """Component label per node, int64 [num_nodes]: the smallest node index in its component.

    `edges` int64 [E, 2]. Nodes without edges are their own component.
    """
    labels = np.arange(num_nodes, dtype=np.int64)
    if len(edges) == 0:
        return labels
    nodes, local = np.unique(edges.ravel(), return_inverse=True)
    local = local.reshape(-1, 2)
    uf = UnionFind(len(nodes))
    for a, b in local.tolist():
        uf.union(a, b)
    roots = np.fromiter((uf.find(i) for i in range(len(nodes))), np.int64, len(nodes))
    smallest = np.full(len(nodes), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(smallest, roots, nodes)
    labels[nodes] = smallest[roots]
    return labels


# ---------------------------------------------------------------- packing


def first_fit_bins(sizes: list[int], capacity: int) -> int:
    """Reference first-fit in the given order, O(n * bins): for tests and benchmarks only."""
    room: list[int] = []
    for s in sizes:
        for i, r in enumerate(room):
            if r >= s:
                room[i] -= s
                break
        else:
            room.append(capacity - s)
    return len(room)


def best_fit_decreasing_reference(sizes: list[int], capacity: int) -> int:
    """Reference BFD, O(n * bins), the textbook loop: for tests and benchmarks only."""
    room: list[int] = []
    for s in sorted(sizes, reverse=True):
        best = -1
        for i, r in enumerate(room):
            if s <= r and (best < 0 or r < room[best]):
                best = i
        if best < 0:
            room.append(capacity - s)
        else:
            room[best] -= s
    return len(room)
