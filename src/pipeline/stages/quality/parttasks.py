"""The quality stage's per-part tasks after scoring, and the global decisions made exact
without global arrays.

Every per-document column stays in its part's temp files (`partcols`); tasks derive the
scores of their part from them (`part_scores`, elementwise: the same numbers as over the whole
corpus). The driver gets per-part counts and histograms, and finds global order statistics
(keep_fraction's cut, the decile examples, the perplexity median and bucket quantiles) by
`rank.select` over keys the tasks compute. pareto's draws: the driver walks the one seeded
generator over the parts in chunks and hands each part the generator state at its first row.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.quality import rank
from pipeline.stages.quality import partcols

DRAW_CHUNK = 1 << 20  # pareto draws made at a time while the driver walks the generator
AUC_MAX_DOCS = 1_000_000  # hidden-label AUCs: exact over the first parts up to this many docs
QUALITY_JUNK = ("junk:html", "junk:spam", "junk:repeated", "junk:symbols", "junk:short")
LABEL_GOOD, LABEL_JUNK = 1, 2  # label codes kept per part: good, a quality junk kind, 0 other


def label_codes(labels: list[str]) -> np.ndarray:
    lab = np.array(labels, dtype=object)
    codes = np.zeros(len(lab), np.int8)
    codes[np.isin(lab, QUALITY_JUNK)] = LABEL_JUNK
    codes[lab == "good"] = LABEL_GOOD
    return codes


@dataclass(frozen=True)
class Plan:
    """What every task needs to derive its part's scores (small, picklable)."""

    folder: Path  # partcols folder
    used: str  # the score that decides (final)
    lm_ran: bool  # the LM step ran: `combined` exists (coherence too when it had an LM)


def part_scores(cols: dict[str, np.ndarray], plan: Plan) -> dict[str, np.ndarray]:
    """heuristic, coherence, combined, classifier, mean (those that exist), in report order."""
    heur = cols["heuristic"]
    scores = {"heuristic": heur}
    if plan.lm_ran:
        # the heuristic means nothing for unspaced scripts: those get coherence alone
        heur_lm = np.where(cols["unspaced"], 1.0, heur)
        if "coherence" in cols:
            coh = np.where(np.isnan(cols["coherence"]), heur_lm, cols["coherence"])
            scores["coherence"] = coh
            scores["combined"] = np.minimum(heur_lm, coh)  # the weakest link
        else:
            scores["combined"] = heur_lm
    if "classifier" in cols:
        scores["classifier"] = cols["classifier"]
        scores["mean"] = (cols["classifier"] + heur) / 2.0
    if "external" in cols:  # quality.external's model (stages/quality/external.py)
        scores["external"] = cols["external"]
    return scores


def _final(cols: dict[str, np.ndarray], plan: Plan) -> tuple[np.ndarray, dict]:
    scores = part_scores(cols, plan)
    return np.where(cols["scorable"], scores[plan.used], 0.0), scores


def part_keys(cols: dict[str, np.ndarray], plan: Plan, group: tuple) -> np.ndarray:
    """The part's keys of a rank group, in row order: ("final", descending) over scorable
    rows, ("ppl", script) over rows with a perplexity (script None: scorable rows)."""
    ok = cols["scorable"]
    if group[0] == "final":
        final, _ = _final(cols, plan)
        return rank.sort_key(final[ok], descending=group[1])
    ppl = cols["perplexity"]
    m = ~np.isnan(ppl) & (ok if group[1] is None else cols["script"] == group[1])
    return rank.sort_key(ppl[m])


@dataclass(frozen=True, slots=True)
class RankJob:
    """Part `index` and one round's rank requests (pipeline.quality.rank) to answer."""

    index: int
    requests: dict


def rank_task(item: RankJob, plan: Plan) -> dict:
    part, requests = item.index, item.requests
    cols = partcols.load(plan.folder, part)
    return rank.answer_all(functools.partial(part_keys, cols, plan), requests)


def select(executor: Any, plan: Plan, parts: int, queries: list, sizes: dict) -> list:
    def run_round(requests: dict) -> list[dict]:
        fn = functools.partial(rank_task, plan=plan)
        return executor.map(fn, [RankJob(i, requests) for i in range(parts)], desc="quality rank")

    return rank.select(run_round, queries, sizes)


# ---------------------------------------------------------------- global decisions


def keep_fraction_cut(
    executor: Any, plan: Plan, parts: int, n_ok: int, fraction: float
) -> tuple[list[tuple[int, int] | None], float | None]:
    """Per part (threshold key, how many rows at the threshold it keeps), the threshold:
    the best round(fraction * scorable) rows, ties by global row (select.keep_mask's rule)."""
    k = int(round(fraction * n_ok))
    if k == 0:
        return [None] * parts, None
    sel = select(
        executor, plan, parts, [rank.Query(("final", True), k - 1)], {("final", True): n_ok}
    )[0]
    left = k - int(sel.below.sum())  # rows at the threshold value that are kept, first first
    take = np.clip(left - (np.cumsum(sel.equal) - sel.equal), 0, sel.equal)
    thr = math.nan if sel.key == int(rank._ALL) else rank.key_value(sel.key, descending=True)
    return [(sel.key, int(t)) for t in take], thr


def pareto_states(seed: int, sizes: list[int], alpha: float) -> list[dict]:
    """The generator state at each part's first row: the same draws as one call over all rows
    (one generator, global order), made `DRAW_CHUNK` at a time."""
    rng = np.random.default_rng(seed)
    states = []
    for n in sizes:
        states.append(rng.bit_generator.state)
        while n > 0:
            rng.pareto(alpha, size=min(n, DRAW_CHUNK))
            n -= DRAW_CHUNK
    return states


def pareto_draws(state: dict, n: int, alpha: float) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = state
    return rng.pareto(alpha, size=n)


def decile_picks(
    executor: Any, plan: Plan, parts: int, n_ok: int
) -> list[list[tuple[int, int, int]]]:
    """Per part [(decile, key, n)]: the decile's example is the part's n-th scorable row whose
    final score has `key` (select.decile_rows's rows: ascending score, ties by row)."""
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(parts)]
    if n_ok == 0:
        return out
    pos = [min(int((d + 0.5) / 10 * n_ok), n_ok - 1) for d in range(10)]
    group = ("final", False)
    sels = select(executor, plan, parts, [rank.Query(group, p) for p in pos], {group: n_ok})
    for d, (p, sel) in enumerate(zip(pos, sels, strict=True)):
        part, n = sel.locate(p)
        out[part].append((d + 1, sel.key, n))
    return out


def _quantile_indexes(n: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy's `linear` quantile: (previous index, next index, gamma), its own arithmetic."""
    vi = (n - 1) * q
    prev = np.floor(vi)
    nxt = prev + 1
    above = vi >= n - 1
    prev[above], nxt[above] = -1, -1
    below = vi < 0
    prev[below], nxt[below] = 0, 0
    prev, nxt = prev.astype(np.intp), nxt.astype(np.intp)
    return prev, nxt, np.asarray(vi - prev, dtype=vi.dtype)


def lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's quantile interpolation, step for step (so the cut-offs are bit-identical)."""
    diff = b - a
    out = np.add(a, diff * t)
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5, casting="unsafe")
    return out


def exact_quantiles(
    executor: Any, plan: Plan, parts: int, sizes: dict, q: tuple[float, ...]
) -> dict:
    """{group: values} = np.quantile(values of the group, q) for every non-empty group."""
    queries, slots = [], {}
    qs = np.array(q, np.float64)
    for group, n in sizes.items():
        if n == 0:
            continue
        prev, nxt, gamma = _quantile_indexes(n, qs)
        ranks = sorted({int(r) % n for r in (*prev, *nxt)})
        slots[group] = (prev % n, nxt % n, gamma, len(queries), ranks)
        queries += [rank.Query(group, r) for r in ranks]
    sels = select(executor, plan, parts, queries, sizes) if queries else []
    out = {}
    for group, (prev, nxt, gamma, first, ranks) in slots.items():
        value = {r: rank.key_value(sels[first + j].key) for j, r in enumerate(ranks)}
        a = np.array([value[int(r)] for r in prev])
        b = np.array([value[int(r)] for r in nxt])
        out[group] = lerp(a, b, gamma)
    return out


def median(executor: Any, plan: Plan, parts: int, group: tuple, n: int) -> float | None:
    """np.median of the group's values: the middle one, or the mean of the middle two."""
    if n == 0:
        return None
    ranks = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
    sels = select(executor, plan, parts, [rank.Query(group, r) for r in ranks], {group: n})
    vals = [rank.key_value(s.key) for s in sels]
    return float(np.mean(np.array(vals)))
