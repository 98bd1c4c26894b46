"""A Bloom filter over 128-bit keys, sized from the expected count and a false-positive target.

m = -n ln p / (ln 2)^2 bits and k = round((m / n) ln 2) probes; probes use double hashing
h1 + i*h2 of the key's two 64-bit halves (Kirsch & Mitzenmacher), vectorised over a batch.
"""

from __future__ import annotations

import math

import numpy as np


def bloom_size(expected: int, fp_rate: float) -> tuple[int, int]:
    """(num_bits m, num_hashes k) for `expected` keys at false-positive rate `fp_rate`."""
    n = max(1, int(expected))
    m = max(64, math.ceil(-n * math.log(fp_rate) / math.log(2) ** 2))
    k = max(1, round(m / n * math.log(2)))
    return m, k


class BloomFilter:
    """Bit array of `num_bits` (uint64 words) probed `num_hashes` times per key."""

    def __init__(self, num_bits: int, num_hashes: int):
        self.num_bits, self.num_hashes = int(num_bits), int(num_hashes)
        self.words = np.zeros((self.num_bits + 63) // 64, np.uint64)
        self.num_inserted = 0

    def _probes(self, keys: np.ndarray) -> np.ndarray:
        """Bit positions int64 [n, k] for keys uint64 [n, 2]."""
        h1, h2 = keys[:, 0:1], keys[:, 1:2] | np.uint64(1)  # odd step: visits distinct bits
        i = np.arange(self.num_hashes, dtype=np.uint64)[None, :]
        return ((h1 + i * h2) % np.uint64(self.num_bits)).astype(np.int64)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """bool [n]: True where every probed bit is set (maybe seen), False = certainly new."""
        pos = self._probes(keys)
        bits = (self.words[pos >> 6] >> (pos & 63).astype(np.uint64)) & np.uint64(1)
        return bits.all(axis=1)

    def add(self, keys: np.ndarray) -> None:
        pos = self._probes(keys).ravel()
        np.bitwise_or.at(self.words, pos >> 6, np.uint64(1) << (pos & 63).astype(np.uint64))
        self.num_inserted += len(keys)

    def add_new(self, keys: np.ndarray) -> np.ndarray:
        """Check then insert a batch in order; bool [n], True where a key was (maybe) seen before.

        A key repeated inside the batch counts as seen from its second occurrence on.
        """
        _, first = np.unique(keys, axis=0, return_index=True)
        seen = np.ones(len(keys), bool)
        seen[first] = self.contains(keys[first])
        self.add(keys[first[~seen[first]]])
        return seen

    def fill_ratio(self) -> float:
        return float(np.unpackbits(self.words.view(np.uint8)).sum()) / self.num_bits

    def fp_estimate(self) -> float:
        """False-positive probability now: (share of bits set)^k."""
        return self.fill_ratio() ** self.num_hashes

    def fp_expected(self) -> float:
        """Textbook estimate (1 - e^(-k n / m))^k for the keys inserted so far."""
        k, n, m = self.num_hashes, self.num_inserted, self.num_bits
        return (1.0 - math.exp(-k * n / m)) ** k
