"""The SVG helpers of report.html: geometry on worked examples, well-formed output."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pipeline.report.svg import _position, columns


def test_threshold_line_sits_at_its_bin_edge():
    """Edges [0, 50, 100, 1000] make 3 equal-width columns; 50 is the right side of column 0
    (position 1.0), 550 halfway through column 2 (2.5); beyond the edges clamps."""
    edges = [0, 50, 100, 1000]
    assert _position(edges, 50) == 1.0
    assert _position(edges, 550) == 2.5
    assert (_position(edges, -5), _position(edges, 5000)) == (0.0, 3.0)
    svg = columns("t", edges, [1, 2, 3], marker=(50, "clean.min_words = 50"))
    root = ET.fromstring(svg)
    dashed = [el for el in root.iter("line") if el.get("stroke-dasharray")]
    # plot from x=48 over 600 - 48 - 30 = 522 px: column width 174, the line at 48 + 174
    assert [float(el.get("x1")) for el in dashed] == [222.0]
    assert "clean.min_words = 50" in "".join(root.itertext())
