"""A run killed under the layout before the house move (commit 9311ba7: pipeline.runner, ...)
resumes under the new one and ends with the bytes of an uninterrupted new run. The crashed
folder is tests/data/old_layout_crash/run (24 KB), made by tests/data/make_old_layout_crash.py:
download killed before its second part's write (its temp folder, ledger fingerprint and first
part left behind). Download only: main has since changed clean (v2) and quality (v3), whose old
outputs and ledgers are re-run by design (another fingerprint).
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
    assert (crashed / ".tmp-download" / ".resume" / "stage.json").is_file()
    assert (crashed / ".tmp-download" / "part-00000.parquet").is_file()  # the part before
    items = run_recipe(_recipe(crashed), progress=False)
    assert {i.name: i.action for i in items} == {"download": "run"}
    assert not (crashed / ".tmp-download").exists()

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
