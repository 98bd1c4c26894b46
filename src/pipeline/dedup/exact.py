"""Exact duplicates: a 128-bit key per document (xxh3-128 of its whitespace-normalised text),
then either a hash set (sort; every copy points at its first occurrence) or a Bloom filter
(constant memory; copies are marked, their first occurrence stays unknown).
"""

from __future__ import annotations

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
    bits, k = bloom_size(expected_docs or max(1, n), fp_rate)
    bf = BloomFilter(bits, k)
    dup = np.zeros(n, bool)
    for lo, hi in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        dup[lo:hi] = bf.add_new(keys[lo:hi])
    stats = {
        "exact_hash": KEY_DESCRIPTION,
        "bloom_bits": bits,
        "bloom_bytes": bf.words.nbytes,
        "bloom_hashes": k,
        "bloom_fp_target": fp_rate,
        "bloom_fp_expected": float(f"{bf.fp_expected():.3g}"),
        "bloom_fp_estimate": float(f"{bf.fp_estimate():.3g}"),
    }
    return ExactDuplicates(dup, np.zeros((0, 2), np.int64), stats, bf.words.nbytes)
