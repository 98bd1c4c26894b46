"""dedup.bloom: the false-positive rate on 100k keys, repeats inside one batch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.dedup.bloom import BloomFilter, bloom_size


def test_bloom_false_positive_rate_on_100k_keys():
    """m = -n ln p / ln(2)^2 = 958,506 bits and k = 7 for n = 100k, p = 1%; the measured rate on
    100k fresh keys stays within 1.5x the target, and inserted keys are always found."""
    n, p = 100_000, 0.01
    bits, k = bloom_size(n, p)
    assert bits == math.ceil(-n * math.log(p) / math.log(2) ** 2) and k == 7
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2**64, size=(2 * n, 2), dtype=np.uint64)
    bloom = BloomFilter(bits, k)
    bloom.add(keys[:n])
    assert bloom.contains(keys[:n]).all()
    fp = bloom.contains(keys[n:]).mean()
    assert fp <= 1.5 * p
    assert bloom.fp_estimate() == pytest.approx(fp, rel=0.3)
    assert bloom.fp_expected() == pytest.approx(p, rel=0.1)


def test_bloom_add_new_marks_repeats_in_a_batch():
    bloom = BloomFilter(*bloom_size(100, 1e-6))
    keys = np.array([[1, 1], [2, 2], [1, 1]], np.uint64)
    assert bloom.add_new(keys).tolist() == [False, False, True]
    assert bloom.add_new(keys[:1]).tolist() == [True]
