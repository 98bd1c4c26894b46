"""Exact global steps of the quality stage without global arrays, each against the plain
global-array rule it replaces (select.keep_mask / decile_rows, np.quantile, np.median,
numpy's one-call pareto draws), on random data with ties, NaN, unscorable rows, many and
empty parts, and a tiny gather cap so the histogram refinement takes several rounds."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from pipeline.quality import rank, select
from pipeline.stages.quality import partcols, parttasks
from pipeline.stages.quality.write import WriteSpec, part_keep


class _Inline:
    workers = 1

    def map(self, fn, items, desc=""):
        return [fn(x) for x in items]


def _split(n: int, rng: np.random.Generator, parts: int) -> list[int]:
    """Part sizes summing to n, some empty, some of one row."""
    cuts = np.sort(rng.integers(0, n + 1, parts - 1))
    return np.diff(np.concatenate([[0], cuts, [n]])).tolist()


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    """Scores with many ties (a few distinct levels), near-ties and exact values."""
    v = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], n)
    fine = rng.random(n) < 0.5
    v[fine] = rng.random(fine.sum())
    v[rng.random(n) < 0.1] = np.nextafter(0.5, 1.0)
    return v


def test_sort_key_orders_like_numpy():
    x = np.array([np.nan, -np.inf, -1.5, -0.0, 0.0, 1e-300, 0.5, np.inf, -1e-300, 2.0, np.nan])
    keys = rank.sort_key(x)
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(keys[order].astype(object)) >= 0)
    assert keys[3] == keys[4]  # -0.0 == 0.0
    desc = rank.sort_key(x, descending=True)
    want = np.lexsort((np.arange(len(x)), -x))
    assert np.array_equal(np.lexsort((np.arange(len(x)), desc)), want)
    for v in x[~np.isnan(x)]:
        assert rank.key_value(int(rank.sort_key(np.array([v]))[0])) == v
        assert rank.key_value(int(rank.sort_key(np.array([v]), True)[0]), True) == v


@pytest.mark.parametrize("gather", [1, 3, 1 << 16])
def test_select_equals_global_sort(gather):
    rng = np.random.default_rng(gather)
    for trial in range(6):
        n = int(rng.integers(1, 400))
        vals = _values(rng, n)
        vals[rng.random(n) < 0.05] = np.nan
        keys = rank.sort_key(vals)
        sizes = _split(n, rng, int(rng.integers(1, 12)))
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        chunks = [keys[bounds[i] : bounds[i + 1]] for i in range(len(sizes))]

        def run_round(requests, chunks=chunks):
            return [rank.answer_all(lambda g, c=c: c, requests) for c in chunks]

        ranks = sorted(set(rng.integers(0, n, 5).tolist()) | {0, n - 1})
        queries = [rank.Query("v", r) for r in ranks]
        got = rank.select(run_round, queries, {"v": n}, gather=gather)
        order = np.lexsort((np.arange(n), keys))
        for r, sel in zip(ranks, got, strict=True):
            row = order[r]
            assert sel.key == keys[row], (trial, r)
            part, nth = sel.locate(r)
            local = np.flatnonzero(chunks[part] == sel.key)[nth]
            assert bounds[part] + local == row


def _store(tmp_path, rng, n, parts, nan_ppl=True):
    """Random scan + lm columns in part files; returns (Plan, sizes, global columns)."""
    heur = _values(rng, n)
    scorable = rng.random(n) > 0.15
    ppl = np.exp(rng.choice([2.0, 3.0, 4.0], n) + (rng.random(n) < 0.5) * rng.random(n))
    if nan_ppl:
        ppl[rng.random(n) < 0.1] = np.nan
    script = rng.integers(0, 3, n).astype(np.int8)
    sizes = _split(n, rng, parts)
    lo = 0
    for i, m in enumerate(sizes):
        s = slice(lo, lo + m)
        partcols.save(
            tmp_path, i, "scan", heuristic=heur[s], scorable=scorable[s], unspaced=np.zeros(m, bool)
        )
        partcols.save(tmp_path, i, "lm", perplexity=ppl[s], script=script[s])
        lo += m
    plan = parttasks.Plan(tmp_path, "heuristic", False)
    return (
        plan,
        sizes,
        {"final": np.where(scorable, heur, 0.0), "ok": scorable, "ppl": ppl, "script": script},
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_keep_rules_and_deciles_equal_the_global_rules(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(rank, "GATHER", 2)  # several histogram rounds on small data
    monkeypatch.setattr(parttasks, "DRAW_CHUNK", 7)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 300))
    plan, sizes, g = _store(tmp_path, rng, n, int(rng.integers(1, 9)))
    final, ok = g["final"], g["ok"]
    n_ok, parts, ex = int(ok.sum()), len(sizes), _Inline()
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    spec = functools.partial(
        WriteSpec,
        plan,
        min_score=0.5,
        pareto_alpha=3.0,
        max_perplexity=None,
        lm=False,
        buckets=False,
        classifier=False,
    )
    for fraction in (0.3, 0.5, 1.0, 1e-9):
        want, want_thr = select.keep_mask("keep_fraction", final, ok, 0.5, fraction, 3.0, 0)
        args, thr = parttasks.keep_fraction_cut(ex, plan, parts, n_ok, fraction)
        got = np.concatenate(
            [
                part_keep(spec(rule="keep_fraction"), final[a:b], ok[a:b], args[i])
                for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
            ]
        )
        assert np.array_equal(got, want) and thr == want_thr, fraction
    want, _ = select.keep_mask("pareto", final, ok, 0.5, 0.5, 3.0, seed)
    states = parttasks.pareto_states(seed, sizes, 3.0)
    got = np.concatenate(
        [
            part_keep(spec(rule="pareto"), final[a:b], ok[a:b], states[i])
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
        ]
    )
    assert np.array_equal(got, want)
    picks = parttasks.decile_picks(ex, plan, parts, n_ok)
    got_rows = {}
    for i, part_picks in enumerate(picks):
        okrows = np.flatnonzero(ok[bounds[i] : bounds[i + 1]])
        keys = rank.sort_key(final[bounds[i] : bounds[i + 1]])[okrows]
        for d, key, nth in part_picks:
            got_rows[d] = bounds[i] + okrows[np.flatnonzero(keys == key)[nth]]
    assert sorted(got_rows.items()) == select.decile_rows(final, ok)


def test_pareto_states_reproduce_one_call():
    for sizes in ([0, 5, 1, 0, 30], [1], [DRAW := 3, DRAW, DRAW]):
        want = np.random.default_rng(9).pareto(2.0, size=sum(sizes))
        states = parttasks.pareto_states(9, sizes, 2.0)
        draws = [parttasks.pareto_draws(s, m, 2.0) for s, m in zip(states, sizes, strict=True)]
        got = np.concatenate(draws)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("seed", [3, 4])
def test_bucket_quantiles_and_median_equal_numpy(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(rank, "GATHER", 3)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 250))
    plan, sizes, g = _store(tmp_path, rng, n, int(rng.integers(1, 7)))
    ppl, script, ok = g["ppl"], g["script"], g["ok"]
    has = ~np.isnan(ppl)
    groups = {("ppl", s): int((has & (script == s)).sum()) for s in range(3)}
    got = parttasks.exact_quantiles(_Inline(), plan, len(sizes), groups, (0.3, 0.6))
    for (_, s), m in groups.items():
        if m:
            want = np.quantile(ppl[has & (script == s)], [0.3, 0.6])
            assert np.array_equal(got[("ppl", s)], want), s
        else:
            assert ("ppl", s) not in got
    m = int((has & ok).sum())
    med = parttasks.median(_Inline(), plan, len(sizes), ("ppl", None), m)
    assert med == (float(np.median(ppl[has & ok])) if m else None)


def test_quantile_arithmetic_is_numpys_for_every_small_size():
    rng = np.random.default_rng(5)
    q = np.array([0.3, 0.6])
    for n in list(range(1, 60)) + rng.integers(60, 5000, 300).tolist():
        x = np.sort(np.exp(rng.choice([2.0, 3.0], n) + rng.random(n)))
        prev, nxt, gamma = parttasks._quantile_indexes(n, q)
        got = parttasks.lerp(x[prev], x[nxt], gamma)
        assert np.array_equal(got, np.quantile(x, q)), n
