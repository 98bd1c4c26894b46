"""Extending the pipeline through the public registries only: a new source (CSV) and a new
stage (`shout`, slotted after clean) run end to end, as docs/overview.md walks through."""

from __future__ import annotations

import csv
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from helpers import make_recipe
from pipeline.config import bounded
from pipeline.errors import RecipeError
from pipeline.parts import read_table, write_kept_and_rejected
from pipeline.report import load_report
from pipeline.run.runner import run_recipe
from pipeline.sources import Record, Source, register_source, unregister_source
from pipeline.sources.files import expand_paths
from pipeline.stage import DocCounts, Stage, StageContext, StageResult
from pipeline.stages import STAGES, register_stage, unregister_stage


def read_csv(cfg: Any, seed: int, progress: bool) -> Iterator[Record]:
    """One document per row of `download.path`'s CSV files; column `download.text_field`."""
    for path in expand_paths(cfg.path):
        with open(path, newline="", encoding="utf-8") as f:
            for i, row in enumerate(csv.DictReader(f)):
                yield Record(f"{path.name}:{i}", row[cfg.text_field], "csv")


@dataclass(frozen=True)
class ShoutConfig:
    min_chars: int = bounded(10, ge=0, doc="documents shorter than this are dropped")


def shout_part(item: tuple[int, str], cfg: ShoutConfig, out_dir: str) -> DocCounts:
    """One part: upper-case the kept documents; short ones go to rejected/ as `too_short`."""
    index, path = item
    table = read_table(Path(path))
    keep = pc.greater_equal(pc.utf8_length(table.column("text")), cfg.min_chars).to_numpy()
    kept = table.filter(keep)
    kept = kept.set_column(1, "text", pc.utf8_upper(kept.column("text")))
    reasons = [["too_short"]] * int((~keep).sum())
    _, counts = write_kept_and_rejected(Path(out_dir), index, table, keep, reasons, kept)
    return counts


def run_shout(cfg: ShoutConfig, ctx: StageContext) -> StageResult:
    fn = functools.partial(shout_part, cfg=cfg, out_dir=str(ctx.out_dir))
    counts = ctx.executor.map(fn, [(i, str(p)) for i, p in enumerate(ctx.input_parts)])
    return StageResult(list_outputs(ctx.out_dir), {"min_chars": cfg.min_chars}, counts)


def list_outputs(out_dir: Path) -> list[str]:
    return sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*.parquet"))


@pytest.fixture
def registered():
    register_source(Source("csv", read_csv, "CSV files", kind="files", needs_path=True))
    register_stage(Stage("shout", ShoutConfig, run_shout, needs=("download",)), after="clean")
    yield
    unregister_stage("shout")
    unregister_source("csv")


def test_a_new_source_and_stage_run_end_to_end(tmp_path, registered):
    data = tmp_path / "docs.csv"
    rows = ["a short one", "tiny", "another document of words", "a short one"]
    data.write_text("text\n" + "\n".join(rows) + "\n", encoding="utf-8")
    assert list(STAGES)[:4] == ["download", "clean", "shout", "dedup"]
    stages = {
        "download": {"source": "csv", "path": str(data), "docs_per_part": 2},
        "shout": {"min_chars": 5},
        "dedup": {"near": False},
    }
    recipe = make_recipe(tmp_path / "run", stages)
    assert [i.action for i in run_recipe(recipe, progress=False)] == ["run"] * 3
    report = {s["stage"]: s["stats"] for s in load_report(tmp_path / "run")["stages"]}
    assert list(report) == ["download", "shout", "dedup"]
    assert {k: v for k, v in report["shout"].items() if not k.endswith("_per_s")} == {
        "docs_in": 4,  # summed by the runner from the parts' DocCounts
        "docs_out": 3,
        "dropped_too_short": 1,
        "bytes_in": 51,
        "bytes_out": 47,
        "min_chars": 5,
    }
    assert report["dedup"]["docs_in"] == 3 and report["dedup"]["dropped_exact_dup"] == 1
    texts = read_table(tmp_path / "run" / "dedup" / "part-00000.parquet").column("text")
    assert texts.to_pylist() == ["A SHORT ONE"]
    rejected = read_table(tmp_path / "run" / "shout" / "rejected" / "part-00000.parquet")
    assert rejected.column("reasons").to_pylist() == [["too_short"]]


def test_registration_is_checked(tmp_path, registered):
    with pytest.raises(RecipeError, match=r"^shout: has no input: every run starts with"):
        make_recipe(tmp_path, {"shout": {}})
    with pytest.raises(RecipeError, match=r"download\.source: got 'tsv', expected one of .*csv"):
        make_recipe(tmp_path, {"download": {"source": "tsv"}})
    with pytest.raises(ValueError, match="already registered"):
        register_source(Source("csv", read_csv, "again"))
    late = Stage("early", ShoutConfig, run_shout, needs=("shard",))
    with pytest.raises(ValueError, match="reads 'shard', which is not registered before it"):
        register_stage(late, after="download")
    assert "early" not in STAGES
