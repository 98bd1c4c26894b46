"""The per-stage charts of report.html."""

from __future__ import annotations

from pipeline.report_sections import _dropped_side


def test_the_dropped_side_of_a_threshold():
    """min rules drop below the line, max rules above it; no threshold, nothing orange."""
    edges = [0, 25, 50, 100]
    assert _dropped_side(edges, 50, "min") == [True, True, False]
    assert _dropped_side(edges, 50, "max") == [False, False, True]
    assert _dropped_side(edges, None, "max") == [False, False, False]


def test_threshold_captions_name_the_recipe_key_and_its_value():
    """A line the key sets directly reads `key = value`; one it sets indirectly (a switch, a
    keep fraction that yields a score) shows the line's value and the key's own."""
    from pipeline.report_sections import _marker

    report = {
        "recipe": {
            "config": {
                "clean": {"min_words": 50, "drop_empty": True},
                "quality": {"keep_fraction": 0.8},
            }
        }
    }
    assert _marker(50.0, "clean.min_words", report) == (50.0, "clean.min_words = 50")
    assert _marker(0.5, "clean.drop_empty", report) == (0.5, "0.5 (clean.drop_empty = true)")
    assert _marker(0.62, "quality.keep_fraction", report)[1] == "0.62 (quality.keep_fraction = 0.8)"
    assert _marker(3, "dedup.ngram", report)[1] == "dedup.ngram = 3"  # not in this recipe
    assert _marker(None, "clean.min_words", report) is None
