"""pipeline_report.json: {recipe, seed, stages: [{stage, seconds, stats}]}, and its table view.

The runner rewrites it atomically after each stage; a re-run replaces that stage's section.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.io import atomic_write_json

REPORT_NAME = "pipeline_report.json"


def load_report(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / REPORT_NAME
    if not path.exists():
        return {"recipe": None, "seed": None, "stages": []}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(str(path), f"not valid JSON ({exc})") from None


def update_report(
    run_dir: Path, recipe: dict[str, Any], seed: int, section: dict[str, Any], order: list[str]
) -> dict[str, Any]:
    """Replace (or add) one stage's section, keep pipeline order, write atomically."""
    report = load_report(run_dir)
    report["recipe"], report["seed"] = recipe, seed
    stages = [s for s in report.get("stages", []) if s.get("stage") != section["stage"]]
    stages.append(section)
    rank = {name: i for i, name in enumerate(order)}
    stages.sort(key=lambda s: rank.get(s["stage"], len(rank)))
    report["stages"] = stages
    atomic_write_json(Path(run_dir) / REPORT_NAME, report)
    return report


def check_balance(stats: dict[str, Any]) -> None:
    """docs_in == docs_out + sum(dropped_*): every document is accounted for."""
    if "docs_in" not in stats or "docs_out" not in stats:
        return
    dropped = sum(v for k, v in stats.items() if k.startswith("dropped_") and isinstance(v, int))
    if stats["docs_in"] != stats["docs_out"] + dropped:
        raise AssertionError(
            f"docs_in {stats['docs_in']} != docs_out {stats['docs_out']} + dropped {dropped}"
        )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value)
        return text if len(text) <= 70 else text[:67] + "..."
    return str(value)


_SPARK = " ▁▂▃▄▅▆▇█"


def _is_histogram(v: Any) -> bool:
    return isinstance(v, dict) and "counts" in v and ("bins" in v or "edges" in v)


def _spark(hist: dict[str, Any]) -> str:
    """counts as a one-line bar chart over the bin edges, threshold named."""
    counts = hist["counts"]
    edges = hist.get("bins") or hist.get("edges")
    top = max(counts) if counts and max(counts) > 0 else 1
    bars = "".join(_SPARK[min(8, -(-8 * c // top))] for c in counts)
    thr = hist.get("threshold")
    where = f" threshold={_fmt(thr)}" if thr is not None else ""
    return f"[{_fmt(edges[0])} |{bars}| {_fmt(edges[-1])}]{where} n={sum(counts):,}"


def _render(key: str, value: Any) -> list[str]:
    """One stat as lines: scalars inline, histograms as bars, tables of dicts one row each."""
    if _is_histogram(value):
        return [f"  {key}  {_spark(value)}"]
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        lines = [f"  {key}"]
        width = max(len(str(k)) for k in value)
        for name, sub in value.items():
            if _is_histogram(sub):
                text = f"{sub.get('stat', '')} {_spark(sub)}".strip()
            else:
                text = "  ".join(
                    f"{k}={_fmt(v)}" for k, v in sub.items() if not isinstance(v, (dict, list))
                )
            lines.append(f"    {str(name).ljust(width)}  {text}")
        return lines
    return [f"  {key}  {_fmt(value)}"]


def format_report(report: dict[str, Any]) -> str:
    """A readable table: one summary row per stage, then each stage's own statistics."""
    head = ("stage", "docs_in", "docs_out", "dropped", "seconds", "docs/s", "MB/s")
    rows = [head]
    for s in report.get("stages", []):
        st = s.get("stats", {})
        dropped = sum(v for k, v in st.items() if k.startswith("dropped_") and isinstance(v, int))
        rows.append(
            (
                s["stage"],
                _fmt(st.get("docs_in", "")),
                _fmt(st.get("docs_out", "")),
                _fmt(dropped),
                _fmt(s.get("seconds", 0.0)),
                _fmt(st.get("docs_per_s", "")),
                _fmt(st.get("mb_per_s", "")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        f"run: {report.get('recipe', {}).get('name', '?') if report.get('recipe') else '?'}"
        f"   seed: {report.get('seed')}",
        "",
    ]
    for r in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=False))
            )
        )
    skip = {"docs_in", "docs_out", "docs_per_s", "mb_per_s"}
    for s in report.get("stages", []):
        extra = {k: v for k, v in s.get("stats", {}).items() if k not in skip}
        if not extra:
            continue
        lines += ["", f"[{s['stage']}]"]
        width = max(len(k) for k in extra)
        for k, v in extra.items():
            lines += _render(k.ljust(width), v)
    return "\n".join(lines)
