"""report.html: one self-contained page (inline SVG and CSS, no scripts, no network) drawn from
pipeline_report.json, for tuning a recipe by eye.

An overview (document funnel, drops by reason, stage times), then one section per stage present
with its charts, each followed by the numbers behind it; every threshold is labelled with the
recipe key that sets it; the recipe with every default filled in closes the page. The output is
well-formed XHTML-style markup (void elements closed, everything escaped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline.io import atomic_write_bytes
from pipeline.report import REPORT_NAME, load_report, setting_keys
from pipeline.report_svg import DROPPED, KEPT, bars, columns, esc, fmt, line

HTML_NAME = "report.html"
ALL_FAILING = "#8c8c8c"
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
.key { color: #8a3b12; }
"""


# ---------------------------------------------------------------- markup helpers


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    """A <table>; the first `left` columns are left-aligned (names), the rest numbers."""

    def cell(tag: str, i: int, value: object) -> str:
        cls = ' class="l"' if i < left else ""
        text = value if isinstance(value, str) else fmt(value)
        return f"<{tag}{cls}>{esc(text)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows
    )
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def hist_table(edges: Sequence[float], counts: Sequence[int], unit: str = "docs") -> str:
    """The numbers behind a histogram: one column per bin, lower edge over count."""
    header = ["from"] + [fmt(e) for e in edges[:-1]] + [f"to {fmt(edges[-1])}"]
    return table(header, [[unit, *counts, ""]])


def figure(svg: str, caption: str, numbers: str = "") -> str:
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption>{numbers}</figure>"


def _marker(value: float | None, key: str | None) -> tuple[float, str] | None:
    if value is None:
        return None
    return (value, f"{key} = {fmt(value)}" if key else f"threshold {fmt(value)}")


def _dropped_side(edges: Sequence[float], thr: float | None, direction: str | None) -> list[bool]:
    """Columns on the dropped side of the threshold (max: above it; min: below it)."""
    n = len(edges) - 1
    if thr is None or direction not in ("min", "max"):
        return [False] * n
    if direction == "max":
        return [edges[i] >= thr for i in range(n)]
    return [edges[i + 1] <= thr for i in range(n)]


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


def _dropped(stats: dict[str, Any]) -> dict[str, int]:
    return {
        k.removeprefix("dropped_"): v
        for k, v in stats.items()
        if k.startswith("dropped_") and isinstance(v, int)
    }


def _drop_figure(name: str, stats: dict[str, Any]) -> str:
    """Documents in, out and dropped per reason of one stage."""
    drops = _dropped(stats)
    labels = ["in", "out", *drops]
    values = [stats["docs_in"], stats["docs_out"], *drops.values()]
    svg = bars(f"{name}: documents in, out and dropped by reason", labels, [("", values, KEPT)])
    rows = [[k, v] for k, v in zip(labels, values, strict=True)]
    return figure(svg, "dropped_<reason> counts; in = out + dropped", table(["", "docs"], rows))


def _dict_figure(title: str, mapping: dict[str, Any], unit: str, caption: str) -> str:
    labels = list(mapping)
    values = [float(v) for v in mapping.values()]
    svg = bars(title, labels, [("", values, KEPT)])
    return figure(svg, caption, table(["", unit], [[k, v] for k, v in mapping.items()]))


# ---------------------------------------------------------------- per-stage sections


def _download(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("download", st)]
    if st.get("docs_per_source"):
        figs.append(
            _dict_figure("documents per source", st["docs_per_source"], "docs", "what each gave")
        )
    return figs


def _histogram_figure(name: str, h: dict[str, Any], unit: str = "docs") -> str:
    edges = h.get("bins") or h.get("edges")
    thr, key = h.get("threshold"), h.get("key")
    stat = h.get("stat", name)
    side = _dropped_side(edges, thr, h.get("direction"))
    svg = columns(
        f"{name}: {stat}", edges, h["counts"], marker=_marker(thr, key), dropped=side, xlabel=stat
    )
    what = (
        f"drops {'above' if h.get('direction') == 'max' else 'below'} the line"
        if h.get("direction")
        else ""
    )
    caption = f"{sum(h['counts']):,} {unit}"
    caption += f"; threshold {fmt(thr)}" if thr is not None else ""
    caption += f" set by {key}" if key and thr is not None else ""
    caption += f"; {what} (orange)" if what and thr is not None else ""
    return figure(svg, caption, hist_table(edges, h["counts"], unit))


def _clean(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = []
    rules = {k: r for k, r in st.get("rules", {}).items() if r.get("all")}
    if rules:
        labels = list(rules)
        first = [r["first"] for r in rules.values()]
        all_ = [r["all"] for r in rules.values()]
        svg = bars(
            "clean: documents failing each rule",
            labels,
            [
                ("first failing (counted as its drop)", first, DROPPED),
                ("all failing", all_, ALL_FAILING),
            ],
        )
        rows = [
            [k, r.get("key", ""), r.get("threshold"), r["first"], r["all"], r.get("alone", "")]
            for k, r in rules.items()
        ]
        figs.append(
            figure(
                svg,
                "a document failing several rules counts once, under its first failing rule",
                table(["rule", "recipe key", "threshold", "first", "all", "alone"], rows, 2),
            )
        )
    figs = figs or [_drop_figure("clean", st)]  # no rule failed: in and out still shown
    # the rules that decide most first (by documents failing them), then rule order;
    # rules switched off (threshold null) draw nothing
    hists = [(n, h) for n, h in st.get("histograms", {}).items() if h.get("threshold") is not None]
    fails = {n: st.get("rules", {}).get(n, {}).get("all", 0) for n, _ in hists}
    for name, h in sorted(hists, key=lambda nh: -fails[nh[0]]):
        figs.append(_histogram_figure(name, h))
    return figs


def _dedup(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    from pipeline.dedup.lsh import s_curve

    figs = [_drop_figure("dedup", st)]
    sizes = st.get("cluster_size_histogram") or {}
    if sizes:
        labels = sorted(sizes, key=int)
        counts = [sizes[k] for k in labels]
        svg = columns("dedup: near-duplicate cluster sizes", None, counts, labels=labels)
        figs.append(
            figure(
                svg,
                f"clusters of documents (size = members, one kept); largest "
                f"{fmt(st.get('largest_cluster_size'))}",
                table(["size", *labels], [["clusters", *counts]]),
            )
        )
    bands, rows = st.get("bands"), st.get("rows")
    if bands and rows:
        pts = [(i / 50, float(s_curve(i / 50, bands, rows))) for i in range(51)]
        thr = st.get("threshold")
        svg = line(
            f"dedup: LSH S-curve, {bands} bands x {rows} rows",
            pts,
            marker=_marker(thr, st.get("threshold_key")),
            xlabel="Jaccard similarity of a pair",
            ylabel="P(pair becomes a candidate)",
        )
        curve = st.get("s_curve") or {}
        figs.append(
            figure(
                svg,
                f"pairs at the threshold are found with probability "
                f"{fmt(float(s_curve(thr, bands, rows))) if thr else '?'}; "
                f"set by {st.get('bands_key', 'dedup.bands')}/{st.get('rows_key', 'dedup.rows')} "
                "or derived from the threshold",
                table(["Jaccard", *curve], [["P(candidate)", *curve.values()]]),
            )
        )
    return figs


def _quality(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("quality", st)]
    h = st.get("score_histogram")
    if h:
        h = {**h, "stat": f"{st.get('score', '')} score", "direction": "min"}
        h.setdefault("key", st.get("threshold_key"))
        figs.append(_histogram_figure("quality", h))
    h = st.get("heuristic_histogram")
    if h:
        figs.append(_histogram_figure("quality", {**h, "stat": "heuristic score"}))
    return figs


def _pack_seq_len(report: dict[str, Any]) -> tuple[int | None, str | None]:
    for s in report.get("stages", []):
        if s.get("stage") == "pack":
            return s["stats"].get("seq_len"), s["stats"].get("seq_len_key")
    return None, None


def _tokenize(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = [_drop_figure("tokenize", st)]
    h = st.get("doc_tokens_histogram")
    if h:
        seq_len, key = _pack_seq_len(report)
        svg = columns(
            "tokenize: document length in tokens",
            h["edges"],
            h["counts"],
            marker=_marker(seq_len, key),
            xlabel="tokens per document (EOS excluded)",
        )
        caption = f"mean {fmt(st.get('doc_tokens_mean'))}, max {fmt(st.get('doc_tokens_max'))}"
        if seq_len:
            caption += f"; documents right of {key} are split across sequences by pack"
        figs.append(figure(svg, caption, hist_table(h["edges"], h["counts"])))
    return figs


def _pack(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = []
    h = st.get("fill_histogram")
    if h:
        edges = [e * 100 for e in h["edges"]]
        svg = columns(
            "pack: sequences by fill", edges, h["counts"], xlabel="% of seq_len holding tokens"
        )
        figs.append(
            figure(
                svg,
                f"{fmt(st.get('sequences'))} sequences of {st.get('seq_len_key', 'seq_len')} = "
                f"{fmt(st.get('seq_len'))}; padding {fmt(st.get('padding_pct'))}%",
                hist_table(edges, h["counts"], "sequences"),
            )
        )
    if "tokens_out" in st and "padding_tokens" in st:
        labels = ["document tokens", "padding tokens"]
        values = [st["tokens_out"], st["padding_tokens"]]
        svg = bars("pack: tokens and padding", labels, [("", values, KEPT)])
        rows = [
            ["sequences", st.get("sequences")],
            ["lower bound (sum of lengths / seq_len)", st.get("lower_bound_sequences")],
            ["fill vs lower bound", st.get("fill_vs_lower_bound")],
            ["docs split across sequences", st.get("docs_split")],
            ["docs split by plain concatenation", st.get("docs_split_concat")],
        ]
        figs.append(figure(svg, f"strategy {st.get('strategy')}", table(["", "value"], rows)))
    return figs or [_drop_figure("pack", st)]


def _shard(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    figs = []
    for sub in ("train", "eval"):
        sizes = st.get(f"shard_sizes_{sub}")
        if not sizes:
            continue
        shown = sizes[:200]
        labels = [str(i) for i in range(len(shown))]
        svg = columns(f"shard: {sub} shard sizes", None, shown, labels=labels, xlabel="shard")
        caption = f"{len(sizes)} shard(s), {fmt(sum(sizes))} sequences"
        caption += f" (first {len(shown)} drawn)" if len(shown) < len(sizes) else ""
        caption += f"; {st.get('shard_size_key', 'shard_size')} = {fmt(st.get('shard_size'))}"
        figs.append(figure(svg, caption, table(["shard", *labels], [["sequences", *shown]])))
    quality = {k: v for k, v in st.items() if k.startswith("shuffle_")}
    if quality:
        svg = bars(
            "shard: shuffle quality (train order)",
            list(quality),
            [("", [abs(float(v)) for v in quality.values()], KEPT)],
        )
        figs.append(
            figure(
                svg,
                "spearman near 0 = order unrelated to the input; same-source ratio near 1 and "
                "share deviation near 0 = shards mixed like the whole (bars show |value|)",
                table(["", "value"], [[k, v] for k, v in quality.items()]),
            )
        )
    if st.get("sequences_per_source"):
        figs.append(
            _dict_figure(
                "shard: sequences per source", st["sequences_per_source"], "sequences", "selected"
            )
        )
    return figs


def _generic(st: dict[str, Any], report: dict[str, Any]) -> list[str]:
    if "docs_in" in st and "docs_out" in st:
        return [_drop_figure("stage", st)]
    nums = {k: v for k, v in st.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return [_dict_figure("numbers", nums, "value", "scalar statistics")] if nums else []


SECTIONS: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[str]]] = {
    "download": _download,
    "clean": _clean,
    "dedup": _dedup,
    "quality": _quality,
    "tokenize": _tokenize,
    "pack": _pack,
    "shard": _shard,
}


# ---------------------------------------------------------------- overview and page


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
        for reason, n in _dropped(s.get("stats", {})).items()
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
        figs = SECTIONS.get(s["stage"], _generic)(st, report)
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


__all__ = ["HTML_NAME", "REPORT_NAME", "render_html", "section_ids", "write_html"]
