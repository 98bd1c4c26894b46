"""report.html: one self-contained page (inline SVG and CSS, no scripts, no network) drawn from
pipeline_report.json, for tuning a recipe by eye.

An overview (document funnel, drops by reason, stage times), then one section per stage present
with its charts, each followed by the numbers behind it; every threshold is labelled with the
recipe key that sets it; the recipe with every default filled in closes the page. The output is
well-formed XHTML-style markup (void elements closed, everything escaped).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline.io import atomic_write_bytes
from pipeline.report import load_report, setting_keys
from pipeline.report.sections import dropped_counts, stage_figures
from pipeline.report.svg import DROPPED, KEPT, bars, esc, figure, fmt, table

HTML_NAME = "report.html"
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px auto;
  max-width: 1340px; color: #222; background: #fff; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; border-bottom: 1px solid #ccc;
  padding-bottom: 4px; margin-top: 32px; } h3 { font-size: 14px; margin: 20px 0 6px; }
nav a { margin-right: 12px; } .meta { color: #555; }
.grid { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #e3e3e3; border-radius: 4px; padding: 6px; width: 600px; }
figcaption { font-size: 12px; color: #444; margin: 4px 0; }
table { border-collapse: collapse; font-size: 11px; margin: 4px 0; }
td, th { border: 1px solid #e3e3e3; padding: 2px 6px; text-align: right; white-space: nowrap; }
th { background: #f5f5f5; } td.l, th.l { text-align: left; }
.scroll { overflow-x: auto; max-width: 600px; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 8px; overflow-x: auto; }
"""


# ---------------------------------------------------------------- page


def _scalars(stats: dict[str, Any], skip: Sequence[str] = ()) -> str:
    """Every scalar stat as a row: name, value, and the recipe key that sets it (if any)."""
    keys = setting_keys(stats)
    rows = []
    for k, v in stats.items():
        if k in skip or k in keys.values() or isinstance(v, (dict, list)):
            continue
        if isinstance(v, str) and len(v) > 40:  # a sha256 would widen the table past the page
            v = v[:24] + "…"
        rows.append([k, v if v is not None else "null", stats[keys[k]] if k in keys else ""])
    return table(["stat", "value", "recipe key"], rows, left=1) if rows else ""


def _overview(report: dict[str, Any]) -> list[str]:
    stages = report.get("stages", [])
    figs = []
    funnel: list[tuple[str, int]] = []
    for s in stages:
        st = s.get("stats", {})
        if "docs_in" in st and "docs_out" in st:
            if not funnel:
                funnel.append((f"{s['stage']} in", st["docs_in"]))
            funnel.append((s["stage"], st["docs_out"]))
    if funnel:
        labels, values = zip(*funnel, strict=True)
        first = values[0] or 1
        svg = bars("documents after each stage", labels, [("", values, KEPT)])
        rows = [[k, v, f"{100 * v / first:.1f}%"] for k, v in funnel]
        figs.append(figure(svg, "the document funnel", table(["stage", "docs", "of input"], rows)))
    drops = [
        (f"{s['stage']}: {reason}", n)
        for s in stages
        for reason, n in dropped_counts(s.get("stats", {})).items()
        if n
    ]
    if drops:
        labels, values = zip(*drops, strict=True)
        svg = bars("documents dropped by stage and reason", labels, [("", values, DROPPED)])
        figs.append(
            figure(
                svg,
                "first failing reason per document (clean's section also shows all failing)",
                table(["stage: reason", "docs"], drops),
            )
        )
    if stages:
        labels = [s["stage"] for s in stages]
        secs = [float(s.get("seconds", 0.0)) for s in stages]
        svg = bars("stage time", labels, [("", secs, KEPT)], unit=" s")
        rows = [
            [
                s["stage"],
                s.get("seconds"),
                s.get("stats", {}).get("docs_per_s", ""),
                s.get("stats", {}).get("mb_per_s", ""),
            ]
            for s in stages
        ]
        figs.append(
            figure(
                svg,
                "wall seconds and throughput (docs/s over docs_in, MB/s over bytes_in)",
                table(["stage", "seconds", "docs/s", "MB/s"], rows),
            )
        )
    return figs


def _recipe_yaml(report: dict[str, Any]) -> str:
    recipe = report.get("recipe") or {}
    config = recipe.get("config") or {}
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True, width=100)


def section_ids(report: dict[str, Any]) -> list[str]:
    """The id of every section the page holds, in order (tests check each has a chart)."""
    return ["overview"] + [f"stage-{s['stage']}" for s in report.get("stages", [])]


def page(title: str, meta: str, sections: list[tuple[str, str, str]]) -> str:
    """The HTML document: sections are (id, heading, inner markup)."""
    nav = "".join(f'<a href="#{esc(i)}">{esc(h)}</a>' for i, h, _ in sections)
    body = "".join(
        f'<section id="{esc(i)}"><h2>{esc(h)}</h2>{inner}</section>' for i, h, inner in sections
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{esc(title)}</h1><p class="meta">{meta}</p><nav>{nav}</nav>{body}</body></html>\n'
    )


def render_html(report: dict[str, Any]) -> str:
    """report.html's markup for one run's report dict (pipeline_report.json)."""
    recipe = report.get("recipe") or {}
    name = recipe.get("name", "?")
    sections = [
        ("overview", "Overview", '<div class="grid">' + "".join(_overview(report)) + "</div>")
    ]
    for s in report.get("stages", []):
        st = s.get("stats", {})
        figs = stage_figures(s["stage"], st, report)
        inner = (
            f'<p class="meta">{fmt(s.get("seconds"))} s</p><div class="grid">'
            + "".join(figs)
            + "</div><h3>all numbers</h3>"
            + _scalars(st)
        )
        sections.append((f"stage-{s['stage']}", s["stage"], inner))
    sections.append(
        (
            "recipe",
            "Recipe (every default filled in)",
            f"<pre>{esc(_recipe_yaml(report))}</pre>",
        )
    )
    meta = (
        f"seed {esc(report.get('seed'))} · recipe <code>{esc(recipe.get('path') or '?')}</code>"
        " · thresholds are labelled with the recipe key that sets them"
        " (change it in the recipe or with <code>--set key=value</code>)"
    )
    return page(f"pipeline report: {name}", meta, sections)


def write_html(run_dir: Path, out: Path | None = None) -> Path:
    """Render `<run_dir>/pipeline_report.json` into `out` (default `<run_dir>/report.html`),
    atomically (temp file + rename)."""
    path = Path(out) if out is not None else Path(run_dir) / HTML_NAME
    atomic_write_bytes(path, render_html(load_report(run_dir)).encode("utf-8"))
    return path
