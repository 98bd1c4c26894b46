"""The per-stage charts of report.html."""

from __future__ import annotations

from pipeline.report_sections import _dropped_side


def test_the_dropped_side_of_a_threshold():
    """min rules drop below the line, max rules above it; no threshold, nothing orange."""
    edges = [0, 25, 50, 100]
    assert _dropped_side(edges, 50, "min") == [True, True, False]
    assert _dropped_side(edges, 50, "max") == [False, False, True]
    assert _dropped_side(edges, None, "max") == [False, False, False]
