"""Word counts as files merged by a tree of tasks: same totals as one Counter, any grouping."""

from __future__ import annotations

import random
from collections import Counter

from pipeline.executor import Executor
from pipeline.stages.tokenize import wordcounts
from pipeline.stages.tokenize.wordcounts import load_counts, save_counts, tree_reduce


def test_tree_reduce_equals_one_counter_and_cleans_up(tmp_path, monkeypatch):
    rng = random.Random(3)
    words = ["the", " cat", " naïve", "\ud800lone", " 42", "!"]
    tables = [Counter(rng.choices(words, k=rng.randint(0, 40))) for _ in range(11)]
    paths = []
    for i, t in enumerate(tables):
        paths.append(str(tmp_path / f"level0-{i:05d}.parquet"))
        save_counts(tmp_path / f"level0-{i:05d}.parquet", t)
    monkeypatch.setattr(wordcounts, "FAN_IN", 3)  # 11 -> 4 -> 2 -> 1: three levels
    with Executor(2) as ex:
        final = tree_reduce(ex, paths, tmp_path, "merge")
    assert load_counts(final) == dict(sum(tables, Counter()))
    assert [p.name for p in tmp_path.iterdir()] == ["level3-00000.parquet"]
    assert tree_reduce(Executor(1), [], tmp_path, "merge") is None
