"""dedup.lsh: S-curve arithmetic, optimal bands vs datasketch, band edges."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.dedup.lsh import (
    band_bucket_rows,
    band_edges,
    band_keys,
    band_mult,
    fp_fn_areas,
    optimal_bands,
    s_curve,
    sig_name,
)
from pipeline.io import save_npy
from pipeline.stages.dedup import files
from pipeline.stages.dedup.tasks import band_bucket_task, candidate_signatures


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


@pytest.mark.parametrize("bits", [0, 2])
def test_band_tasks_over_key_buckets_match_global_banding(tmp_path, bits):
    """Each part writes its band keys grouped by (band, key bucket); each group's task drops the
    parts' exact copies (`dup`) and writes star pairs. The union of a band's groups is the
    pairs of global banding over the eligible documents (no shingle and copies left out):
    (lo, hi), unique, sorted, plus the sorted distinct `hi`."""
    rng = np.random.default_rng(5)
    sig = rng.integers(0, 4, size=(300, 12), dtype=np.uint32)  # tiny alphabet: many buckets
    empty, dup = rng.random(300) < 0.1, rng.random(300) < 0.1
    dup[100:220] = False  # part 2 has no copies and no `dup` file
    sizes = [100, 0, 120, 80]  # an empty part too
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    mult = band_mult(7, 3)
    for i in range(len(sizes)):
        lo, hi = offsets[i], offsets[i + 1]
        keys, bounds = band_bucket_rows(sig[lo:hi], ~empty[lo:hi], int(lo), 4, 3, mult, bits)
        files.save(tmp_path, "bkeys", i, keys)
        files.save(tmp_path, "bkeybounds", i, bounds)
        if i != 2:
            files.save(tmp_path, "dup", i, dup[lo:hi])
    cand = np.flatnonzero(~empty & ~dup)
    for band in range(4):
        keys = band_keys(sig, cand, range(band * 3, band * 3 + 3), mult)
        want = sorted({(min(a, b), max(a, b)) for a, b in cand[band_edges(keys)].tolist()})
        got, his = set(), set()
        for g in range(band << bits, (band + 1) << bits):
            count = band_bucket_task(g, str(tmp_path), offsets)
            pairs = files.load(tmp_path, "band", g)
            assert count == pairs.shape[1]
            assert list(map(tuple, pairs.T.tolist())) == sorted(set(map(tuple, pairs.T.tolist())))
            got |= set(map(tuple, pairs.T.tolist()))
            his |= set(files.load(tmp_path, "bandhi", g)[0].tolist())
        assert len(want) > 0 and sorted(got) == want and his == {b for _, b in want}


def test_candidate_signatures_read_back_from_part_files(tmp_path):
    rng = np.random.default_rng(6)
    sig = rng.integers(0, 2**32, size=(300, 12), dtype=np.uint32)
    offsets = np.array([0, 100, 100, 220, 300])
    for i in range(4):
        save_npy(tmp_path / sig_name(i), np.ascontiguousarray(sig[offsets[i] : offsets[i + 1]].T))
    docs = np.array([0, 5, 101, 250, 299])
    assert np.array_equal(candidate_signatures(tmp_path, offsets, docs), sig[docs])
