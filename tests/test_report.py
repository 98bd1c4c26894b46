"""The report's table view: summary rows, histograms as bars, rule tables one row per rule."""

from __future__ import annotations

import pytest

from pipeline.report import check_balance, format_report

REPORT = {
    "recipe": {"name": "r"},
    "seed": 3,
    "stages": [
        {
            "stage": "clean",
            "seconds": 1.5,
            "stats": {
                "docs_in": 10,
                "docs_out": 7,
                "dropped_short_v1": 3,
                "rules": {"short_v1": {"first": 3, "all": 4, "alone": 1, "threshold": 50}},
                "histograms": {
                    "short_v1": {
                        "stat": "num_words",
                        "bins": [0, 50, 100],
                        "counts": [3, 7],
                        "threshold": 50,
                    }
                },
            },
        }
    ],
}


def test_table_summary_rule_rows_and_histogram_bars():
    text = format_report(REPORT)
    assert "run: r   seed: 3" in text
    summary = next(line for line in text.splitlines() if line.startswith("clean "))
    assert summary.split()[:4] == ["clean", "10", "7", "3"]
    assert "short_v1  first=3  all=4  alone=1  threshold=50" in text
    assert "num_words [0 |▄█| 100] threshold=50 n=10" in text


def test_balance_check_catches_a_lost_document():
    check_balance({"docs_in": 10, "docs_out": 7, "dropped_a": 3})
    with pytest.raises(AssertionError, match="docs_in 10 != docs_out 7 \\+ dropped 2"):
        check_balance({"docs_in": 10, "docs_out": 7, "dropped_a": 2})
