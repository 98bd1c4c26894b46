"""pipeline.hashing against plain-Python definitions of the same formulas."""

from __future__ import annotations

import numpy as np

from pipeline.hashing import GOLDEN64, POLY_BASE, POLY_BASE_INV, poly_powers, span_hashes
from pipeline.permute import mix64

M64 = (1 << 64) - 1


def splitmix64_finaliser(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def test_mix64_is_the_splitmix64_finaliser_and_copies_unless_told():
    xs = np.array([0, 1, 2, 0x9E3779B97F4A7C15, M64], np.uint64)
    want = [splitmix64_finaliser(int(x)) for x in xs]
    assert mix64(xs).tolist() == want
    assert xs.tolist()[1] == 1  # untouched
    same = mix64(xs, inplace=True)
    assert same is xs and xs.tolist() == want
    assert int(GOLDEN64) % 2 == 1 and (int(POLY_BASE) * int(POLY_BASE_INV)) & M64 == 1


def test_span_hashes_are_the_polynomial_and_position_free():
    cp = np.array([ord(c) for c in "abc xabc ab"], np.uint32)
    starts, ends = np.array([0, 5, 9, 0]), np.array([3, 8, 11, 0])
    h = span_hashes(cp, starts, ends)
    poly = [
        sum(int(cp[j]) * pow(int(POLY_BASE), j - s, 1 << 64) for j in range(s, e)) & M64
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    assert h.tolist() == poly
    assert h[0] == h[1] != h[2] and h[3] == 0  # "abc" twice; "ab" differs; empty span is 0
    pw, inv = poly_powers(5000)
    assert len(pw) > 5000 and int(pw[4999]) * int(inv[4999]) & M64 == 1
