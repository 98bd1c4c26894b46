"""Small inline-SVG charts for report.html: pure functions from numbers to an `<svg>` string,
and the <figure>/<table> markup that puts the numbers behind a chart under it.

Well-formed XML (every value escaped, no namespaces or links), so the page opens offline and
parses as XHTML. Sizes are in CSS pixels. No axis library: bars, columns with a marked
threshold, and a line; each chart gets a <title> for screen readers and hover.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH = 600
KEPT = "#4c72b0"  # bars of kept documents / plain values
DROPPED = "#dd8452"  # bars on the dropped side of a threshold
SECOND = "#55a868"  # the second run in a comparison
INK = "#222"
GRID = "#ddd"


def esc(value: object) -> str:
    """Text or attribute value, XML-escaped (quotes included)."""
    return escape(str(value), quote=True)


def fmt(value: object) -> str:
    """A number as people read it: 1,234 / 0.123 / 1.2e-06; anything else as str."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0 or math.isnan(value):
            return f"{value:g}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 0.001:
            return f"{value:.4g}"
        return f"{value:.2g}"
    return str(value)


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{esc(title)}"><title>{esc(title)}</title>'
        + "".join(body)
        + "</svg>"
    )


def _text(x: float, y: float, text: object, anchor: str = "start", size: int = 11, **kw) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{esc(v)}"' for k, v in kw.items())
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{extra}>'
        f"{esc(text)}</text>"
    )


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str = "") -> str:
    title = f"<title>{esc(tip)}</title>" if tip else ""
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
        f'fill="{fill}">{title}</rect>'
    )


def bars(
    title: str,
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None], str]],
    unit: str = "",
) -> str:
    """Horizontal bars, one row per label, one bar per series (name, values, colour) in a row;
    a None value draws nothing (absent in that run). The value is written after each bar."""
    label_w = min(260, 12 + 7 * max((len(str(lb)) for lb in labels), default=4))
    row_h = 8 + 14 * len(series)
    legend = 18 if len(series) > 1 else 0
    height = 28 + legend + row_h * max(len(labels), 1) + 8
    top = max((v for _, vals, _ in series for v in vals if v is not None), default=0) or 1
    plot_w = WIDTH - label_w - 90
    body = [_text(8, 16, title, size=13, font_weight="bold")]
    if legend:
        x = label_w
        for name, _, colour in series:
            body += [_rect(x, 24, 10, 10, colour), _text(x + 14, 33, name)]
            x += 24 + 7 * len(name)
    y = 28 + legend
    for i, label in enumerate(labels):
        body.append(_text(label_w - 6, y + row_h / 2 + 4, label, anchor="end"))
        for j, (name, vals, colour) in enumerate(series):
            v = vals[i]
            if v is None:
                continue
            by = y + 4 + 14 * j
            w = plot_w * v / top
            tip = f"{label} ({name}): {fmt(v)}{unit}" if len(series) > 1 else f"{label}: {fmt(v)}"
            body.append(_rect(label_w, by, w, 11, colour, tip))
            body.append(_text(label_w + w + 4, by + 10, f"{fmt(v)}{unit}", size=10))
        y += row_h
    return _svg(WIDTH, height, title, body)


def _position(edges: Sequence[float], value: float) -> float:
    """Where `value` falls on a column axis of len(edges) - 1 equal-width bins (0..bins)."""
    if value <= edges[0]:
        return 0.0
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        if value <= hi:
            return i + (value - lo) / (hi - lo) if hi > lo else float(i)
    return float(len(edges) - 1)


def columns(
    title: str,
    edges: Sequence[float] | None,
    counts: Sequence[float],
    labels: Sequence[str] | None = None,
    marker: tuple[float, str] | None = None,
    dropped: Sequence[bool] | None = None,
    xlabel: str = "",
) -> str:
    """Vertical columns of equal width: a histogram over `edges` (bins need not be equal; each
    edge is labelled) or categories with `labels`. `marker` = (value on the edge axis, caption)
    draws a dashed threshold line there; `dropped[i]` colours column i as dropped."""
    n = len(counts)
    left, right, top_pad, bottom = 48, 30, 40, 44
    plot_w, plot_h = WIDTH - left - right, 150
    height = top_pad + plot_h + bottom
    top = max(counts, default=0) or 1
    col_w = plot_w / max(n, 1)
    if edges is None:
        col_w = min(col_w, 48.0)  # a few categories (cluster sizes, shards): no wall of colour
    body = [_text(8, 16, title, size=13, font_weight="bold")]
    base = top_pad + plot_h
    for frac in (0.0, 0.5, 1.0):  # light grid with the count it stands for
        gy = base - plot_h * frac
        body.append(
            f'<line x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" y2="{gy:.1f}" '
            f'stroke="{GRID}" stroke-width="1"/>'
        )
        tick = top * frac if top < 10 else round(top * frac)
        body.append(_text(left - 4, gy + 4, fmt(tick), anchor="end", size=9))
    for i, c in enumerate(counts):
        h = plot_h * c / top
        colour = DROPPED if dropped is not None and dropped[i] else KEPT
        if edges is not None:
            tip = f"[{fmt(edges[i])}, {fmt(edges[i + 1])}): {fmt(c)}"
        else:
            tip = f"{labels[i] if labels else i}: {fmt(c)}"
        body.append(_rect(left + i * col_w + 1, base - h, max(col_w - 2, 1), h, colour, tip))
    ticks = list(edges) if edges is not None else list(labels or [])
    step = max(1, math.ceil(len(ticks) / 14))  # at most ~14 tick labels
    for i in range(0, len(ticks), step):
        x = left + (i if edges is not None else i + 0.5) * col_w
        body.append(_text(x, base + 14, fmt(ticks[i]), anchor="middle", size=9))
    if xlabel:
        body.append(_text(left + plot_w / 2, base + 34, xlabel, anchor="middle", size=10))
    if marker is not None and edges is not None:
        value, caption = marker
        x = left + _position(edges, value) * col_w
        body.append(
            f'<line x1="{x:.1f}" y1="{top_pad - 12}" x2="{x:.1f}" y2="{base}" stroke="{INK}" '
            'stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
        anchor = "end" if x > left + plot_w * 0.7 else "start"
        body.append(_text(x + (-4 if anchor == "end" else 4), top_pad - 2, caption, anchor=anchor))
    return _svg(WIDTH, height, title, body)


def line(
    title: str,
    points: Sequence[tuple[float, float]],
    marker: tuple[float, str] | None = None,
    xlabel: str = "",
    ylabel: str = "",
) -> str:
    """A line through (x, y) points on [0, 1] x [0, 1] axes, with an optional dashed x marker."""
    left, right, top_pad, bottom = 48, 16, 40, 40
    plot_w, plot_h = WIDTH - left - right, 160
    height = top_pad + plot_h + bottom
    base = top_pad + plot_h
    body = [_text(8, 16, title, size=13, font_weight="bold")]
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        gy, gx = base - plot_h * frac, left + plot_w * frac
        body.append(
            f'<line x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" y2="{gy:.1f}" '
            f'stroke="{GRID}" stroke-width="1"/>'
        )
        body.append(_text(left - 4, gy + 4, f"{frac:g}", anchor="end", size=9))
        body.append(_text(gx, base + 14, f"{frac:g}", anchor="middle", size=9))
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{left + plot_w * x:.1f},{base - plot_h * y:.1f}"
        for i, (x, y) in enumerate(points)
    )
    body.append(f'<path d="{path}" fill="none" stroke="{KEPT}" stroke-width="2"/>')
    if xlabel:
        body.append(_text(left + plot_w / 2, base + 32, xlabel, anchor="middle", size=10))
    if ylabel:
        body.append(_text(left + 4, top_pad - 4, ylabel, size=10))
    if marker is not None:
        value, caption = marker
        x = left + plot_w * min(max(value, 0.0), 1.0)
        body.append(
            f'<line x1="{x:.1f}" y1="{top_pad}" x2="{x:.1f}" y2="{base}" stroke="{INK}" '
            'stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
        anchor = "end" if value > 0.7 else "start"
        body.append(_text(x + (-4 if anchor == "end" else 4), top_pad + 12, caption, anchor=anchor))
    return _svg(WIDTH, height, title, body)


# ---------------------------------------------------------------- the numbers under a chart


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
