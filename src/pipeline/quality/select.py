"""Global decisions of the quality stage, as pure functions of score arrays and a seed:
pseudo labels for training, the keep mask, the histogram and the decile examples.

Row indices are global (parts concatenated in order), so results never depend on worker count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SPREAD = 1e-3  # pseudo-good and pseudo-bad heuristic scores must differ by more than this


class NoSpread(ValueError):
    """The heuristic scores cannot be split into distinct pseudo-good and pseudo-bad sets."""


@dataclass
class PseudoLabels:
    rows: np.ndarray  # int64 [m]: global row indices, ascending
    y: np.ndarray  # int8 [m]: 1 = pseudo-good (top share), 0 = pseudo-bad (bottom share)
    holdout: np.ndarray  # bool [m]: held out from training, used to measure agreement
    bad_max: float | None  # highest heuristic score labelled bad (None: no pseudo-bad row)
    good_min: float | None  # lowest heuristic score labelled good


def pseudo_labels(
    heuristic: np.ndarray,
    eligible: np.ndarray,
    fraction: float,
    bad_below: float,
    good_above: float,
    min_docs: int,
    max_docs: int,
    holdout_fraction: float,
    seed: int,
    extra: tuple[int, int] = (0, 0),
    sizes: np.ndarray | None = None,
    class_chars: int | None = None,
) -> PseudoLabels:
    """Top `fraction` of eligible rows by heuristic score -> 1 (if score >= good_above), bottom
    `fraction` -> 0 (if score < bad_below): on a mostly clean corpus the bottom 20% is not junk.

    Ties are broken by row index, so the split is exact. Each class is capped at max_docs // 2
    (a seeded subsample), then at `class_chars` characters (`sizes` [n]: a row's characters;
    a further seeded subsample, drawn only when the class holds more). `extra` = (bad, good)
    labelled documents from elsewhere (clean's rejects, a seed set) that count towards min_docs.
    NoSpread when a class has < min_docs rows or the two sets' scores are not separated by
    MIN_SPREAD (e.g. all documents score the same).
    """
    idx = np.flatnonzero(eligible)
    k = int(fraction * len(idx))
    order = idx[np.lexsort((idx, heuristic[idx]))]  # ascending score, then row
    bad, good = order[:k], order[::-1][:k]
    bad, good = bad[heuristic[bad] < bad_below], good[heuristic[good] >= good_above]
    if min(len(bad) + extra[0], len(good) + extra[1]) < min_docs:
        raise NoSpread(
            f"{len(idx)} scorable documents give {len(bad)} pseudo-bad (bottom "
            f"{fraction:.0%} and heuristic < {bad_below}) and {len(good)} pseudo-good "
            f"(top {fraction:.0%} and >= {good_above}), plus {extra[0]} bad and {extra[1]} good "
            f"labelled elsewhere; min_train_docs is {min_docs}"
        )
    bad_max = float(heuristic[bad].max()) if len(bad) else None
    good_min = float(heuristic[good].min()) if len(good) else None
    if bad_max is not None and good_min is not None and good_min - bad_max <= MIN_SPREAD:
        raise NoSpread(
            f"heuristic scores have no spread: the top {fraction:.0%} start at "
            f"{good_min:.4f}, the bottom {fraction:.0%} end at {bad_max:.4f}"
        )
    rng = np.random.default_rng(seed)
    cap = max(max_docs // 2, 1)
    if k > cap:
        bad = np.sort(rng.choice(bad, cap, replace=False))
        good = np.sort(rng.choice(good, cap, replace=False))
    if sizes is not None and class_chars is not None:
        bad = within_budget(bad, sizes, class_chars, rng)
        good = within_budget(good, sizes, class_chars, rng)
    rows = np.concatenate([bad, good])
    y = np.concatenate([np.zeros(len(bad), np.int8), np.ones(len(good), np.int8)])
    order = np.argsort(rows, kind="stable")
    rows, y = rows[order].astype(np.int64), y[order]
    holdout = np.zeros(len(rows), bool)
    holdout[rng.permutation(len(rows))[: int(holdout_fraction * len(rows))]] = True
    return PseudoLabels(rows, y, holdout, bad_max, good_min)


def within_budget(
    rows: np.ndarray, sizes: np.ndarray, budget: int, rng: np.random.Generator
) -> np.ndarray:
    """`rows` (ascending) if their sizes sum to <= budget, else a seeded random subset that
    does (at least one row), ascending: the training sample is bounded in bytes, not docs."""
    if int(sizes[rows].sum()) <= budget:
        return rows
    order = rows[rng.permutation(len(rows))]
    take = max(int(np.searchsorted(np.cumsum(sizes[order]), budget, side="right")), 1)
    return np.sort(order[:take])


def keep_mask(
    rule: str,
    scores: np.ndarray,
    scorable: np.ndarray,
    min_score: float,
    keep_fraction: float,
    pareto_alpha: float,
    seed: int,
) -> tuple[np.ndarray, float | None]:
    """bool [n] keep mask and the effective score threshold (None for pareto).

    min_score: keep score >= min_score. keep_fraction: keep the best round(fraction * scorable)
    rows (ties by row index). pareto (GPT-3): keep if pareto(alpha) > 1 - score, one seeded
    draw per row in global order. Rows that are not scorable are never kept.
    """
    if rule == "min_score":
        return (scores >= min_score) & scorable, min_score
    if rule == "keep_fraction":
        idx = np.flatnonzero(scorable)
        k = int(round(keep_fraction * len(idx)))
        keep = np.zeros(len(scores), bool)
        if k == 0:
            return keep, None
        best = idx[np.lexsort((idx, -scores[idx]))][:k]
        keep[best] = True
        return keep, float(scores[best].min())
    draws = np.random.default_rng(seed).pareto(pareto_alpha, size=len(scores))
    return (draws > 1.0 - scores) & scorable, None


def histogram(scores: np.ndarray, threshold: float | None, bins: int = 20) -> dict:
    counts, edges = np.histogram(scores, bins=bins, range=(0.0, 1.0))
    return {
        "edges": [round(float(e), 3) for e in edges],
        "counts": counts.tolist(),
        "threshold": threshold,
    }


def decile_rows(scores: np.ndarray, scorable: np.ndarray) -> list[tuple[int, int]]:
    """(decile 1..10, global row) for the median document of each score decile, lowest first."""
    idx = np.flatnonzero(scorable)
    if len(idx) == 0:
        return []
    order = idx[np.lexsort((idx, scores[idx]))]
    picks = []
    for d in range(10):
        pos = min(int((d + 0.5) / 10 * len(order)), len(order) - 1)
        picks.append((d + 1, int(order[pos])))
    return picks
