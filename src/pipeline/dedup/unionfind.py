"""Union-find (disjoint sets) with path compression and union by size, and a components helper.

Only nodes that appear in an edge enter the structure, so memory follows the number of edges, not
the number of documents. Component ids do not depend on the order of the edges. The in-memory
reference (tests, benchmarks/bench_dedup.py); the stage finds components in tasks
(pipeline.dedup.components).
"""

from __future__ import annotations

import numpy as np


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
