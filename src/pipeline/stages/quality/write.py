"""The quality stage's write task: one part's keep mask, columns and report sums.

The task derives its part's scores from the part's columns (parttasks), applies the keep
rule the driver decided (min_score; keep_fraction's threshold key and how many rows at it
this part keeps; pareto's generator state at the part's first row), writes kept and rejected
rows and returns its counts, decile examples, histograms and per-script counts: the driver
only sums them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.parts import np_array, read_table, write_kept_and_rejected
from pipeline.quality import rank
from pipeline.stages.quality import lm, partcols, parttasks

# why a row was dropped, by code
REASONS = ("low_quality", "no_words", "high_perplexity", "low_external_score")
HIST_BINS = 20  # score histograms: 20 bins over [0, 1]


@dataclass(frozen=True)
class WriteSpec:
    """What every write task applies to its part (the global rule already decided)."""

    plan: parttasks.Plan
    rule: str  # keep_rule
    min_score: float
    pareto_alpha: float
    max_perplexity: float | None
    lm: bool  # the LM scored: write its columns, report per script
    buckets: bool  # add lm_bucket
    classifier: bool  # write quality_classifier
    external: bool = False  # write quality_external (quality.external's model scored)
    external_min_score: float | None = None  # drop below this external score


def part_keep(spec: WriteSpec, final: np.ndarray, ok: np.ndarray, rule_arg: Any) -> np.ndarray:
    """The part's slice of select.keep_mask (rule_arg: keep_fraction's (threshold key, rows
    at it kept here) or None; pareto's generator state at the part's first row)."""
    if spec.rule == "min_score":
        return (final >= spec.min_score) & ok
    if spec.rule == "keep_fraction":
        keep = np.zeros(len(final), bool)
        if rule_arg is not None:
            key, take = rule_arg
            keys = rank.sort_key(final[ok], descending=True)
            at = keys == np.uint64(key)
            keep[ok] = (keys < np.uint64(key)) | (at & (np.cumsum(at) <= take))
        return keep
    draws = parttasks.pareto_draws(rule_arg, len(final), spec.pareto_alpha)
    return (draws > 1.0 - final) & ok


def _hist(values: np.ndarray) -> np.ndarray:
    return np.histogram(values, bins=HIST_BINS, range=(0.0, 1.0))[0]


@dataclass(frozen=True, slots=True)
class WritePart:
    """Part `index` at `path` and its share of the global decisions (see `part_keep`)."""

    index: int
    path: Path
    rule_arg: tuple[int, int] | dict | None  # keep_fraction's (key, rows at it) / pareto state
    picks: list[tuple[int, int, int]]  # [(decile, key, n)]: the decile examples it holds
    cuts: dict | None  # {script: (p30, p60)} perplexity cut-offs, or None


def write_part(item: WritePart, out_dir: Path, spec: WriteSpec) -> dict[str, Any]:
    """Write kept rows to part-i and dropped rows to rejected/part-i (input columns + quality);
    returns the part's counts, examples and the report's per-part sums."""
    index, path, rule_arg = item.index, item.path, item.rule_arg
    picks, cuts = item.picks, item.cuts
    cols = partcols.load(spec.plan.folder, index)
    ok = cols["scorable"]
    final, scores = parttasks._final(cols, spec.plan)
    keep = part_keep(spec, final, ok, rule_arg)
    reason = np.where(ok, 0, 1).astype(np.int8)  # codes into REASONS
    if spec.max_perplexity is not None and spec.lm:
        high = ok & keep & (cols["perplexity"] > spec.max_perplexity)
        keep &= ~high
        reason[high] = 2
    if spec.external and spec.external_min_score is not None:
        low = ok & keep & (cols["external"] < spec.external_min_score)
        keep &= ~low
        reason[low] = 3
    columns: dict[str, np.ndarray] = {"quality_heuristic": cols["heuristic"]}
    if spec.lm:
        columns["quality_coherence"] = cols["coherence"]  # NaN: no LM for the script
        columns["perplexity"] = cols["perplexity"]
        columns["context_gain"] = cols["context_gain"]
        if "splice_share" in cols:  # quality.splice_gate
            columns["splice_share"] = cols["splice_share"]
        if spec.buckets:
            columns["lm_bucket"] = lm.assign_buckets(cols["perplexity"], cols["script"], cuts)
    if spec.classifier:
        columns["quality_classifier"] = cols["classifier"]
    if spec.external:
        columns["quality_external"] = cols["external"]
    table = read_table(path)
    for name in ("quality", "reasons", *columns):  # a re-scored input: replace, never duplicate
        if name in table.column_names:
            table = table.drop_columns([name])
    table = table.append_column("quality", np_array(final.astype(np.float32)))
    for name, values in columns.items():
        if values.dtype == object:
            table = table.append_column(name, pa.array(values.tolist(), pa.string()))
        else:
            table = table.append_column(name, np_array(values.astype(np.float32)))
    reasons = [[REASONS[r]] for r in reason[~keep].tolist()]
    outputs, counts = write_kept_and_rejected(out_dir, index, table, keep, reasons)
    # every reason reported, even at 0
    counts.dropped = {"high_perplexity": 0, "low_quality": 0, "no_words": 0, **counts.dropped}
    if spec.external:
        counts.dropped = {"low_external_score": 0, **counts.dropped}
    examples = {}
    if picks:
        keys = rank.sort_key(final, descending=False)
        ok_rows = np.flatnonzero(ok)
        rows = [int(ok_rows[np.flatnonzero(keys[ok] == np.uint64(k))[n]]) for _, k, n in picks]
        recs = table.take(np_array(np.asarray(rows, np.int64))).select(["id", "text"]).to_pylist()
        for (d, _, _), r, rec in zip(picks, rows, recs, strict=True):
            examples[d] = (rec["id"], rec["text"][:100], float(final[r]))
    hists = {"score": _hist(final[ok]), "heuristic": _hist(cols["heuristic"][ok])}
    if "coherence" in scores:
        hists["coherence"] = _hist(scores["coherence"][ok])
    if spec.external:
        hists["external"] = _hist(cols["external"][ok])
    summary: dict[str, Any] = {
        "ok": int(ok.sum()),
        "sum": math.fsum(final[ok].tolist()),
        "hists": hists,
    }
    if spec.external:
        summary["external_sum"] = math.fsum(cols["external"][ok].tolist())
    if spec.lm:
        summary["perplexity"] = lm.perplexity_counts(cols["perplexity"][ok])
        summary["per_script"] = lm.per_script_counts(cols, keep)
    return {"outputs": outputs, "counts": counts, "examples": examples, "summary": summary}


def histogram(counts: np.ndarray, threshold: float | None) -> dict:
    """select.histogram's dict from the parts' summed counts."""
    edges = np.histogram(np.zeros(0), bins=HIST_BINS, range=(0.0, 1.0))[1]
    return {
        "edges": [round(float(e), 3) for e in edges],
        "counts": [int(c) for c in counts],
        "threshold": threshold,
    }


def sum_summaries(written: list[dict]) -> dict:
    got = [w["summary"] for w in written]
    out: dict[str, Any] = {
        "ok": sum(g["ok"] for g in got),
        "sum": math.fsum(g["sum"] for g in got),
        "hists": {k: np.sum([g["hists"][k] for g in got], axis=0) for k in got[0]["hists"]},
    }
    for key in ("perplexity", "per_script"):
        if key in got[0]:
            out[key] = np.sum([g[key] for g in got], axis=0)
    if "external_sum" in got[0]:
        out["external_sum"] = math.fsum(g["external_sum"] for g in got)
    return out
