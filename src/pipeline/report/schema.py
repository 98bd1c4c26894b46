"""The shape of pipeline_report.json that `pipeline report` (table, `report A B`, `--html`)
draws, checked before anything is drawn: a hand-edited or damaged report is one DataError line
naming the file and the field, never a traceback from a renderer.

Checked: {recipe: object|null, seed: int|null, stages: [{stage: str, seconds: number, stats:
object}]}; every number finite and within +-2**63; counts (docs_in, docs_out, dropped_*)
non-negative integers; every histogram ({counts, bins|edges, threshold, key, direction}) well
formed; and each stat a section chart reads (rules, cluster sizes, LSH bands and rows, shard
sizes, per-source counts, pack's seq_len, ...) of the type it reads. Any other stat may be any
JSON value: the table and the "all numbers" rows print whatever is there.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pipeline.errors import DataError, short

_LIMIT = 2**63
MAX_DEPTH = 32  # levels of nesting; our reports use 5
_CLUSTER_LABEL = re.compile(r"^\d+(-\d+|\+)?$")  # dedup.cluster.size_histogram: 3, 5-8, 17+
_EDGES_ONLY = ("doc_tokens_histogram", "fill_histogram")  # drawn from h["edges"]
_HISTOGRAMS = (
    "score_histogram",
    "perplexity_histogram",
    "coherence_histogram",
    "external_histogram",
)
_PER_SOURCE = (
    "docs_per_source",
    "sequences_per_source",
    "docs_per_language",
    "kept_per_language",
)


class _Bad(Exception):
    """(field path, message): raised inside, turned into one DataError at the top."""


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _num(path: str, v: Any, low: float | None = None, integer: bool = False) -> None:
    ok = isinstance(v, int) if integer else _is_num(v)
    if not ok or isinstance(v, bool) or (low is not None and v < low):
        what = "an integer" if integer else "a number"
        raise _Bad(path, f"must be {what}{f' >= {low}' if low is not None else ''}, got {short(v)}")


def _finite(path: str, v: Any, depth: int = 0) -> None:
    """Every number anywhere in `v` finite and within +-2**63 (charts scale by them); at most
    MAX_DEPTH levels of nesting (the renderers recurse)."""
    if depth > MAX_DEPTH:
        raise _Bad(path, f"is nested more than {MAX_DEPTH} levels deep")
    if isinstance(v, float) and (not math.isfinite(v) or abs(v) >= _LIMIT):
        raise _Bad(path, f"must be a finite number, got {short(v)}")
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= _LIMIT:
        raise _Bad(path, f"must be within +-2**63, got {short(v)}")
    if isinstance(v, dict):
        for k, sub in v.items():
            _finite(f"{path}.{k}", sub, depth + 1)
    elif isinstance(v, list):
        for i, sub in enumerate(v):
            _finite(f"{path}[{i}]", sub, depth + 1)


def _type(path: str, v: Any, kind: type | tuple, what: str) -> None:
    if not isinstance(v, kind) or (kind is not bool and isinstance(v, bool)):
        raise _Bad(path, f"must be {what}, got {short(v)}")


def _optional_str(path: str, v: Any) -> None:
    if v is not None:
        _type(path, v, str, "a string or null")


def _histogram(path: str, h: Any, edges_only: bool = False) -> None:
    _type(path, h, dict, "a histogram object {counts, edges}")
    counts = h.get("counts")
    _type(f"{path}.counts", counts, list, "a list of counts")
    for i, c in enumerate(counts):
        _num(f"{path}.counts[{i}]", c, 0)
    names = ("edges",) if edges_only else ("bins", "edges")
    chosen = next((n for n in names if h.get(n)), None)
    if chosen is None:
        raise _Bad(f"{path}.{names[-1]}", "is missing: a histogram needs its bin edges")
    for name in names:
        if name in h:
            _type(f"{path}.{name}", h[name], list, "a list of bin edges")
            for i, e in enumerate(h[name]):
                _num(f"{path}.{name}[{i}]", e)
    if len(h[chosen]) != len(counts) + 1:
        raise _Bad(
            f"{path}.{chosen}",
            f"has {len(h[chosen])} edges for {len(counts)} counts (expected {len(counts) + 1})",
        )
    if h.get("threshold") is not None:
        _num(f"{path}.threshold", h["threshold"])
    for key in ("key", "stat"):
        _optional_str(f"{path}.{key}", h.get(key))
    if h.get("direction") not in (None, "min", "max"):
        raise _Bad(f"{path}.direction", f"must be min, max or null, got {short(h['direction'])}")


def _rules(path: str, rules: Any) -> None:
    _type(path, rules, dict, "an object {rule: {first, all, ...}}")
    for name, r in rules.items():
        at = f"{path}.{name}"
        _type(at, r, dict, "an object {first, all, alone, threshold, key}")
        for key in ("first", "all", "alone"):
            if key in r and r[key] != "":
                _num(f"{at}.{key}", r[key], 0, integer=True)
        if r.get("all") and "first" not in r:
            raise _Bad(f"{at}.first", "is missing")
        _optional_str(f"{at}.key", r.get("key"))


def _section_stats(path: str, stats: dict[str, Any]) -> None:
    """The stats a section chart reads, each of the type it reads."""
    for key, v in stats.items():
        at = f"{path}.{key}"
        if key in ("docs_in", "docs_out") or key.startswith("dropped_"):
            _num(at, v, 0, integer=True)
        elif key.endswith("_key"):
            _optional_str(at, v)
        elif key in _HISTOGRAMS or key in _EDGES_ONLY or key == "heuristic_histogram":
            if v:
                _histogram(at, v, edges_only=key in _EDGES_ONLY)
        elif key == "histograms":
            _type(at, v, dict, "an object {rule: histogram}")
            for name, h in v.items():
                _histogram(f"{at}.{name}", h)
        elif key == "rules":
            _rules(at, v)
        elif key == "cluster_size_histogram" and v:
            _type(at, v, dict, "an object {size: clusters}")
            for label, n in v.items():
                if not _CLUSTER_LABEL.match(label):
                    raise _Bad(at, f"size label {short(label)} is not N, N-M or N+")
                _num(f"{at}.{label}", n, 0)
        elif key in ("bands", "rows") and v:
            _num(at, v, 1, integer=True)
            if v > 10**6:
                raise _Bad(at, f"must be at most 1000000, got {short(v)}")
        elif key in _PER_SOURCE and v:
            _type(at, v, dict, "an object {source: count}")
            for name, n in v.items():
                _num(f"{at}.{name}", n, 0)
        elif key.startswith("shard_sizes_") and v:
            _type(at, v, list, "a list of shard sizes")
            for i, n in enumerate(v):
                _num(f"{at}[{i}]", n, 0, integer=True)
        elif key in ("threshold", "seq_len", "tokens_out", "padding_tokens", "docs_per_s"):
            if v is not None and v != "":
                _num(at, v)
        elif key == "s_curve" and v:
            _type(at, v, dict, "an object {similarity: probability}")


def report_problem(report: Any) -> str | None:
    """What makes `report` not a drawable report ("field '...' must be ..."), or None."""
    try:
        _check(report)
    except _Bad as bad:
        return f"field '{bad.args[0]}' {bad.args[1]}"
    except RecursionError:
        return "nested too deeply"
    return None


def check_report(report: Any, where: str) -> dict[str, Any]:
    """`report` if it has the shape the report commands draw; else one DataError at `where`
    (the file it came from) naming the field."""
    try:
        _check(report)
    except _Bad as bad:
        field, message = bad.args
        raise DataError(
            where, f"not a pipeline report: field '{field}' {message}; re-run `pipeline data`"
        ) from None
    except RecursionError:
        raise DataError(where, "not a pipeline report: nested too deeply") from None
    return report


def _check(report: Any) -> None:
    if not isinstance(report, dict):
        raise _Bad("(top)", f"must be a JSON object, got a JSON {type(report).__name__}")
    _finite("report", report)
    recipe = report.get("recipe")
    if recipe is not None:
        _type("recipe", recipe, dict, "an object or null")
        _optional_str("recipe.name", recipe.get("name"))
        _optional_str("recipe.path", recipe.get("path"))
        if recipe.get("config") is not None:
            _type("recipe.config", recipe["config"], dict, "an object or null")
    if report.get("seed") is not None:
        _num("seed", report["seed"], integer=True)
    stages = report.get("stages")
    _type("stages", stages, list, "a list of {stage, seconds, stats}")
    for i, s in enumerate(stages):
        at = f"stages[{i}]"
        _type(at, s, dict, "an object {stage, seconds, stats}")
        name = s.get("stage")
        if not isinstance(name, str) or not name:
            raise _Bad(f"{at}.stage", f"must be a stage name, got {short(name)}")
        if "seconds" in s:
            _num(f"{at}.seconds", s["seconds"], 0)
        _type(f"{at}.stats", s.get("stats"), dict, "an object of statistics")
        _section_stats(f"{at}.stats", s["stats"])
