"""Exact duplicates: a 128-bit key per document (xxh3-128 of its whitespace-normalised text),
then either a hash set (sort; every copy points at its first occurrence) or a Bloom filter
(constant memory; copies are marked, their first occurrence stays unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from pipeline.dedup.bloom import BloomFilter, bloom_size
from pipeline.dedup.cluster import exact_first

KEY_DESCRIPTION = "xxh3_128 of whitespace-normalised text"


def exact_keys(texts: list[str]) -> np.ndarray:
    """xxh3-128 of each text with whitespace runs collapsed and ends stripped: uint64 [n, 2]."""
    blob = b"".join(
        xxhash.xxh3_128_digest(" ".join(t.split()).encode("utf-8", "surrogatepass")) for t in texts
    )
    return np.frombuffer(blob, np.uint64).reshape(-1, 2).copy()


@dataclass
class ExactDuplicates:
    dup: np.ndarray  # bool [n]: a later copy of an earlier document
    edges: np.ndarray  # int64 [E, 2]: copy -> first occurrence (none with a Bloom filter)
    stats: dict[str, Any] = field(default_factory=dict)  # for the report
    extra_bytes: int = 0  # memory held beside the keys while deciding


def hash_set(keys: np.ndarray) -> ExactDuplicates:
    """Sort-based: exact, and every copy knows its first occurrence."""
    n = len(keys)
    first = exact_first(keys)
    dup = first != np.arange(n)
    edges = np.stack([np.flatnonzero(dup), first[dup]], axis=1)
    # sort temporaries: order 8 + sorted keys 16 + flags 1 + first 8 + result 8 bytes/doc
    return ExactDuplicates(dup, edges, {"exact_hash": KEY_DESCRIPTION}, 41 * n)


def bloom(
    keys: np.ndarray, offsets: np.ndarray, fp_rate: float, expected_docs: int | None
) -> ExactDuplicates:
    """A Bloom filter fed in part order (the first occurrence is kept); may call a document a
    copy by mistake, at about `fp_rate`."""
    n = len(keys)
    bf = BloomFilter(*bloom_size(expected_docs or max(1, n), fp_rate))
    dup = np.zeros(n, bool)
    for lo, hi in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        dup[lo:hi] = bf.add_new(keys[lo:hi])
    return ExactDuplicates(
        dup, np.zeros((0, 2), np.int64), bloom_stats(bf, fp_rate), bf.words.nbytes
    )


def bloom_stats(bf: BloomFilter, fp_rate: float) -> dict[str, Any]:
    """The report's view of a filled Bloom filter."""
    return {
        "exact_hash": KEY_DESCRIPTION,
        "bloom_bits": bf.num_bits,
        "bloom_bytes": bf.words.nbytes,
        "bloom_hashes": bf.num_hashes,
        "bloom_fp_target": fp_rate,
        "bloom_fp_expected": float(f"{bf.fp_expected():.3g}"),
        "bloom_fp_estimate": float(f"{bf.fp_estimate():.3g}"),
    }


# ---------------------------------------------------------------- partitioned by key (tasks)
# hash_set without a driver array: each part's task writes its (key, global index) rows
# grouped by bucket (the key's top bits), one task per bucket finds the copies in it. Same
# result as hash_set(): equal keys share a bucket, and within one the rows are in global order.


def bucket_bits(num_docs: int, bucket_docs: int) -> int:
    """log2 of the bucket count: buckets of ~`bucket_docs` keys (at most 2^16 buckets)."""
    return min(16, max(0, math.ceil(math.log2(max(1, math.ceil(num_docs / bucket_docs))))))


def bucket_rows(keys: np.ndarray, first_index: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """One part's keys uint64 [n, 2] -> (rows uint64 [3, n]: key halves and global index,
    grouped by bucket, input order within one; int64 [2^bits + 1] bucket offsets)."""
    n = len(keys)
    bucket = keys[:, 0] >> np.uint64(64 - bits) if bits else np.zeros(n, np.uint64)
    order = np.argsort(bucket, kind="stable")
    rows = np.empty((3, n), np.uint64)
    rows[0], rows[1] = keys[order, 0], keys[order, 1]
    rows[2] = order.astype(np.uint64) + np.uint64(first_index)
    bounds = np.searchsorted(bucket[order], np.arange((1 << bits) + 1, dtype=np.uint64))
    return rows, bounds.astype(np.int64)


def bucket_copies(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For one bucket's rows uint64 [3, m] in global order: (copies int64 [2, E]: copy index
    and its first occurrence, by copy index; firsts int64 [2, F]: each first occurrence that
    has copies and its number of copies, by index)."""
    order = np.lexsort((rows[1], rows[0]))  # stable: equal keys stay in global order
    k0, k1, idx = rows[0][order], rows[1][order], rows[2][order].astype(np.int64)
    new = np.ones(len(idx), bool)
    new[1:] = (k0[1:] != k0[:-1]) | (k1[1:] != k1[:-1])
    run = np.cumsum(new) - 1
    head = idx[new][run]
    dup = ~new
    copies = np.stack([idx[dup], head[dup]])
    copies = copies[:, np.argsort(copies[0], kind="stable")]
    count = np.bincount(run) - 1
    has = count > 0
    firsts = np.stack([idx[new][has], count[has]])
    return copies, firsts[:, np.argsort(firsts[0], kind="stable")]
