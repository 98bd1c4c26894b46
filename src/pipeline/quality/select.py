"""Global decisions of the quality stage, as pure functions of score arrays and a seed:
the keep mask, the histogram and the decile examples (pseudo labels: quality/pseudo.py).

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
