"""The union-find oracle (tests/oracles.py): components against a reference, union by size
with path compression."""

from __future__ import annotations

import numpy as np

from oracles import UnionFind, components, star_components


def _reference_components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    adj: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    label = [-1] * n
    for s in range(n):
        if label[s] < 0:
            stack, comp = [s], []
            label[s] = s
            while stack:
                x = stack.pop()
                comp.append(x)
                for y in adj[x]:
                    if label[y] < 0:
                        label[y] = s
                        stack.append(y)
    return label


def test_components_match_reference_and_ignore_edge_order():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(1, 60))
        edges = rng.integers(0, n, size=(int(rng.integers(0, 50)), 2))
        want = _reference_components(n, [tuple(e) for e in edges.tolist()])
        assert components(n, edges).tolist() == want
        shuffled = edges[rng.permutation(len(edges))][:, ::-1]
        assert components(n, np.ascontiguousarray(shuffled)).tolist() == want


def test_union_find_by_size_and_compression():
    uf = UnionFind(6)
    uf.union(0, 1)
    uf.union(2, 3)
    uf.union(3, 4)  # {2,3,4} is larger: it absorbs {0,1}
    root = uf.union(1, 4)
    assert root == uf.find(2) and uf.size[root] == 5
    uf.find(0)
    assert uf.parent[0] == root  # path compressed
    assert uf.find(5) == 5 and uf.size[5] == 1


def test_star_rounds_give_the_same_components():
    """Large-star / small-star rounds until both change nothing: the nodes of the edges with
    the labels union-find gives them, the smallest of their component (chains, stars, random
    sparse graphs with large ids)."""
    rng = np.random.default_rng(2)
    cases = [np.stack([np.arange(0, 99), np.arange(1, 100)])[:, ::-1]]  # chain 99 -> 0
    cases.append(np.array([[5, 5, 5, 9], [9, 7, 6, 8]]))
    for _ in range(40):
        k = int(rng.integers(1, 120))
        ids = np.sort(rng.choice(10**9, size=int(rng.integers(2, 90)), replace=False))
        pairs = ids[rng.integers(0, len(ids), size=(2, k))]
        cases.append(pairs[:, pairs[0] != pairs[1]])
    for pairs in cases:
        if pairs.shape[1] == 0:
            continue
        nodes = np.unique(pairs)
        local = np.searchsorted(nodes, pairs)
        want = nodes[components(len(nodes), np.ascontiguousarray(local.T))]
        got = star_components(np.ascontiguousarray(pairs))
        assert got[0].tolist() == nodes.tolist() and got[1].tolist() == want.tolist()
