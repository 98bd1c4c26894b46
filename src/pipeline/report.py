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
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))
            )
        )
    skip = {"docs_in", "docs_out", "docs_per_s", "mb_per_s"}
    for s in report.get("stages", []):
        extra = {k: v for k, v in s.get("stats", {}).items() if k not in skip}
        if not extra:
            continue
        lines += ["", f"[{s['stage']}]"]
        width = max(len(k) for k in extra)
        lines += [f"  {k.ljust(width)}  {_fmt(v)}" for k, v in extra.items()]
    return "\n".join(lines)
