"""The pseudo-label classifier's bounded pieces: exact pseudo labels without a global sort, a
sample bounded in characters, and mini-batch Adam over feature files read one at a time."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from pipeline.quality import pseudo, sgd
from pipeline.quality.features import Csr, vstack
from pipeline.quality.logreg import model_bytes
from pipeline.quality.select import NoSpread

CUTS = ([], [1, 2, 500], [0, 0, 300, 301, 999])  # part boundaries, empty parts included


def _parts(h: np.ndarray, elig: np.ndarray, sizes: np.ndarray, cuts: list[int]):
    bounds = [0, *cuts, len(h)]

    def gen():
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            yield h[lo:hi], elig[lo:hi], sizes[lo:hi]

    return gen


def _sorted_sets(h, elig, fraction, bad_below, good_above):
    """The global-sort definition: bottom / top k by (score, row), filtered by the bounds."""
    idx = np.flatnonzero(elig)
    k = int(fraction * len(idx))
    order = idx[np.lexsort((idx, h[idx]))]
    bad, good = order[:k], order[::-1][:k]
    return set(bad[h[bad] < bad_below].tolist()), set(good[h[good] >= good_above].tolist())


def _data(n: int = 1000, seed: int = 0):
    rng = np.random.default_rng(seed)
    h = np.round(rng.random(n), 2)  # ~100 distinct values: every cut-off falls inside a tie
    return h, rng.random(n) < 0.9, rng.integers(1, 8, n)


def test_kth_keys_match_a_sort():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(size=500), [0.0, -0.0, 1e-300, -1e300, 3.5, 3.5]])
    elig = rng.random(len(x)) < 0.8
    keys = np.sort(pseudo.order_keys(x[elig]))
    ranks = [0, 7, len(keys) // 2, len(keys) - 1]
    got = pseudo.kth_keys(_parts(x, elig, np.ones(len(x), np.int64), [100, 101, 400]), ranks)
    for r, (key, below) in zip(ranks, got, strict=True):
        assert key == int(keys[r]) and below == int((keys < keys[r]).sum())
    distinct = np.array([-1e300, -3.5, -1e-300, -0.0, 0.0, 1e-300, 0.5, 3.5, np.inf])
    k = pseudo.order_keys(distinct)
    assert (k[1:] > k[:-1]).all()  # the floats' order


def test_pseudo_labels_exact_and_the_same_for_any_parts():
    h, elig, sizes = _data()
    want_bad, want_good = _sorted_sets(h, elig, 0.2, 0.5, 0.5)
    got = [
        pseudo.pseudo_labels(_parts(h, elig, sizes, c), 0.2, 0.5, 0.5, 5, 10**6, 0.2, 3)
        for c in CUTS
    ]
    for pl in got:
        assert set(pl.rows[pl.y == 0].tolist()) == want_bad
        assert set(pl.rows[pl.y == 1].tolist()) == want_good
        assert np.array_equal(pl.rows, got[0].rows) and np.array_equal(pl.holdout, got[0].holdout)
        assert pl.holdout.sum() == int(0.2 * len(pl.rows))
        assert pl.bad_max == max(h[list(want_bad)]) and pl.good_min == min(h[list(want_good)])


def test_pseudo_sample_bounded_in_characters_and_count():
    h, elig, sizes = _data()
    want_bad, want_good = _sorted_sets(h, elig, 0.2, 0.5, 0.5)
    runs = [
        pseudo.pseudo_labels(
            _parts(h, elig, sizes, c), 0.2, 0.5, 0.5, 5, 10**6, 0.2, 3, class_chars=100
        )
        for c in CUTS
    ]
    for pl in runs:
        assert np.array_equal(pl.rows, runs[0].rows)  # a seeded sample, whatever the parts
        for cls, want in ((0, want_bad), (1, want_good)):
            rows = pl.rows[pl.y == cls]
            assert set(rows.tolist()) < want
            assert 100 - 7 < sizes[rows].sum() <= 100  # filled up to the budget, never over
    capped = pseudo.pseudo_labels(_parts(h, elig, sizes, []), 0.2, 0.5, 0.5, 5, 20, 0.2, 3)
    assert (capped.y == 0).sum() == 10 == (capped.y == 1).sum()  # max_docs // 2 per class
    other = pseudo.pseudo_labels(_parts(h, elig, sizes, []), 0.2, 0.5, 0.5, 5, 20, 0.2, 4)
    assert not np.array_equal(capped.rows, other.rows)  # the seed draws the sample
    one = pseudo.pseudo_labels(
        _parts(h, elig, sizes, []), 0.2, 0.5, 0.5, 1, 10**6, 0.0, 3, class_chars=0
    )
    assert len(one.rows) == 2  # at least one row per class, even over the budget


def test_pseudo_labels_no_spread():
    flat = np.full(100, 0.7)
    with pytest.raises(NoSpread, match="pseudo-bad"):
        pseudo.pseudo_labels(
            _parts(flat, np.ones(100, bool), np.ones(100), []), 0.2, 0.5, 0.5, 5, 1000, 0.2, 0
        )
    near = np.where(np.arange(100) < 50, 0.4999, 0.5)
    with pytest.raises(NoSpread, match="no spread"):
        pseudo.pseudo_labels(
            _parts(near, np.ones(100, bool), np.ones(100), []), 0.2, 0.5, 0.5, 5, 1000, 0.2, 0
        )


# ---------------------------------------------------------------- mini-batch Adam over files


def _separable(n: int, seed: int) -> tuple[Csr, np.ndarray, np.ndarray]:
    """Good rows use buckets 0-49, bad rows 40-99 (10 shared); statistics are noise."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(np.int8)
    mats = []
    for label in y:
        lo = 0 if label else 40
        cols = np.sort(rng.choice(np.arange(lo, lo + 60 if not label else 50), 6, replace=False))
        data = np.full(6, 1 / np.sqrt(6), np.float32)
        mats.append(Csr(np.array([0, 6], np.int64), cols.astype(np.int32), data, 128))
    return vstack(mats, 128), rng.random((n, 3)).astype(np.float32), y


STORE: dict[str, bytes] = {}  # "files" by name: sgd streams whatever `load` returns


def _files(tag: str, X: Csr, stats: np.ndarray, y: np.ndarray, splits: int) -> list[dict]:
    holdout = np.arange(len(y)) % 5 == 0
    out = []
    for i, rows in enumerate(np.array_split(np.arange(len(y)), splits)):
        part = sgd.Rows(X.take(rows), stats[rows], y[rows], holdout[rows])
        STORE[f"{tag}{i}"] = sgd.encode_rows(part)
        out.append({"path": f"{tag}{i}", **sgd.summarise(part)})
    return out


def _load(name: str) -> sgd.Rows:
    return sgd.decode_rows(STORE[name])


def _accuracy(model, X, stats, y) -> float:
    return float(((model.predict(X, stats) >= 0.5) == (y == 1)).mean())


def test_streamed_training_matches_full_batch_on_a_separable_toy(tmp_path):
    X, stats, y = _separable(600, 0)
    Xt, st, yt = _separable(300, 1)  # fresh rows
    streamed = sgd.SgdParams(
        1e-3, epochs=10, min_steps=1, batch_size=32, learning_rate=0.05, seed=0
    )
    files = _files("many", X, stats, y, 6)
    model, losses = sgd.train_streamed(files, 128, 3, streamed, {}, _load)
    full = sgd.SgdParams(
        1e-3, epochs=200, min_steps=1, batch_size=10**6, learning_rate=0.05, seed=0
    )
    one = _files("one", X, stats, y, 1)
    ref, _ = sgd.train_streamed(
        one, 128, 3, full, {}, _load
    )  # one file, one batch: full-batch Adam
    assert losses[-1] < losses[0]
    assert _accuracy(model, Xt, st, yt) >= 0.98 and _accuracy(ref, Xt, st, yt) >= 0.98
    agree = (model.predict(Xt, st) >= 0.5) == (ref.predict(Xt, st) >= 0.5)
    assert agree.mean() >= 0.98
    p, held_y, loss = sgd.evaluate(files, model, 1e-3, _load)
    assert len(p) == 120 and ((p >= 0.5) == (held_y == 1)).mean() >= 0.98
    assert loss < 0.2 and loss == pytest.approx(sgd.evaluate(one, ref, 1e-3, _load)[2], abs=0.1)


def test_streamed_training_is_deterministic_and_reads_one_file_at_a_time(tmp_path):
    X, stats, y = _separable(400, 2)
    files = _files("det", X, stats, y, 5)
    params = sgd.SgdParams(1e-2, epochs=3, min_steps=1, batch_size=16, learning_rate=0.05, seed=7)
    live, peak, calls = [0], [0], []

    def load(path: str) -> sgd.Rows:
        gc.collect()
        rows = _load(path)
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        weakref.finalize(rows, lambda: live.__setitem__(0, live[0] - 1))
        calls.append(path)
        return rows

    a, _ = sgd.train_streamed(files, 128, 3, params, {"k": 1}, load)
    sgd.evaluate(files, a, 1e-2, load)
    assert peak[0] == 1  # the driver never held two files' rows
    # each file once to find the buckets in use, once per epoch, then once for the holdout
    assert len(calls) == 5 + 3 * 5 + 5
    b, _ = sgd.train_streamed(files, 128, 3, params, {"k": 1}, _load)
    assert model_bytes(a) == model_bytes(b)
    c, _ = sgd.train_streamed(
        files, 128, 3, sgd.SgdParams(1e-2, 3, 1, 16, 0.05, 8), {"k": 1}, _load
    )
    assert model_bytes(a) != model_bytes(c)  # the seed orders files and batches
