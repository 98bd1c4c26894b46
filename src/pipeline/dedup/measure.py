"""How good a dedup run was, measured on seeded samples: precision of its near-duplicate merges,
recall against an exact all-pairs search, Wilson intervals, and P/R/F1 against labels.

Pure functions of arrays (shingle sets from dedup.minhash.shingle_sets, cluster labels, global
document indices): the dedup stage draws the samples, reads the texts and reports.
- A merged pair is (a document dropped as a near duplicate, the kept member of its cluster):
  the pair the user loses a document over. Precision: the share whose exact Jaccard on the same
  shingles reaches the threshold (chains of merges can join documents that are not).
- Recall: every pair of a seeded document sample whose exact Jaccard reaches the threshold
  (found exactly by `similar_pairs`, no pair missed), and the share the run put in one cluster.
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.permute import mix64

Z95 = 1.959964  # standard normal quantile for a 95% interval


def sample_keys(index: np.ndarray, seed: int, stream: int) -> np.ndarray:
    """uint64 key per global document index: the bottom-k keys are a uniform sample without
    replacement, the same whichever task sees which document. `stream` separates samples."""
    salt = mix64(np.array([(seed * 0x9E3779B97F4A7C15 + stream) % (1 << 64)], np.uint64))
    return mix64(np.asarray(index, np.int64).astype(np.uint64) ^ salt[0])


def bottom_k(keys: np.ndarray, k: int, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """(keys, *columns) of the k smallest keys (ties: first column), in key order."""
    order = np.lexsort((columns[0], keys)) if columns else np.argsort(keys, kind="stable")
    order = order[:k]
    return (keys[order], *(c[order] for c in columns))


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """Wilson score interval of a binomial share; (None, None) without trials."""
    if n == 0:
        return None, None
    p = successes / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|A & B| / |A | B| of two sorted unique uint64 arrays (0 for two empty sets)."""
    inter = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - inter
    return inter / union if union else 0.0


def similar_pairs(sets: list[np.ndarray], threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i < j) of `sets` with exact Jaccard >= threshold: (pairs int64 [E, 2],
    Jaccard float64 [E]), sorted by pair. The same answer as comparing all n(n-1)/2 pairs.

    Prefix filtering (Chaudhuri et al. 2006; Bayardo et al.'s All-Pairs): order the shingles by
    global frequency, rarest first; two sets with J >= t share a shingle among the first
    |A| - ceil(t|A|) + 1 of each, so only pairs meeting in those prefixes are compared, which
    keeps common shingles (boilerplate) from pairing everything with everything.
    """
    sizes = np.array([len(s) for s in sets], np.int64)
    n = len(sets)
    if n < 2 or not sizes.sum():
        return np.zeros((0, 2), np.int64), np.zeros(0)
    tokens = np.concatenate(sets)
    doc = np.repeat(np.arange(n, dtype=np.int64), sizes)
    uniq, inv, counts = np.unique(tokens, return_inverse=True, return_counts=True)
    num = len(uniq)
    rank_of = np.empty(num, np.int64)
    rank_of[np.argsort(counts, kind="stable")] = np.arange(num)  # rarest first, then by value
    entry_key = np.sort(doc * num + rank_of[inv.reshape(-1)])  # every (set, shingle) once
    doc, rank = entry_key // num, entry_key % num
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos = np.arange(len(doc)) - starts[doc]
    prefix = sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1
    keep = pos < prefix[doc]
    by = np.sort(rank[keep] * n + doc[keep])  # prefix entries by shingle rank, then set
    doc, rank = by % n, by // n
    # every pair inside a run of equal rank: entry e pairs with the entries after it in its run
    run_end = np.concatenate([np.flatnonzero(np.diff(rank)) + 1, [len(rank)]])
    after = run_end[np.searchsorted(run_end, np.arange(len(rank)), side="right")]
    after -= np.arange(len(rank)) + 1
    total = int(after.sum())
    if total == 0:
        return np.zeros((0, 2), np.int64), np.zeros(0)
    left = np.repeat(np.arange(len(rank)), after)
    right = left + 1 + np.arange(total) - np.repeat(np.cumsum(after) - after, after)
    cand = doc[left] * n + doc[right]  # doc ascending inside a run: left doc < right doc
    codes = np.unique(cand)
    left, right = codes // n, codes % n
    small, big = np.minimum(sizes[left], sizes[right]), np.maximum(sizes[left], sizes[right])
    fits = small >= threshold * big - 1e-9  # size filter: J <= |small| / |big|
    left, right = left[fits], right[fits]
    inter = _intersections(left, right, sizes, starts, entry_key, num)
    jac = inter / (sizes[left] + sizes[right] - inter)
    hit = jac >= threshold
    return np.stack([left[hit], right[hit]], axis=1), jac[hit]


def _intersections(
    left: np.ndarray,
    right: np.ndarray,
    sizes: np.ndarray,
    starts: np.ndarray,
    entry_key: np.ndarray,
    num_tokens: int,
    batch: int = 1 << 22,
) -> np.ndarray:
    """|A & B| for each pair: the smaller set's shingles looked up in the other's entries
    (binary search in the sorted `entry_key`), at most `batch` lookups per numpy call."""
    swap = sizes[left] > sizes[right]
    a, b = np.where(swap, right, left), np.where(swap, left, right)
    out = np.zeros(len(a), np.int64)
    cum = np.cumsum(sizes[a])
    lo = 0
    while lo < len(a):
        hi = max(int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + batch)), lo + 1)
        pa, pb = a[lo:hi], b[lo:hi]
        n = sizes[pa]
        pair = np.repeat(np.arange(hi - lo), n)
        within = np.arange(len(pair)) - np.repeat(np.cumsum(n) - n, n)
        ranks = entry_key[starts[pa][pair] + within] - pa[pair] * num_tokens
        query = pb[pair] * num_tokens + ranks
        at = np.minimum(np.searchsorted(entry_key, query), len(entry_key) - 1)
        out[lo:hi] = np.bincount(pair, weights=entry_key[at] == query, minlength=hi - lo)
        lo = hi
    return out


def share(successes: int, n: int) -> dict[str, float | int | None]:
    """{estimate, ci95_low, ci95_high, sample}: a share with its Wilson interval."""
    lo, hi = wilson(successes, n)
    return {
        "estimate": round(successes / n, 4) if n else None,
        "ci95_low": None if lo is None else round(lo, 4),
        "ci95_high": None if hi is None else round(hi, 4),
        "sample": n,
    }


def precision_of_merges(dropped: list[np.ndarray], kept: list[np.ndarray], threshold: float):
    """The precision share of merged pairs (dropped[i], kept[i]), with their Jaccard values."""
    jac = np.array([jaccard(a, b) for a, b in zip(dropped, kept, strict=True)], np.float64)
    return share(int((jac >= threshold).sum()), len(jac)), jac


def recall_of_pairs(
    sets: list[np.ndarray], clusters: np.ndarray, threshold: float
) -> dict[str, float | int | None]:
    """Recall: of the pairs of `sets` at Jaccard >= threshold, the share in one cluster
    (`clusters` int64 per set, -1 = in none)."""
    pairs, _ = similar_pairs(sets, threshold)
    a, b = clusters[pairs[:, 0]], clusters[pairs[:, 1]]
    found = int(((a == b) & (a >= 0)).sum())
    out = share(found, len(pairs))
    out["docs"] = len(sets)
    out["pairs_compared"] = len(sets) * (len(sets) - 1) // 2
    return out


def prf(tp: int, fp: int, fn: int) -> dict[str, float | int | None]:
    """Precision, recall and F1 of counts (None where a denominator is 0)."""
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f1 = 2 * p * r / (p + r) if p is not None and r is not None and p + r else None
    rnd = {k: (None if v is None else round(v, 4)) for k, v in (("p", p), ("r", r), ("f", f1))}
    return {"precision": rnd["p"], "recall": rnd["r"], "f1": rnd["f"], "tp": tp, "fp": fp, "fn": fn}


def is_dup_label(label: str | None) -> bool:
    """A label saying the document is a copy: `exact_dup`, `near_dup`, `duplicate` (toy's
    `junk:near_dup` too)."""
    if not label:
        return False
    tail = label.rsplit(":", 1)[-1]
    return tail in ("exact_dup", "near_dup", "duplicate", "dup")
