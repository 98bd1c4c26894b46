"""The global (reduce) step of dedup: exact duplicates, LSH candidates, verification, clusters.

Everything here works on compact per-document arrays gathered from all parts in input order
(global index = position in that order); text never reaches this module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.dedup.minhash import estimate_jaccard

KEEP, EXACT_DUP, NEAR_DUP = 0, 1, 2  # decision codes, uint8
_VERIFY_CHUNK = 1 << 13  # pairs per verification block: 8k x num_perm x 2 x 4 bytes (8 MiB)


def exact_first(keys: np.ndarray) -> np.ndarray:
    """For uint64 [N, 2] hash keys: int64 [N], the index of each key's first occurrence.

    Transient memory ~41 bytes per key: the sort order, one key column at a time, run ids.
    """
    n = len(keys)
    order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: equal keys stay in input order
    new = np.ones(n, bool)  # sorted row starts a new key
    for c in (0, 1):
        col = keys[order, c]
        new[1:] &= col[1:] == col[:-1]
        del col
    np.logical_not(new, out=new)
    new[0] = True
    run = np.cumsum(new) - 1  # run id of each sorted row
    heads = order[np.flatnonzero(new)]
    out = np.empty(n, np.int64)
    out[order] = heads[run]
    return out


def no_shingles(sig: np.ndarray, rows: int = 1 << 16) -> np.ndarray:
    """bool [N]: signature rows that are all 0xFFFFFFFF (no shingle), in row blocks (8 MiB)."""
    out = np.empty(len(sig), bool)
    for lo in range(0, len(sig), rows):
        out[lo : lo + rows] = (sig[lo : lo + rows] == np.uint32(0xFFFFFFFF)).all(axis=1)
    return out


def verify(sig: np.ndarray, pairs: np.ndarray, threshold: float) -> np.ndarray:
    """bool [E]: estimated Jaccard of each (global index) pair >= threshold."""
    ok = np.zeros(len(pairs), bool)
    for i in range(0, len(pairs), _VERIFY_CHUNK):
        p = pairs[i : i + _VERIFY_CHUNK]
        ok[i : i + len(p)] = estimate_jaccard(sig[p[:, 0]], sig[p[:, 1]]) >= threshold - 1e-12
    return ok


SIZE_BUCKETS = ((2, 2), (3, 3), (4, 4), (5, 8), (9, 16), (17, 64), (65, 1 << 62))


def size_counts(sizes: np.ndarray) -> np.ndarray:
    """int64 [len(SIZE_BUCKETS)]: clusters per size bucket (sizes >= 2); sums across tasks."""
    sz = np.asarray(sizes)
    return np.array([int(((sz >= lo) & (sz <= hi)).sum()) for lo, hi in SIZE_BUCKETS], np.int64)


def size_labels(counts: np.ndarray) -> dict[str, int]:
    """{"2": c, "3": c, "4": c, "5-8": c, ..., "65+": c}, non-zero buckets in size order."""
    hist: dict[str, int] = {}
    for (lo, hi), c in zip(SIZE_BUCKETS, np.asarray(counts).tolist(), strict=True):
        if c:
            hist[str(lo) if lo == hi else (f"{lo}-{hi}" if hi < 1 << 62 else f"{lo}+")] = c
    return hist


def top_clusters(ids: np.ndarray, sizes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The `k` largest clusters, ties to the lowest id: (ids, sizes) int64 [<= k] in that order.
    Merging each task's top k and taking the top k again gives the global top k."""
    order = np.lexsort((ids, -np.asarray(sizes, np.int64)))[:k]
    return np.asarray(ids, np.int64)[order], np.asarray(sizes, np.int64)[order]


def size_histogram(labels: np.ndarray) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Clusters of size >= 2: ({"2": c, "3": c, "4": c, "5-8": c, ...}, ids, sizes)."""
    sizes = np.bincount(labels, minlength=len(labels))
    ids = np.flatnonzero(sizes > 1)
    sz = sizes[ids]
    return size_labels(size_counts(sz)), ids, sz


def cluster_stats(
    hist: dict[str, int], ids: np.ndarray, sizes: np.ndarray, rows: list[dict]
) -> dict[str, Any]:
    """Cluster counts and sizes, and the example clusters from `rows` (one dict per shown
    document: index, cluster, id, reason, text), largest cluster first."""
    top_ids, top_sizes = top_clusters(ids, sizes, len(ids))
    return summary_stats(hist, len(ids), int(sizes.sum()), top_ids, top_sizes, rows)


def summary_stats(
    hist: dict[str, int],
    num_clusters: int,
    docs_in_clusters: int,
    top_ids: np.ndarray,
    top_sizes: np.ndarray,
    rows: list[dict],
) -> dict[str, Any]:
    """cluster_stats from totals and the largest clusters (`top_clusters` order, at least the
    clusters of `rows`): what the partitioned reduce has instead of all clusters."""
    stats: dict[str, Any] = {
        "clusters": num_clusters,
        "docs_in_clusters": docs_in_clusters,
        "cluster_size_histogram": hist,
        "largest_cluster_size": int(top_sizes[0]) if len(top_sizes) else 0,
        "largest_cluster_id": int(top_ids[0]) if len(top_ids) else -1,
    }
    groups: dict[int, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["reason"] != "kept", r["index"])):
        groups.setdefault(row["cluster"], []).append(row)
    size_of = dict(zip(top_ids.tolist(), top_sizes.tolist(), strict=True))
    stats["example_clusters"] = [
        {
            "cluster": c,
            "size": size_of[c],
            "docs": [{k: d[k] for k in ("id", "reason", "text")} for d in docs],
        }
        for c, docs in sorted(groups.items(), key=lambda kv: (-size_of[kv[0]], kv[0]))
    ]
    return stats
