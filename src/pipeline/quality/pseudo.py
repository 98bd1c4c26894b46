"""Pseudo labels for the quality classifier without a global sort of the heuristic scores.

The bottom and top `fraction` of eligible documents by heuristic (ties by row index: the bad
set takes the lowest rows of its tie, the good set the highest) are found exactly by radix
selection: 4 passes over the parts, each summing per-part 65,536-bin histograms of 16 more bits
of the scores' order-preserving uint64 keys. A last pass marks each part's members and keeps,
per class, a bounded sample: the rows with the smallest seeded hash priority whose characters
fit the class budget (a uniform random sample without replacement, the same whatever the parts
are). The driver holds the histograms, one part's arrays and the sample: nothing per document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64
from pipeline.quality.select import MIN_SPREAD, NoSpread, PseudoLabels

RADIX_BITS = 16
_BINS = 1 << RADIX_BITS
_SIGN = np.uint64(1 << 63)

# a part's (heuristic float64 [n], eligible bool [n], characters int64 [n]), in part order
Parts = Callable[[], Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]]


def order_keys(x: np.ndarray) -> np.ndarray:
    """uint64 keys in the order of the float64 values (-0.0 < 0.0; no NaN expected)."""
    bits = np.ascontiguousarray(x, np.float64).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def kth_keys(parts: Parts, ranks: list[int]) -> list[tuple[int, int]]:
    """For each 0-based ascending rank r among the eligible rows: (key of that row, number of
    eligible rows with a smaller key). Exact: 64 / RADIX_BITS passes over the parts."""
    prefix = [0] * len(ranks)
    left = list(ranks)  # rank still to find among the rows that share the prefix
    below = [0] * len(ranks)
    for done in range(0, 64, RADIX_BITS):
        shift = np.uint64(64 - done - RADIX_BITS)
        hists = np.zeros((len(ranks), _BINS), np.int64)
        for heur, eligible, _ in parts():
            keys = order_keys(heur[eligible])
            digit = (keys >> shift) & np.uint64(_BINS - 1)
            high = keys >> np.uint64(64 - done) if done else np.zeros_like(keys)
            for j, p in enumerate(prefix):
                hists[j] += np.bincount(
                    digit[high == np.uint64(p)].astype(np.int64), minlength=_BINS
                )
        for j in range(len(ranks)):
            cum = np.cumsum(hists[j])
            b = int(np.searchsorted(cum, left[j], side="right"))
            before = int(cum[b - 1]) if b else 0
            left[j] -= before
            below[j] += before
            prefix[j] = (prefix[j] << RADIX_BITS) | b
    return list(zip(prefix, below, strict=True))


def _priority(rows: np.ndarray, seed: int, salt: int) -> np.ndarray:
    key = rows.astype(np.uint64) ^ mix64(np.array([seed * 2 + salt], np.uint64))
    with np.errstate(over="ignore"):
        return mix64(key * GOLDEN64, inplace=True)


class _Sample:
    """The `cap` rows (at most) of smallest priority whose sizes fit `budget` (at least one)."""

    def __init__(self, budget: int | None, cap: int, seed: int, salt: int) -> None:
        self.budget, self.cap, self.seed, self.salt = budget, cap, seed, salt
        self.rows = np.zeros(0, np.int64)
        self.sizes = np.zeros(0, np.int64)
        self.prio = np.zeros(0, np.uint64)
        self.count, self.score_max, self.score_min = 0, -np.inf, np.inf

    def add(self, rows: np.ndarray, sizes: np.ndarray, scores: np.ndarray) -> None:
        if not len(rows):
            return
        self.count += len(rows)
        self.score_max = max(self.score_max, float(scores.max()))
        self.score_min = min(self.score_min, float(scores.min()))
        rows = np.concatenate([self.rows, rows])
        sizes = np.concatenate([self.sizes, sizes])
        prio = np.concatenate([self.prio, _priority(rows[len(self.rows) :], self.seed, self.salt)])
        order = np.lexsort((rows, prio))[: self.cap]
        if self.budget is not None:
            cum = np.cumsum(sizes[order])
            order = order[: max(int(np.searchsorted(cum, self.budget, side="right")), 1)]
        self.rows, self.sizes, self.prio = rows[order], sizes[order], prio[order]


def pseudo_labels(
    parts: Parts,
    fraction: float,
    bad_below: float,
    good_above: float,
    min_docs: int,
    max_docs: int,
    holdout_fraction: float,
    seed: int,
    extra: tuple[int, int] = (0, 0),
    class_chars: int | None = None,
) -> PseudoLabels:
    """Top `fraction` of eligible rows by heuristic -> 1 (if score >= good_above), bottom
    `fraction` -> 0 (if score < bad_below); global rows = parts concatenated in order. Each
    class is then a seeded sample of at most max_docs // 2 rows and `class_chars` characters.
    `extra` = (bad, good) labelled documents from elsewhere that count towards min_docs.
    NoSpread when a class has < min_docs rows or the classes' scores are within MIN_SPREAD."""
    n = sum(int(e.sum()) for _, e, _ in parts())
    k = int(fraction * n)
    cap = max(max_docs // 2, 1)
    bad = _Sample(class_chars, cap, seed, 0)
    good = _Sample(class_chars, cap, seed, 1)
    if k > 0:
        (kb, below_b), (kg, below_g) = kth_keys(parts, [k - 1, n - k])
        bad_ties, good_ties = k - below_b, n - k - below_g  # ties taken / skipped, row order
        offset, seen_b, seen_g = 0, 0, 0
        for heur, eligible, sizes in parts():
            idx = np.flatnonzero(eligible)
            keys = order_keys(heur[idx])
            tie_b, tie_g = keys == np.uint64(kb), keys == np.uint64(kg)
            pos_b = seen_b + np.cumsum(tie_b) - 1  # each tie's place among all ties, row order
            pos_g = seen_g + np.cumsum(tie_g) - 1
            seen_b, seen_g = seen_b + int(tie_b.sum()), seen_g + int(tie_g.sum())
            in_b = (keys < np.uint64(kb)) | (tie_b & (pos_b < bad_ties))
            in_g = (keys > np.uint64(kg)) | (tie_g & (pos_g >= good_ties))
            in_b &= heur[idx] < bad_below
            in_g &= heur[idx] >= good_above
            for sample, m in ((bad, in_b), (good, in_g)):
                sample.add(idx[m] + offset, sizes[idx[m]].astype(np.int64), heur[idx[m]])
            offset += len(heur)
    if min(bad.count + extra[0], good.count + extra[1]) < min_docs:
        raise NoSpread(
            f"{n} scorable documents give {bad.count} pseudo-bad (bottom "
            f"{fraction:.0%} and heuristic < {bad_below}) and {good.count} pseudo-good "
            f"(top {fraction:.0%} and >= {good_above}), plus {extra[0]} bad and {extra[1]} good "
            f"labelled elsewhere; min_train_docs is {min_docs}"
        )
    bad_max = bad.score_max if bad.count else None
    good_min = good.score_min if good.count else None
    if bad_max is not None and good_min is not None and good_min - bad_max <= MIN_SPREAD:
        raise NoSpread(
            f"heuristic scores have no spread: the top {fraction:.0%} start at "
            f"{good_min:.4f}, the bottom {fraction:.0%} end at {bad_max:.4f}"
        )
    rows = np.concatenate([bad.rows, good.rows])
    y = np.concatenate([np.zeros(len(bad.rows), np.int8), np.ones(len(good.rows), np.int8)])
    order = np.argsort(rows, kind="stable")
    rows, y = rows[order].astype(np.int64), y[order]
    holdout = np.zeros(len(rows), bool)
    rng = np.random.default_rng(seed)
    holdout[rng.permutation(len(rows))[: int(holdout_fraction * len(rows))]] = True
    return PseudoLabels(rows, y, holdout, bad_max, good_min)
