"""The per-stage charts of report.html."""

from __future__ import annotations

from pipeline.report.sections import _dropped_side


def test_the_dropped_side_of_a_threshold():
    """min rules drop below the line, max rules above it; no threshold, nothing orange."""
    edges = [0, 25, 50, 100]
    assert _dropped_side(edges, 50, "min") == [True, True, False]
    assert _dropped_side(edges, 50, "max") == [False, False, True]
    assert _dropped_side(edges, None, "max") == [False, False, False]


def test_threshold_captions_name_the_recipe_key_and_its_value():
    """A line the key sets directly reads `key = value`; one it sets indirectly (a switch, a
    keep fraction that yields a score) shows the line's value and the key's own."""
    from pipeline.report.sections import _marker

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


def test_dedup_cluster_sizes_chart_takes_the_bucket_labels_size_histogram_writes():
    """Big corpora have bucketed cluster sizes ('5-8', '17+'); the chart orders them by size
    (a 1 GB run's report.html crashed on int('5-8'))."""
    import numpy as np

    from pipeline.dedup.cluster import size_histogram
    from pipeline.report.sections import stage_figures

    labels = np.repeat(np.arange(6), [2, 3, 6, 9, 40, 2])  # cluster sizes 2, 3, 6, 9, 40, 2
    hist = size_histogram(labels)[0]
    assert {"5-8", "9-16"} <= set(hist) and any(k.endswith(("+", "-64")) for k in hist)
    shuffled = dict(reversed(list(hist.items())))
    stats = {"docs_in": 62, "docs_out": 6, "cluster_size_histogram": shuffled}
    html = "".join(stage_figures("dedup", stats, {"recipe": {"config": {}}}))
    positions = [html.index(f">{k}<") for k in hist]
    assert positions == sorted(positions)
