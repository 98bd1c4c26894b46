"""dedup.lsh: S-curve arithmetic, optimal bands vs datasketch, band edges."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.dedup.lsh import band_edges, fp_fn_areas, optimal_bands, s_curve


def test_s_curve_values():
    """P = 1 - (1 - s^r)^b: s=0.8, b=9, r=13 -> 0.8^13 = 0.054976, 1 - 0.945024^9 = 0.39884."""
    assert s_curve(0.8, 9, 13) == pytest.approx(0.39884, abs=1e-5)
    assert s_curve(0.0, 5, 5) == 0.0 and s_curve(1.0, 5, 5) == 1.0


def test_fp_fn_areas_closed_form():
    """b = r = 1: P(s) = s, so FP = t^2 / 2 and FN = (1 - t)^2 / 2."""
    fp, fn = fp_fn_areas(0.6, 1, 1)
    assert fp == pytest.approx(0.18, abs=1e-6) and fn == pytest.approx(0.08, abs=1e-6)


@pytest.mark.parametrize(
    ("threshold", "num_perm", "expected"),
    [(0.9, 128, (5, 25)), (0.8, 128, (9, 13)), (0.5, 128, (25, 5)), (0.8, 256, (17, 15))],
)
def test_optimal_bands_match_datasketch(threshold, num_perm, expected):
    """Equal weights reproduce datasketch's _optimal_param (values from anchors-pipeline.md)."""
    assert optimal_bands(threshold, num_perm, 0.5) == expected


def test_fn_weight_moves_the_curve_left():
    b5, r5 = optimal_bands(0.8, 128, 0.5)
    b9, r9 = optimal_bands(0.8, 128, 0.9)
    assert b9 * r9 <= 128 and s_curve(0.8, b9, r9) > s_curve(0.8, b5, r5) + 0.3


def test_band_edges_star_per_bucket():
    """Buckets {0,2,5} and {1,4}: edges link each member to its bucket's lowest index."""
    keys = np.array([5, 3, 5, 7, 3, 5, 9], np.uint64)
    assert sorted(map(tuple, band_edges(keys).tolist())) == [(0, 2), (0, 5), (1, 4)]
