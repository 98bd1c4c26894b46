"""A run killed under the layout before the house move (commit 9311ba7: pipeline.runner,
pipeline.quality.writepart, ...) resumes under the new one and ends with the bytes of an
uninterrupted new run. The crashed folder is tests/data/old_layout_crash/run (~200 KB), made by
tests/data/make_old_layout_crash.py: download and clean committed, quality killed before its
second part's write, part 0's task recorded in .tmp-quality/.resume/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from pipeline.recipe import build_recipe
from pipeline.run.runner import run_recipe
from test_runner_crash import state

DATA = Path(__file__).resolve().parent / "data"


def _recipe(run_dir: Path):
    raw = yaml.safe_load((DATA / "old_layout_recipe.yaml").read_text(encoding="utf-8"))
    return build_recipe({**raw, "out_dir": str(run_dir)})


def test_a_run_crashed_under_the_old_layout_resumes_to_the_same_bytes(tmp_path):
    crashed = tmp_path / "crashed"
    shutil.copytree(DATA / "old_layout_crash" / "run", crashed)
    recorded = crashed / ".tmp-quality" / "part-00000.parquet"
    assert (crashed / ".tmp-quality" / ".resume" / "quality_write-0-000000.json").is_file()
    inode = recorded.stat().st_ino
    items = run_recipe(_recipe(crashed), progress=False)
    assert {i.name: i.action for i in items} == {
        "download": "skip",
        "clean": "skip",
        "quality": "run",
    }
    # the part the old code's ledger recorded is kept (renamed into place), not written again
    assert (crashed / "quality" / "part-00000.parquet").stat().st_ino == inode
    assert not (crashed / ".tmp-quality").exists()

    fresh = tmp_path / "fresh"
    run_recipe(_recipe(fresh), progress=False)
    got, want = state(crashed), state(fresh)
    for doc in ("manifest.json", "pipeline_report.json"):  # the recipe's path is the folder's
        for d in (got, want):
            report = d[doc]["report"] if doc == "manifest.json" else d[doc]
            report["recipe"]["path"] = ""  # type: ignore[index]
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == value, f"{key} differs from an uninterrupted run"
