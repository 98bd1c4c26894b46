"""Crash consistency: a run killed at any point between two writes (the runner's or a stage's),
then re-run, ends with the same outputs, manifest and report as an uninterrupted run.

The runner and the shared writers call `io.crash_point` between any two writes. In-process,
a hook copies the run folder at every point: that copy is exactly what a kill -9 at that
instant leaves on disk (workers=1: every write happens in this process, in order). A few points
are also hit for real, in a subprocess that os._exit()s there (PIPELINE_CRASH_AT=N).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import make_recipe
from pipeline import io
from pipeline.report import load_report
from pipeline.report.html import HTML_NAME, render_html
from pipeline.run.runner import run_recipe

FIRST = {"download": {"source": "toy", "max_docs": 60, "docs_per_part": 20}, "clean": {}}
SECOND = {**FIRST, "clean": {"min_words": 60}}  # a changed clean: its old output is replaced
IGNORED = {".lock", ".input_hashes.json", ".output_hashes.json"}


def _timeless(obj):
    """Drop what depends on the clock: seconds, rates, finish times."""
    if isinstance(obj, dict):
        return {
            k: _timeless(v)
            for k, v in obj.items()
            if k not in ("seconds", "finished_at") and not k.endswith("_per_s")
        }
    if isinstance(obj, list):
        return [_timeless(v) for v in obj]
    return obj


def state(run_dir: Path) -> dict[str, object]:
    """Every file of the run folder: bytes, or for manifest and report their timeless JSON, and
    for report.html (it shows timings too) whether it is the rendering of the report there."""
    out: dict[str, object] = {}
    for p in io.iter_files(run_dir):
        rel = p.relative_to(run_dir).as_posix()
        if rel in IGNORED:
            continue
        if rel in ("manifest.json", "pipeline_report.json"):
            out[rel] = _timeless(json.loads(p.read_text()))
        elif rel == HTML_NAME:
            out[rel] = p.read_text(encoding="utf-8") == render_html(load_report(run_dir))
        else:
            out[rel] = p.read_bytes()
    return out


def snapshots(run_dir: Path, into: Path, stages: dict) -> tuple[list[tuple[Path, str]], dict]:
    """Run `stages` uninterrupted, copying the run folder at every crash point; returns the
    copies (with the point's label) and the final state."""
    shots: list[tuple[Path, str]] = []

    def copy(count: int, label: str) -> None:
        dest = into / f"{count:04d}"
        if run_dir.exists():
            shutil.copytree(run_dir, dest, symlinks=True)
        else:
            dest.mkdir(parents=True)
        shots.append((dest, label))

    io.CRASH_HOOK.append(copy)
    try:
        run_recipe(make_recipe(run_dir, stages), progress=False)
    finally:
        io.CRASH_HOOK.remove(copy)
    return shots, state(run_dir)


@pytest.mark.parametrize("scenario", ["fresh", "replace"])
def test_killed_at_every_point_then_rerun_matches_uninterrupted(tmp_path, scenario):
    """fresh: a first run of download + clean. replace: clean re-run with a changed config
    over a finished run (its old output is moved aside and replaced)."""
    run_dir = tmp_path / "run"
    if scenario == "replace":
        run_recipe(make_recipe(run_dir, FIRST), progress=False)
    shots, want = snapshots(run_dir, tmp_path / "shots", FIRST if scenario == "fresh" else SECOND)
    assert len(shots) >= (20 if scenario == "fresh" else 10)
    labels = " | ".join(label for _, label in shots)
    for needed in ("before renaming .tmp-clean", "manifest.json written", "after the manifest"):
        assert needed in labels
    for shot, label in shots:
        run_recipe(make_recipe(shot, FIRST if scenario == "fresh" else SECOND), progress=False)
        got = state(shot)
        assert got.keys() == want.keys(), f"after a crash at '{label}'"  # no leftovers either
        for key, value in want.items():
            assert got[key] == value, f"{key} differs after a crash at '{label}'"


def _cli(recipe: Path, env: dict) -> subprocess.Popen:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src, **env}
    cmd = [sys.executable, "-m", "pipeline", "data", "--config", str(recipe), "-q"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_real_kill_at_runner_points_then_rerun(tmp_path):
    """os._exit in a real process: mid-stage (a half-filled .tmp-clean), inside the manifest
    write (temp written, not renamed), inside the report write, after the commit, and inside
    the report.html write that ends the run."""
    ref = tmp_path / "ref"
    shots, want = snapshots(ref, tmp_path / "shots", FIRST)
    labels = [label for _, label in shots]
    mid = labels.index(
        "before writing part-00001.parquet", labels.index("clean: before mkdir .tmp-clean")
    )
    rename = labels.index("clean: before renaming .tmp-clean into place")
    manifest = labels.index("manifest.json written, before its rename", rename)
    report = len(labels) - 1 - labels[::-1].index("pipeline_report.json written, before its rename")
    points = [mid + 1, manifest + 1, report + 1, len(labels)]  # 1-based; last: report.html's
    assert labels[-1] == "report.html written, before its rename"
    procs = {}
    for n in points:  # side by side: each pays the interpreter start-up
        recipe = tmp_path / f"kill{n}.yaml"
        raw = {"name": "test", "seed": 7, "out_dir": str(tmp_path / f"kill{n}"), **FIRST}
        recipe.write_text(yaml.safe_dump(raw))
        procs[n] = _cli(recipe, {io.CRASH_ENV: str(n)})
    for n, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 86 and f"crash point {n}" in err, err
        run_dir = tmp_path / f"kill{n}"
        left = [
            p.name for p in run_dir.iterdir() if p.name.startswith(".") and p.name not in IGNORED
        ]
        assert left, "the kill left a temp folder or file behind"  # removed by the re-run:
        run_recipe(make_recipe(run_dir, FIRST), progress=False)
        got = state(run_dir)
        got["manifest.json"]["report"]["recipe"]["path"] = ""  # type: ignore[index]
        got["pipeline_report.json"]["recipe"]["path"] = ""  # type: ignore[index]
        assert got == want, f"after a kill at point {n} ({labels[n - 1]})"


def test_lost_or_damaged_report_is_rebuilt_without_rerunning(tmp_path, caplog):
    run_dir = tmp_path / "run"
    run_recipe(make_recipe(run_dir, FIRST), progress=False)
    want = state(run_dir)
    for damage in (None, "[]", '{"stages": [{"x": 1}]}', "{not json"):
        report = run_dir / "pipeline_report.json"
        report.unlink()
        if damage is not None:
            report.write_text(damage)
        items = run_recipe(make_recipe(run_dir, FIRST), progress=False)
        assert {i.action for i in items} == {"skip"}
        assert state(run_dir) == want


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl lock")
def test_a_folder_in_use_is_refused(tmp_path):
    """Two `pipeline data` in one run folder would sweep each other's temp folders."""
    import fcntl

    from pipeline.errors import PipelineError

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with open(run_dir / ".lock", "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # as a live run holds it
        with pytest.raises(PipelineError, match="another `pipeline data` is running"):
            run_recipe(make_recipe(run_dir, FIRST), progress=False)
    items = run_recipe(make_recipe(run_dir, FIRST), progress=False)  # released: runs
    assert {i.action for i in items} == {"run"}
