"""Keyed permutations and the one splitmix64: the finaliser (`mix64`), the seeded step
(`splitmix64` = finaliser of x + golden ratio), the (seed, epoch, tag) key streams and a keyed
Feistel bijection of [0, n) with cycle walking. Used by the loader's orders, the shard stage's
train order and quality's hashed reference sample; numpy only.

All arithmetic is on uint64 numpy arrays and wraps mod 2^64 by design.
"""

from __future__ import annotations

import numpy as np

from pipeline.hashing import GOLDEN64

FEISTEL_ROUNDS = 8
_TAGS = {
    "global": 1,
    "feistel": 2,
    "shard_block": 3,
    "shard_window": 4,
    "read": 5,
    "buffer": 6,
    "repack": 7,  # loader.repack: the documents and sequences of an epoch
}
_M64 = (1 << 64) - 1


def mix64(x: np.ndarray, inplace: bool = False) -> np.ndarray:
    """splitmix64 finaliser of a uint64 array: every input bit spreads over the whole word."""
    if not inplace:
        x = x.copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's step: the finaliser of x + golden ratio, a seeded, well-spread uint64 per
    row (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        return mix64(x + GOLDEN64, inplace=True)


# ---------------------------------------------------------------- key streams


def _words(*values: int) -> list[int]:
    """Fixed-width (2 x 32-bit words per value) entropy: no two tuples share an encoding."""
    out = []
    for v in values:
        v &= _M64  # a negative seed is its 64-bit two's complement
        out += [v & 0xFFFFFFFF, v >> 32]
    return out


def key_stream(seed: int, epoch: int, tag: str, *extra: int) -> np.random.SeedSequence:
    """The seed sequence of (seed, epoch, what it is for, ...)."""
    return np.random.SeedSequence([*_words(seed, epoch, *extra), _TAGS[tag]])


# ---------------------------------------------------------------- Feistel bijection


class FeistelPermutation:
    """A keyed bijection of [0, n): an unbalanced Feistel network on the smallest power of two
    >= n (halves of ceil(b/2) and floor(b/2) bits), with cycle walking back into [0, n).
    Domain <= 2n, so the expected walk is < 2 applications per position. O(1) memory."""

    def __init__(self, n: int, seed: int, epoch: int = 0, rounds: int = FEISTEL_ROUNDS):
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n = int(n)
        self.bits = max(int(self.n - 1).bit_length(), 1)
        self.keys = key_stream(seed, epoch, "feistel").generate_state(rounds, np.uint64)

    def _apply(self, x: np.ndarray) -> np.ndarray:
        wl = (self.bits + 1) // 2  # width of the left half; the right half has the rest
        wr = self.bits - wl
        left, right = x >> np.uint64(wr), x & np.uint64((1 << wr) - 1)
        for k in self.keys:
            if wl:  # top wl bits: the best mixed ones (a shift by 64 is undefined)
                f = mix64(right ^ k) >> np.uint64(64 - wl)
            else:
                f = np.zeros_like(right)
            left, right = right, left ^ f
            wl, wr = wr, wl  # widths swap with the halves
        return (left << np.uint64(wr)) | right

    def __call__(self, pos: np.ndarray) -> np.ndarray:
        x = self._apply(np.asarray(pos, np.uint64))
        out = x >= np.uint64(self.n)
        while out.any():  # cycle walking: a bijection of the domain restricted to [0, n)
            x[out] = self._apply(x[out])
            out[out] = x[out] >= np.uint64(self.n)
        return x.astype(np.int64)
