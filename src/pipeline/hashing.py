"""The hash helpers every core shares: the golden-ratio multiplier and polynomial
hashes of code-point spans (prefix sums over powers of an odd base, mod 2^64). The splitmix64
finaliser `mix64` is in pipeline.permute.

All arithmetic is on uint64 numpy arrays and wraps mod 2^64 by design. Nothing here is seeded:
callers that need seeded hashes add their own seeded keys (dedup.minhash, quality.features).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

GOLDEN64 = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio, odd: Fibonacci hashing
POLY_BASE = np.uint64(0x100000001B3)  # FNV-1 64-bit prime; odd, so invertible mod 2^64
POLY_BASE_INV = np.uint64(pow(0x100000001B3, -1, 1 << 64))

_POWERS: list[np.ndarray] = []  # [B^i, B^-i] for i < len, grown geometrically, shared


def poly_powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(B^i, B^-i) mod 2^64 as uint64 arrays holding at least i = 0..n; cached and shared, so
    read-only for callers."""
    if not _POWERS or len(_POWERS[0]) <= n:
        size = max(n + 1, 2 * len(_POWERS[0]) if _POWERS else 0, 4096)
        powers = np.full(size, POLY_BASE, np.uint64)
        powers[0] = 1
        inverse = np.full(size, POLY_BASE_INV, np.uint64)
        inverse[0] = 1
        _POWERS[:] = [np.cumprod(powers), np.cumprod(inverse)]
    return _POWERS[0], _POWERS[1]


def span_hashes(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """uint64 [k]: Σ cp[j] * B^(j - starts[i]) over j in [starts[i], ends[i]) for each span of
    the code points `cp`: the same span content hashes the same wherever it sits."""
    n = len(cp)
    pw, inv = poly_powers(n)
    if cp.dtype.kind != "u":  # signed values wrap mod 2^64 (uint x uint64 stays integer)
        cp = cp.astype(np.uint64)
    prefix = np.empty(n + 1, np.uint64)
    prefix[0] = 0
    np.multiply(cp, pw[:n], out=prefix[1:])  # no uint64 copy of cp: ~20% faster
    np.cumsum(prefix[1:], out=prefix[1:])
    out = prefix[ends]
    out -= prefix[starts]
    out *= inv[starts]
    return out


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_bytes):
            h.update(block)
    return h.hexdigest()
