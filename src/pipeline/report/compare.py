"""Two runs side by side: what changed in the recipe, then each stage's counts, rates and key
statistics in run A and run B with the difference (B - A), as text or as an HTML page.

Runs with different stages or missing sections still compare: a value absent in one run is
blank. Histograms and example lists are left out of the table (report.html draws them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.report.html import page
from pipeline.report.svg import KEPT, SECOND, bars, esc, figure, fmt, table

COMPARE_NAME = "compare.html"
# nested entries that are lists of examples or per-bin counts, not a statistic to compare
_SKIP = {"histograms", "example_clusters", "decile_examples", "first_merges", "malformed_examples"}
_NOT_RECIPE = {"out_dir", "workers", "executor"}  # where and how (older reports recorded them)
_RULE_META = {"stat", "direction", "key"}  # a rule row's description, the same in both runs


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> {dotted.key: scalar}; lists are kept whole (compared as values)."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{path}."))
        else:
            out[path] = v
    return out


def recipe_changes(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(recipe key, value in A, value in B) for every key that differs; a stage enabled in one
    run only shows as `stage: enabled` / absent."""
    ca = (a.get("recipe") or {}).get("config") or {}
    cb = (b.get("recipe") or {}).get("config") or {}
    rows = []
    for key in list(ca) + [k for k in cb if k not in ca]:
        if key in _NOT_RECIPE:
            continue
        va, vb = ca.get(key), cb.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            fa, fb = flatten(va, f"{key}."), flatten(vb, f"{key}.")
            for k in list(fa) + [k for k in fb if k not in fa]:
                if fa.get(k) != fb.get(k):
                    rows.append((k, fa.get(k), fb.get(k)))
        elif va != vb:
            # a whole stage block on one side only: say so instead of listing every field
            rows.append(
                (
                    key,
                    "enabled" if isinstance(va, dict) else va,
                    "enabled" if isinstance(vb, dict) else vb,
                )
            )
    if "seed" not in ca and "seed" not in cb and a.get("seed") != b.get("seed"):
        rows.append(("seed", a.get("seed"), b.get("seed")))
    return rows


def _stat_rows(stats: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """{stat path: (value, recipe key or "")} of one stage's comparable statistics."""
    out: dict[str, tuple[Any, str]] = {}
    if _is_number(stats.get("docs_in")) and _is_number(stats.get("docs_out")) and stats["docs_in"]:
        out["kept_pct"] = (round(100 * stats["docs_out"] / stats["docs_in"], 2), "")
    for k, v in stats.items():
        if k in _SKIP or k.endswith("_key") or (isinstance(v, dict) and "counts" in v):
            continue
        key = stats.get(f"{k}_key", "")
        if isinstance(v, dict):
            for name, sub in v.items():
                if isinstance(sub, dict):
                    for sk, sv in sub.items():
                        if sk not in _RULE_META and not isinstance(sv, (dict, list)):
                            rk = sub.get("key", "") if sk == "threshold" else ""
                            out[f"{k}.{name}.{sk}"] = (sv, rk)
                elif not isinstance(sub, list):
                    out[f"{k}.{name}"] = (sub, "")
        elif not isinstance(v, list) or len(v) <= 8:
            out[k] = (v, key)
    return out


def _group(stat: str) -> int:
    """Row order (stable within a group): counts and rate, drops, the rest."""
    if stat in ("kept_pct", "docs_in", "docs_out"):
        return 0
    return 1 if stat.startswith("dropped_") else 2


def diff(va: Any, vb: Any) -> str:
    """B - A for numbers (with the relative change), 'changed' for other values, else ''."""
    if _is_number(va) and _is_number(vb):
        d = vb - va
        if d == 0:
            return "0"
        text = f"{'+' if d > 0 else '-'}{fmt(abs(d))}"
        return text + (f" ({100 * d / va:+.1f}%)" if va else "")
    if va is None or vb is None or va == vb:
        return ""
    return "changed"


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """{recipe: [(key, A, B)], stages: [{stage, rows: [(stat, recipe key, A, B, diff)]}]}."""
    sa = {s["stage"]: s for s in a.get("stages", [])}
    sb = {s["stage"]: s for s in b.get("stages", [])}
    order = list(sa) + [n for n in sb if n not in sa]
    stages = []
    for name in order:
        ra = _stat_rows(sa[name]["stats"]) if name in sa else {}
        rb = _stat_rows(sb[name]["stats"]) if name in sb else {}
        rows = [
            (
                "seconds",
                "",
                sa.get(name, {}).get("seconds"),
                sb.get(name, {}).get("seconds"),
            )
        ]
        stats = sorted(list(ra) + [k for k in rb if k not in ra], key=_group)
        for stat in stats:
            # a stage lists only the reasons that dropped something: absent there means 0
            zero = 0 if stat.startswith("dropped_") else None
            va, ka = ra.get(stat, (zero if name in sa else None, ""))
            vb, kb = rb.get(stat, (zero if name in sb else None, ""))
            rows.append((stat, ka or kb, va, vb))
        stages.append(
            {
                "stage": name,
                "in": [name in sa, name in sb],
                "rows": [(s, k, va, vb, diff(va, vb)) for s, k, va, vb in rows],
            }
        )
    return {"recipe": recipe_changes(a, b), "stages": stages}


def _cell(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else fmt(v)


def format_compare(cmp: dict[str, Any], names: tuple[str, str], everything: bool = False) -> str:
    """The comparison as text. Nested rows (rules.*, s_curve.*) equal in both runs are hidden
    unless `everything`."""
    lines = [f"A: {names[0]}", f"B: {names[1]}"]
    if not everything:
        lines.append(
            "(nested rows equal in both runs, rules.* and the like, hidden; --all shows them)"
        )
    lines += ["", "recipe changes (A -> B):"]
    if not cmp["recipe"]:
        lines.append("  none")
    for key, va, vb in cmp["recipe"]:
        lines.append(f"  {key}: {_cell(va) or 'absent'} -> {_cell(vb) or 'absent'}")
    for st in cmp["stages"]:
        where = {(True, True): "", (True, False): " (only in A)", (False, True): " (only in B)"}
        lines += ["", f"[{st['stage']}]{where[tuple(st['in'])]}"]
        rows = [r for r in st["rows"] if everything or "." not in r[0] or r[2] != r[3]]
        table_rows = [
            (f"{s} ({k})" if k else s, _cell(va), _cell(vb), d) for s, k, va, vb, d in rows
        ]
        head = ("stat", "A", "B", "B - A")
        widths = [max(len(r[i]) for r in [head, *table_rows]) for i in range(4)]
        for r in [head, *table_rows]:
            lines.append(
                "  "
                + "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(r, widths, strict=True))
                )
            )
    return "\n".join(lines)


def _funnel(report: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in report.get("stages", []):
        st = s.get("stats", {})
        if _is_number(st.get("docs_in")) and _is_number(st.get("docs_out")):
            if not out:
                out[f"{s['stage']} in"] = st["docs_in"]
            out[s["stage"]] = st["docs_out"]
    return out


def _drops(report: dict[str, Any]) -> dict[str, int]:
    return {
        f"{s['stage']}: {k.removeprefix('dropped_')}": v
        for s in report.get("stages", [])
        for k, v in s.get("stats", {}).items()
        if k.startswith("dropped_") and _is_number(v) and v
    }


def _pair_chart(title: str, da: dict[str, Any], db: dict[str, Any], names: tuple[str, str]) -> str:
    labels = list(da) + [k for k in db if k not in da]
    series = [
        ("A", [da.get(k) for k in labels], KEPT),
        ("B", [db.get(k) for k in labels], SECOND),
    ]
    return bars(title, labels, series)


def render_compare_html(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str:
    """A page: recipe changes, the two funnels, then each stage's chart and table A | B | diff."""
    cmp = compare_reports(a, b)
    recipe_rows = [[k, _cell(va) or "absent", _cell(vb) or "absent"] for k, va, vb in cmp["recipe"]]
    sections = [
        (
            "recipe",
            "Recipe changes (A -> B)",
            table(["recipe key", "A", "B"], recipe_rows, left=3) if recipe_rows else "<p>none</p>",
        ),
        (
            "overview",
            "Overview",
            '<div class="grid">'
            + figure(
                _pair_chart("documents after each stage", _funnel(a), _funnel(b), names),
                "the document funnel of both runs (A blue, B green)",
            )
            + figure(
                _pair_chart("documents dropped by stage and reason", _drops(a), _drops(b), names),
                "first failing reason per document, both runs",
            )
            + "</div>",
        ),
    ]
    sa = {s["stage"]: s.get("stats", {}) for s in a.get("stages", [])}
    sb = {s["stage"]: s.get("stats", {}) for s in b.get("stages", [])}
    for st in cmp["stages"]:
        name = st["stage"]
        counts_a = {k: v for k, v in sa.get(name, {}).items() if _count(k, v)}
        counts_b = {k: v for k, v in sb.get(name, {}).items() if _count(k, v)}
        chart = _pair_chart(f"{name}: counts", counts_a, counts_b, names)
        rows = [
            [s, k, _cell(va), _cell(vb), d]
            for s, k, va, vb, d in st["rows"]
            if "." not in s or va != vb
        ]
        inner = (
            '<div class="grid">'
            + figure(chart, "A blue, B green; blank = absent in that run")
            + table(["stat", "recipe key", "A", "B", "B - A"], rows, left=2)
            + "</div>"
        )
        sections.append((f"stage-{name}", name, inner))
    meta = f"A: <code>{esc(names[0])}</code> · B: <code>{esc(names[1])}</code>"
    return page("pipeline report: A vs B", meta, sections)


def _count(key: str, value: Any) -> bool:
    """Document and sequence counts worth a bar: docs_in/out, dropped_*, sequences*."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return key in ("docs_in", "docs_out") or key.startswith(("dropped_", "sequences"))


def write_compare(
    run_a: Path, run_b: Path, html: bool = False, everything: bool = False, as_json: bool = False
) -> str:
    """The text comparison (or its JSON), or (html) write `<run_b>/compare.html` atomically and
    return its path: B is usually the run made after moving a threshold."""
    from pipeline.io import atomic_write_bytes
    from pipeline.report import read_run_report

    a, b = read_run_report(run_a), read_run_report(run_b)
    names = (str(run_a), str(run_b))
    if as_json and not html:
        return json.dumps({"runs": names, **compare_reports(a, b)}, indent=2, default=str)
    if not html:
        return format_compare(compare_reports(a, b), names, everything)
    path = Path(run_b) / COMPARE_NAME
    atomic_write_bytes(path, render_compare_html(a, b, names).encode("utf-8"))
    return str(path)
