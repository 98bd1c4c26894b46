"""Runner: skip, force, --from/--until/--only, dry-run, manifest and report invariants, crashes."""

from __future__ import annotations

import json

import pytest

import pipeline.stages as stages_mod
from fake_stages import LOWER, calls
from helpers import make_recipe
from pipeline.errors import PipelineError, RecipeError
from pipeline.io import sha256_file
from pipeline.manifest import Manifest
from pipeline.report import load_report
from pipeline.run.runner import run_recipe

DOWNLOAD = {"source": "toy", "max_docs": 300, "docs_per_part": 100}


@pytest.fixture(autouse=True)
def fake_clean(monkeypatch):
    monkeypatch.setitem(stages_mod.STAGES, "clean", LOWER)


def recipe(tmp_path, clean=None, **run):
    return make_recipe(tmp_path / "run", {"download": DOWNLOAD, "clean": clean or {}}, **run)


def actions(items):
    return {i.name: i.action for i in items}


def test_second_run_skips_everything(tmp_path, caplog):
    r = recipe(tmp_path)
    assert actions(run_recipe(r, progress=False)) == {"download": "run", "clean": "run"}
    with caplog.at_level("INFO", logger="pipeline"):
        assert actions(run_recipe(r, progress=False)) == {"download": "skip", "clean": "skip"}
    assert "[clean] skipped: up to date" in caplog.text
    assert calls(r.run.out_dir) == 1


def test_config_change_reruns_that_stage_only(tmp_path):
    run_recipe(recipe(tmp_path), progress=False)
    items = run_recipe(recipe(tmp_path, {"drop_prefix": "toy-0000"}), progress=False)
    assert actions(items) == {"download": "skip", "clean": "run"}


def test_upstream_change_reruns_downstream(tmp_path):
    run_recipe(recipe(tmp_path), progress=False)
    r2 = make_recipe(tmp_path / "run", {"download": {**DOWNLOAD, "max_docs": 200}, "clean": {}})
    assert actions(run_recipe(r2, progress=False)) == {"download": "run", "clean": "run"}


def test_seed_change_reruns(tmp_path):
    run_recipe(recipe(tmp_path), progress=False)
    assert actions(run_recipe(recipe(tmp_path, seed=8), progress=False))["download"] == "run"


def test_force_reruns_with_identical_bytes(tmp_path):
    r = recipe(tmp_path)
    run_recipe(r, progress=False)
    before = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert actions(run_recipe(r, force=True, progress=False)) == {"download": "run", "clean": "run"}
    after = json.loads((tmp_path / "run" / "manifest.json").read_text())
    for name in ("download", "clean"):
        assert before["stages"][name]["outputs"] == after["stages"][name]["outputs"]


def test_tampered_output_is_rerun(tmp_path):
    r = recipe(tmp_path)
    run_recipe(r, progress=False)
    part = tmp_path / "run" / "clean" / "part-00001.parquet"
    part.write_bytes(part.read_bytes()[:-10])
    assert actions(run_recipe(r, progress=False)) == {"download": "skip", "clean": "run"}
    assert Manifest.load(tmp_path / "run").outputs_intact("clean")


def test_from_until_only(tmp_path):
    r = recipe(tmp_path)
    assert actions(run_recipe(r, until="download", progress=False)) == {
        "download": "run",
        "clean": "off",
    }
    assert not (tmp_path / "run" / "clean").exists()
    assert actions(run_recipe(r, start="clean", progress=False)) == {
        "download": "reuse",
        "clean": "run",
    }
    assert actions(run_recipe(r, only="clean", force=True, progress=False)) == {
        "download": "reuse",
        "clean": "run",
    }
    assert calls(r.run.out_dir) == 2


def test_from_needs_upstream_done(tmp_path):
    with pytest.raises(PipelineError, match="stage 'download' has no up-to-date output"):
        run_recipe(recipe(tmp_path), start="clean", progress=False)


def test_from_unknown_stage(tmp_path):
    with pytest.raises(RecipeError, match="--only: stage 'dedup' is not enabled"):
        run_recipe(recipe(tmp_path), only="dedup", progress=False)


def test_dry_run_plans_and_writes_nothing(tmp_path):
    r = recipe(tmp_path)
    items = run_recipe(r, dry_run=True, progress=False)
    assert actions(items) == {"download": "run", "clean": "run"}
    assert not (tmp_path / "run").exists()
    run_recipe(r, until="download", progress=False)
    items = run_recipe(r, dry_run=True, progress=False)
    assert actions(items) == {"download": "skip", "clean": "run"}
    assert not (tmp_path / "run" / "clean").exists()


def test_manifest_records_every_output_with_hash(tmp_path):
    r = recipe(tmp_path)
    run_recipe(r, progress=False)
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    for name, entry in m["stages"].items():
        assert entry["fingerprint"] and entry["finished_at"]
        files = sorted(
            p.relative_to(tmp_path / "run").as_posix()
            for p in (tmp_path / "run" / name).rglob("*")
            if p.is_file()
        )
        assert [o["path"] for o in entry["outputs"]] == files
        for o in entry["outputs"]:
            path = tmp_path / "run" / o["path"]
            assert o["sha256"] == sha256_file(path) and o["bytes"] == path.stat().st_size
    assert sum(o["records"] for o in m["stages"]["download"]["outputs"]) == 300


def test_report_sections_balance_and_are_replaced(tmp_path):
    r = recipe(tmp_path, {"drop_prefix": "toy-00000"})
    run_recipe(r, progress=False)
    run_recipe(r, force=True, progress=False)
    rep = load_report(tmp_path / "run")
    assert [s["stage"] for s in rep["stages"]] == ["download", "clean"]
    assert rep["seed"] == 7
    for s in rep["stages"]:
        st = s["stats"]
        dropped = sum(v for k, v in st.items() if k.startswith("dropped_"))
        assert st["docs_in"] == st["docs_out"] + dropped
        assert st["docs_per_s"] > 0 and s["seconds"] >= 0
    clean = rep["stages"][1]["stats"]
    assert clean["dropped_prefix"] == 10  # toy-000000 .. toy-000009


def test_empty_upstream_is_a_clear_error(tmp_path):
    stages = {"download": DOWNLOAD, "clean": {"drop_prefix": "toy-"}, "dedup": {}}
    with pytest.raises(PipelineError, match="dedup: nothing to do, clean left no records"):
        run_recipe(make_recipe(tmp_path / "run", stages), progress=False)  # clean drops all
    assert "clean" in Manifest.load(tmp_path / "run").stages  # its work is kept for inspection


def test_crash_leaves_no_partial_output_and_rerun_matches(tmp_path):
    crash = recipe(tmp_path, {"fail_after_parts": 1})
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_recipe(crash, progress=False)
    run_dir = tmp_path / "run"
    assert not (run_dir / "clean").exists()  # the temp folder is kept for resume (test_resume)
    assert "clean" not in Manifest.load(run_dir).stages
    # report.html shows what finished: the download section, no clean section
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="stage-download"' in page and 'id="stage-clean"' not in page
    run_recipe(recipe(tmp_path), progress=False)
    assert 'id="stage-clean"' in (run_dir / "report.html").read_text(encoding="utf-8")
    resumed = json.loads((run_dir / "manifest.json").read_text())["stages"]
    fresh_dir = tmp_path / "fresh"
    run_recipe(make_recipe(fresh_dir, {"download": DOWNLOAD, "clean": {}}), progress=False)
    fresh = json.loads((fresh_dir / "manifest.json").read_text())["stages"]
    for name in ("download", "clean"):
        assert [o["sha256"] for o in resumed[name]["outputs"]] == [
            o["sha256"] for o in fresh[name]["outputs"]
        ]


def test_workers_1_and_2_byte_identical(tmp_path):
    shas = []
    for workers in (1, 2):
        r = make_recipe(
            tmp_path / f"w{workers}", {"download": DOWNLOAD, "clean": {}}, workers=workers
        )
        run_recipe(r, progress=False)
        m = json.loads((tmp_path / f"w{workers}" / "manifest.json").read_text())
        shas.append({n: [o["sha256"] for o in e["outputs"]] for n, e in m["stages"].items()})
        rep = load_report(tmp_path / f"w{workers}")
        assert rep["stages"][1]["stats"]["worker_pids"] == workers
    assert shas[0] == shas[1]


def test_a_report_html_that_cannot_be_drawn_warns_and_the_run_succeeds(
    tmp_path, monkeypatch, caplog
):
    import pipeline.run.runner as runner_mod

    def broken(run_dir):
        raise ValueError("invalid literal for int() with base 10: '5-8'")

    monkeypatch.setattr(runner_mod, "write_html", broken)
    r = recipe(tmp_path)
    with caplog.at_level("WARNING", logger="pipeline"):
        assert actions(run_recipe(r, progress=False)) == {"download": "run", "clean": "run"}
    assert "report.html not written (ValueError" in caplog.text
    assert [s["stage"] for s in load_report(r.run.out_dir)["stages"]] == ["download", "clean"]
