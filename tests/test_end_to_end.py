"""The shipped recipes, end to end, in a tmp dir: what `make demo` runs, at a smaller size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.recipe import load_recipe

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
SMALL = ["--set", "download.max_docs=150", "-q"]


def manifest_hashes(run_dir: Path) -> dict[str, list[str]]:
    m = json.loads((run_dir / "manifest.json").read_text())
    return {name: [o["sha256"] for o in e["outputs"]] for name, e in m["stages"].items()}


# pretrain_*.yaml are not data recipes: tests/train/test_config.py loads them
@pytest.mark.parametrize("name", sorted(p.name for p in RECIPES.glob("data_*.yaml")))
def test_every_shipped_recipe_validates(name):
    recipe = load_recipe(RECIPES / name)
    assert recipe.stages


def test_demo_recipe_end_to_end_and_rerun_skips(tmp_path, capsys):
    out = tmp_path / "demo"
    recipe = str(RECIPES / "data_demo.yaml")
    assert main(["data", "--config", recipe, "--out-dir", str(out), *SMALL]) == 0
    report = json.loads((out / "pipeline_report.json").read_text())
    enabled = list(load_recipe(RECIPES / "data_demo.yaml").stages)
    assert [s["stage"] for s in report["stages"]] == enabled
    for s in report["stages"]:
        st = s["stats"]
        if "docs_in" in st:
            dropped = sum(v for k, v in st.items() if k.startswith("dropped_"))
            assert st["docs_in"] == st["docs_out"] + dropped, s["stage"]
    first = manifest_hashes(out)
    assert set(first) == set(enabled)
    assert main(["data", "--config", recipe, "--out-dir", str(out), *SMALL]) == 0
    assert manifest_hashes(out) == first
    assert main(["report", str(out)]) == 0


def test_demo_recipe_same_bytes_for_1_and_2_workers(tmp_path):
    recipe = str(RECIPES / "data_demo.yaml")
    hashes = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        assert (
            main(["data", "--config", recipe, "--out-dir", str(out), "--workers", workers, *SMALL])
            == 0
        )
        hashes.append(manifest_hashes(out))
    assert hashes[0] == hashes[1]
