"""The stage contract: what a stage reads of an earlier one (StageInputs) and its context."""

from __future__ import annotations

import pytest

from pipeline.errors import DataError
from pipeline.executor import Executor
from pipeline.stage import DocCounts, StageContext, StageInputs


def test_stage_inputs_parts_side_folders_and_named_files(tmp_path):
    files = ("meta.json", "part-00000.parquet", "part-00001.parquet", "rejected/part-00001.parquet")
    inputs = StageInputs("clean", tmp_path / "clean", files)
    assert inputs.parts == [tmp_path / "clean" / f"part-0000{i}.parquet" for i in (0, 1)]
    assert inputs.under("rejected") == [tmp_path / "clean" / "rejected/part-00001.parquet"]
    assert inputs.file("meta.json") == tmp_path / "clean" / "meta.json"
    with pytest.raises(DataError, match=r"clean/tokenizer.json: missing from the clean stage"):
        inputs.file("tokenizer.json")


def test_from_dir_lists_every_file_and_ctx_reads_the_upstream_parts(tmp_path):
    for rel in ("part-00001.npy", "part-00000.npy", "rejected/part-00000.npy", "meta.json"):
        (tmp_path / "up" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "up" / rel).write_bytes(b"")
    inputs = StageInputs.from_dir("up", tmp_path / "up")
    assert inputs.files == (
        "meta.json",
        "part-00000.npy",
        "part-00001.npy",
        "rejected/part-00000.npy",
    )
    ctx = StageContext("x", tmp_path, tmp_path / "out", 1, {"up": inputs}, "up", Executor(1))
    assert [p.name for p in ctx.input_parts] == ["part-00000.npy", "part-00001.npy"]
    first = StageContext("download", tmp_path, tmp_path / "out", 1, {}, None, Executor(1))
    assert first.input_parts == []


def test_doc_counts_sum_over_parts_in_one_place():
    parts = [
        DocCounts(3, 2, {"b": 1}, 30, 20),
        DocCounts(2, 1, {"a": 1, "b": 0}, 10, 5),
        DocCounts(0, 0, {}),  # an empty part: no bytes measured
    ]
    total = DocCounts.total(parts)
    assert total == DocCounts(5, 3, {"b": 1, "a": 1}, 40, 25)
    assert list(total.as_stats().items()) == [
        ("docs_in", 5),
        ("docs_out", 3),
        ("dropped_a", 1),  # reasons in name order
        ("dropped_b", 1),
        ("bytes_in", 40),
        ("bytes_out", 25),
    ]
    assert DocCounts.total([DocCounts(1, 1)]).as_stats() == {"docs_in": 1, "docs_out": 1}
