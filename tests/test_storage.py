"""A run folder on a URL (pipeline.run.storage): same bytes as a local run, resume and crash
consistency on the URL, one clear line when the URL cannot be used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline.stages.clean as clean_stage
from helpers import make_recipe, moto_s3
from pipeline import io
from pipeline.errors import PipelineError
from pipeline.run.runner import run_recipe
from pipeline.run.storage import Store, UrlStore, open_fs
from test_runner_crash import state as _state

STAGES = {
    "download": {"source": "toy", "max_docs": 200, "docs_per_part": 50},
    "clean": {},
    "dedup": {},
}


def _clockless(obj):
    if isinstance(obj, dict):
        return {k: _clockless(v) for k, v in obj.items() if not k.endswith("seconds")}
    if isinstance(obj, list):
        return [_clockless(v) for v in obj]
    return obj


def state(run_dir: Path) -> dict[str, object]:
    """test_runner_crash.state, less every `*seconds` stat (a stage may time its phases)."""
    return _clockless(_state(run_dir))


def _files(root: Path) -> dict[str, bytes]:
    """Every file of a run folder but the clock-dependent ones (compared by `state`)."""
    skip = {".lock", ".input_hashes.json", ".output_hashes.json"}
    skip |= {"manifest.json", "pipeline_report.json", "report.html"}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in io.iter_files(root)
        if p.relative_to(root).as_posix() not in skip
    }


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local")
    run_recipe(make_recipe(out, STAGES, workers=2), progress=False)
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_file_url_run_equals_local_run(tmp_path, local_run, workers):
    remote = tmp_path / "remote"
    run_recipe(make_recipe(f"file://{remote}", STAGES, workers=workers), progress=False)
    assert state(remote) == state(local_run)  # every byte; manifest and report less timings
    assert not list(Path(remote).glob(".tmp-*"))  # no resume folder left on the URL
    (remote / ".tmp-clean").mkdir()  # what a killed run may leave: swept from the URL too
    (remote / ".tmp-clean" / "part-00000.parquet").write_text("half")
    (remote / ".pipeline-probe.tmp").write_text("probe")
    items = run_recipe(make_recipe(f"file://{remote}", STAGES), progress=False)
    assert [i.action for i in items] == ["skip"] * 3  # pulled, hashes checked: up to date
    assert state(remote) == state(local_run)


def test_memory_url_run_equals_local_run(local_run):
    """memory:// lives in this process only: workers=1 (everything runs here)."""
    pytest.importorskip("fsspec")  # the `remote` extra: pyarrow has no memory:// filesystem
    url = "memory://pipeline-test/run"
    fs, root = open_fs(url)
    try:
        run_recipe(make_recipe(url, STAGES), progress=False)
        got = {}
        for info in fs.get_file_info(_selector(root)):
            if info.type.name == "File":
                with fs.open_input_stream(info.path) as f:
                    got[info.path[len(root) + 1 :]] = f.read()
        want = _files(local_run)
        assert {k: v for k, v in got.items() if k in want} == want
        assert set(got) - set(want) == {"manifest.json", "pipeline_report.json", "report.html"}
        manifest = json.loads(got["manifest.json"])
        assert manifest["stages"].keys() == set(STAGES)
    finally:
        fs.delete_dir_contents(root, missing_dir_ok=True)


def _selector(root: str):
    import pyarrow.fs as pafs

    return pafs.FileSelector(root, recursive=True, allow_not_found=True)


def test_killed_at_every_point_on_a_url_then_rerun_matches(tmp_path):
    """A kill -9 leaves the URL as it is at that instant (the working copy is scratch): at
    every crash point (each upload among them) the URL is copied; each copy, re-run as a URL,
    ends in the uninterrupted state."""
    stages = {"download": {"source": "toy", "max_docs": 40, "docs_per_part": 20}, "clean": {}}
    remote = tmp_path / "remote"
    shots: list[tuple[Path, str]] = []

    def copy(count: int, label: str) -> None:
        dest = tmp_path / "shots" / f"{count:04d}"
        shutil.copytree(remote, dest) if remote.exists() else dest.mkdir(parents=True)
        shots.append((dest, label))

    io.CRASH_HOOK.append(copy)
    try:
        run_recipe(make_recipe(f"file://{remote}", stages), progress=False)
    finally:
        io.CRASH_HOOK.remove(copy)
    want = state(remote)
    labels = " | ".join(label for _, label in shots)
    assert "before uploading clean/part-00000.parquet" in labels
    assert "before uploading manifest.json" in labels
    seen = set()
    for shot, label in shots:
        key = tuple(sorted(p.relative_to(shot).as_posix() for p in io.iter_files(shot)))
        if key in seen:  # the URL did not change since the last copy: same re-run
            continue
        seen.add(key)
        run_recipe(make_recipe(f"file://{shot}", stages), progress=False)
        assert state(shot) == want, f"after a crash at '{label}'"


def test_crash_mid_stage_on_a_url_resumes_finished_parts(tmp_path, monkeypatch, caplog):
    original, calls = clean_stage.clean_part, []

    def crashing(item, **kw):
        calls.append(item.index)
        if item.index == 2 and (tmp_path / "crash").exists():
            raise RuntimeError("simulated crash")
        return original(item, **kw)

    monkeypatch.setattr(clean_stage, "clean_part", crashing)
    (tmp_path / "crash").write_text("")
    url = f"file://{tmp_path / 'remote'}"
    stages = {k: STAGES[k] for k in ("download", "clean")}
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_recipe(make_recipe(url, stages), progress=False)
    # the URL holds the two finished parts and their markers, nothing of the working copy
    resume = sorted(p.name for p in (tmp_path / "remote" / ".tmp-clean" / ".resume").iterdir())
    assert len(resume) == 3 and "stage.json" in resume
    (tmp_path / "crash").unlink()
    calls.clear()
    with caplog.at_level("INFO", logger="pipeline"):
        run_recipe(make_recipe(url, stages), progress=False)
    assert sorted(calls) == [2, 3]  # parts 0 and 1 were not recomputed
    assert "[clean] 2 tasks resumed from a crashed run" in caplog.text
    run_recipe(make_recipe(tmp_path / "local", stages), progress=False)
    assert state(tmp_path / "remote") == state(tmp_path / "local")


def test_unknown_scheme_is_one_line():
    with pytest.raises(PipelineError, match=r"out_dir nosuch://x/run: no filesystem for this URL"):
        run_recipe(make_recipe("nosuch://x/run", STAGES), progress=False)


def test_unwritable_url_is_one_cli_line(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"out_dir: file://{tmp_path}/file/run\ndownload: {{source: toy, max_docs: 20}}\n"
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "data", "--config", str(recipe), "-q"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: out_dir file://{tmp_path}/file/run: ")
    assert "cannot write the run folder" in lines[0]


def test_s3_run_folder_on_a_mock_server_equals_local_run(tmp_path, local_run, monkeypatch):
    """An object store for real (no rename, multipart PUTs; moto's S3 server, `dev` extra).
    workers=1: pool workers inherit the environment of the forkserver, which an earlier test
    may have started before the credentials below were set (file:// covers 2 workers)."""
    import pyarrow.fs as pafs

    with moto_s3(monkeypatch, "bkt") as (s3, query):
        url = f"s3://bkt/run?{query}"
        run_recipe(make_recipe(url, STAGES), progress=False)
        copy = tmp_path / "copy"
        for info in s3.get_file_info(pafs.FileSelector("bkt/run", recursive=True)):
            if info.type == pafs.FileType.File:
                dest = copy / info.path[len("bkt/run/") :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                with s3.open_input_stream(info.path) as f:
                    dest.write_bytes(f.read())
        assert state(copy) == state(local_run)


def test_local_store_is_a_no_op_with_the_url_stores_interface(tmp_path):
    """The runner calls the same Store methods for a local folder and a URL: locally each is a
    no-op; UrlStore overrides every one (none silently falls back to doing nothing)."""
    steps = [n for n, v in vars(Store).items() if not n.startswith("_") and n != "remote"]
    assert {"upload", "push_dir", "prune", "remove_dir", "sweep", "shared_dir"} <= set(steps)
    assert [n for n in steps if n not in vars(UrlStore)] == []
    (tmp_path / "clean").mkdir()
    (tmp_path / "clean" / "part-00000.parquet").write_bytes(b"x")
    (tmp_path / ".tmp-dedup").mkdir()
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    store = Store(tmp_path)
    store.upload("clean/part-00000.parquet")
    store.upload_quietly("clean/part-00000.parquet")
    store.push_dir("clean")
    store.prune("clean")
    store.remove_dir("clean")
    store.sweep([".tmp-dedup"], ["dedup"])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before
    assert (store.remote, store.shared_dir, store.ledger_remote) == (False, tmp_path, None)
    assert store.where(".tmp-clean") == str(tmp_path / ".tmp-clean")
