"""dedup.measure: exact all-pairs search, Wilson intervals, seeded samples, P/R/F1."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipeline.dedup import measure


def _sets(seed: int) -> list[np.ndarray]:
    """Random sets and edited copies of half of them (Jaccard spread over 0.5..1)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(120):
        base = np.unique(rng.integers(0, 2000, rng.integers(3, 60)).astype(np.uint64))
        out.append(base)
        if rng.random() < 0.5:
            edit = base.copy()
            k = int(rng.integers(0, len(edit) // 4 + 2))
            edit[:k] = rng.integers(5000, 9000, k).astype(np.uint64)
            out.append(np.unique(edit))
    out.append(np.zeros(0, np.uint64))  # a document without shingles pairs with nothing
    common = np.arange(10, dtype=np.uint64)  # a shingle every set shares: never a prefix
    return [np.union1d(s, common[:1]) if len(s) else s for s in out]


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9, 1.0])
def test_similar_pairs_is_the_brute_force_answer(threshold):
    sets = _sets(1)
    pairs, jac = measure.similar_pairs(sets, threshold)
    want = [
        (i, j, measure.jaccard(sets[i], sets[j]))
        for i, j in itertools.combinations(range(len(sets)), 2)
        if measure.jaccard(sets[i], sets[j]) >= threshold
    ]
    assert [tuple(p) for p in pairs.tolist()] == [(i, j) for i, j, _ in want]
    assert np.allclose(jac, [x for *_, x in want])
    assert len(want) > 10  # the case is not trivial


def test_wilson_interval_worked_values():
    # 8 of 10: p = 0.8, z = 1.96 -> centre (0.8 + 0.192) / 1.384 = 0.7167, half 0.2262
    lo, hi = measure.wilson(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = measure.wilson(200, 200)  # all successes: the upper end is 1, the lower < 1
    assert round(hi, 9) == 1.0 and 0.98 < lo < 0.99
    assert measure.wilson(0, 0) == (None, None)
    assert measure.share(3, 4) == {
        "estimate": 0.75,
        "ci95_low": 0.3006,
        "ci95_high": 0.9544,
        "sample": 4,
    }


def test_bottom_k_sample_does_not_depend_on_how_rows_are_split():
    idx = np.arange(10_000, dtype=np.int64)
    keys = measure.sample_keys(idx, seed=5, stream=1)
    whole = measure.bottom_k(keys, 50, idx)[1]
    pieces = [
        measure.bottom_k(keys[a : a + 700], 50, idx[a : a + 700]) for a in range(0, 10_000, 700)
    ]
    merged = measure.bottom_k(
        np.concatenate([p[0] for p in pieces]), 50, np.concatenate([p[1] for p in pieces])
    )[1]
    assert np.array_equal(whole, merged)
    other = measure.bottom_k(measure.sample_keys(idx, seed=6, stream=1), 50, idx)[1]
    assert len(np.intersect1d(whole, other)) < 10  # another seed draws another sample
    assert 4000 < whole.mean() < 6000  # uniform over the rows


def test_precision_recall_and_labelled_counts():
    a = np.arange(10, dtype=np.uint64)
    b = np.arange(1, 11, dtype=np.uint64)  # J(a, b) = 9/11 = 0.818
    c = np.arange(2, 12, dtype=np.uint64)  # J(a, c) = 8/12 = 0.667, J(b, c) = 9/11
    got, jac = measure.precision_of_merges([b, c], [a, a], 0.8)  # c merged into a by a chain
    assert got["estimate"] == 0.5 and got["sample"] == 2
    assert np.allclose(jac, [9 / 11, 8 / 12])
    # a~b found (same cluster), b~c (J 0.818) missed: the run split them
    rec = measure.recall_of_pairs([a, b, c], np.array([4, 4, -1]), 0.8)
    assert (rec["estimate"], rec["sample"], rec["docs"], rec["pairs_compared"]) == (0.5, 2, 3, 3)
    assert measure.prf(8, 2, 0) == {
        "precision": 0.8,
        "recall": 1.0,
        "f1": 0.8889,
        "tp": 8,
        "fp": 2,
        "fn": 0,
    }
    assert measure.prf(0, 0, 0)["f1"] is None
    assert [measure.is_dup_label(x) for x in ("junk:near_dup", "exact_dup", "good", None)] == [
        True,
        True,
        False,
        False,
    ]
