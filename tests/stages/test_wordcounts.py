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
    assert final == [str(tmp_path / "level3-00000.parquet")]
    assert load_counts(final[0]) == dict(sum(tables, Counter()))
    assert [p.name for p in tmp_path.iterdir()] == ["level3-00000.parquet"]
    assert tree_reduce(Executor(1), [], tmp_path, "merge") == []


def test_tree_reduce_splits_the_last_merge_into_disjoint_shares(tmp_path, monkeypatch):
    """shares=3: 7 files -> 3 (FAN_IN) -> 3 shares by piece byte length % 3, disjoint, whose
    union equals one Counter's totals."""
    rng = random.Random(5)
    words = ["a", "bb", " cat", " naïve", "\ud800lone", " 42", "!!!", "word"]
    tables = [Counter(rng.choices(words, k=rng.randint(1, 40))) for _ in range(7)]
    paths = []
    for i, t in enumerate(tables):
        paths.append(str(tmp_path / f"level0-{i:05d}.parquet"))
        save_counts(tmp_path / f"level0-{i:05d}.parquet", t)
    monkeypatch.setattr(wordcounts, "FAN_IN", 3)
    with Executor(2) as ex:
        final = tree_reduce(ex, paths, tmp_path, "merge", shares=3)
    assert [p.rsplit("/", 1)[1] for p in final] == [f"level2-{j:05d}.parquet" for j in range(3)]
    got = [load_counts(p) for p in final]
    for j, share in enumerate(got):
        assert share and all(len(w.encode("utf-8", "surrogatepass")) % 3 == j for w in share)
    union = {w: n for share in got for w, n in share.items()}
    assert sum(len(share) for share in got) == len(union)
    assert union == dict(sum(tables, Counter()))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.rsplit("/", 1)[1] for p in final)
