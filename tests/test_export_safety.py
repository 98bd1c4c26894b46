"""`pipeline export` never deletes or corrupts a run: OUT may not equal, contain or lie inside a
run folder; one export per OUT at a time (a lock); unique temp names; a killed export is swept
by the next one; every failure to remove or replace is reported (issue 28, defects 1-4)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import run_stages
from pipeline import export as export_mod
from pipeline import io, publish
from pipeline.cli import main
from pipeline.errors import PipelineError
from pipeline.export import export


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """data/toy: a 120-document toy run (download, clean) and data/notes.txt beside it."""
    root = tmp_path_factory.mktemp("safety") / "data"
    run_stages(root / "toy", {"download": {"source": "toy", "max_docs": 120}, "clean": None})
    (root / "notes.txt").write_text("notes")
    return root


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_force_into_the_folder_holding_the_run_is_refused(data, capsys):
    """The issue's case: `export data/toy data --force` used to delete data/toy and notes.txt."""
    before = _listing(data)
    args = ["export", str(data / "toy"), str(data), "--stage", "clean", "--to", "jsonl", "-q"]
    capsys.readouterr()  # only the CLI's own line below
    assert main([*args, "--force"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {data}: contains the run folder {data / 'toy'}; choose a folder outside it "
        "(an export must never replace or enter a run)"
    )
    assert _listing(data) == before


@pytest.mark.parametrize(
    "where, why",
    [
        ("toy", "is the run folder"),
        ("toy/exports/x", "lies inside the run folder"),
        ("toy/clean", "lies inside the run folder"),
    ],
)
def test_out_equal_to_or_inside_the_run_is_refused(data, where, why):
    before = _listing(data)
    with pytest.raises(PipelineError, match=why):
        export(data / "toy", data / where, "jsonl", "clean", force=True, progress=False)
    assert _listing(data) == before


def test_out_holding_or_inside_another_run_is_refused(data, tmp_path):
    other = tmp_path / "box" / "other"
    run_stages(other, {"download": {"source": "toy", "max_docs": 20}})
    before = _listing(tmp_path)
    with pytest.raises(PipelineError, match=rf"holds the run folder {other}; --force never"):
        export(data / "toy", tmp_path / "box", "jsonl", "clean", force=True, progress=False)
    with pytest.raises(PipelineError, match=rf"lies inside the run folder {other};"):
        export(data / "toy", other / "x", "jsonl", "clean", force=True, progress=False)
    assert _listing(tmp_path) == before


def _cli_export(run: Path, out: Path, fmt: str, *extra: str, crash_at: int | None = None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop(io.CRASH_ENV, None)
    if crash_at is not None:
        env[io.CRASH_ENV] = str(crash_at)
    cmd = [sys.executable, "-m", "pipeline", "export", str(run), str(out), "--stage", "clean"]
    return subprocess.run([*cmd, "--to", fmt, "-q", *extra], env=env, capture_output=True)


def test_a_killed_hf_export_is_swept_by_the_next(data, tmp_path, hf_offline):
    """kill -9 (os._exit at the crash point) after the datasets folder is written: its work
    folder stays; the next export (no --force: OUT was never made) sweeps it and succeeds. The
    name the old code left (`..OUT.tmp.arrow-tmp`, which blocked OUT for good) goes too."""
    out = tmp_path / "out"
    killed = _cli_export(data / "toy", out, "hf", crash_at=1)
    assert killed.returncode == 86, killed.stderr.decode()
    assert not out.exists()
    left = [p.name for p in tmp_path.iterdir()]
    assert any(n.startswith(".out.export-") for n in left), left
    (tmp_path / "..out.tmp.arrow-tmp").mkdir()
    (tmp_path / "..out.tmp.arrow-tmp" / "train.arrow").write_bytes(b"x")
    done = export(data / "toy", out, "hf", "clean", progress=False)
    assert done.rows["train"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


class _Killed(BaseException):
    """Stands for a kill at a crash point (the in-process hook raises it)."""


def test_a_kill_between_the_renames_puts_the_old_out_back(data, tmp_path, monkeypatch):
    out = tmp_path / "out"
    export(data / "toy", out, "jsonl", "clean", progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def hook(n: int, label: str) -> None:
        if "moved aside" in label:
            raise _Killed(label)

    monkeypatch.setattr(io, "CRASH_HOOK", [hook])
    with pytest.raises(_Killed):
        export(data / "toy", out, "parquet", "clean", force=True, progress=False)
    assert not out.exists()  # the state a kill there leaves: the old copy beside OUT
    assert [p.name.startswith(".out.old-") for p in tmp_path.iterdir()] == [True]
    monkeypatch.setattr(io, "CRASH_HOOK", [])
    with pytest.raises(PipelineError, match="exists; choose a new folder or pass --force"):
        export(data / "toy", out, "parquet", "clean", progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_two_concurrent_forced_exports_one_refused_out_complete(data, tmp_path, monkeypatch):
    """The issue's race: both used `.OUT.tmp`/`.OUT.old`, one 'succeeded' and OUT was gone."""
    out = tmp_path / "out"
    export(data / "toy", out, "jsonl", "clean", progress=False)
    inside, release = threading.Event(), threading.Event()
    real = export_mod._write

    def slow_write(*args, **kwargs):
        inside.set()
        assert release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(export_mod, "_write", slow_write)
    result: dict[str, object] = {}

    def first() -> None:
        result["done"] = export(data / "toy", out, "parquet", "clean", force=True, progress=False)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert inside.wait(30)
        with pytest.raises(PipelineError, match="another `pipeline export` into this folder"):
            export(data / "toy", out, "jsonl", "clean", force=True, progress=False)
        assert {p.suffix for p in out.iterdir()} == {".jsonl"}  # untouched meanwhile
    finally:
        release.set()
        t.join()
    assert result["done"].fmt == "parquet"
    assert {p.suffix for p in out.iterdir()} == {".parquet"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_unique_temp_names(tmp_path):
    out = tmp_path / "out"
    names = {publish._unique(out, "export").name for _ in range(3)}
    assert len(names) == 3 and all(n.startswith(f".out.export-{os.getpid()}-") for n in names)


def test_an_old_out_that_cannot_be_removed_is_reported(data, tmp_path, monkeypatch, capsys):
    """rmtree(ignore_errors=True) used to exit 0 and leave `.OUT.old/`: now exit 1, naming it."""
    out = tmp_path / "out"
    export(data / "toy", out, "jsonl", "clean", progress=False)
    real = publish.shutil.rmtree

    def stuck(path, onerror=None, **kw):
        if ".out.old-" in str(path):
            onerror(
                os.unlink,
                str(Path(path) / "part-00000.jsonl"),
                (OSError, OSError(13, "Permission denied"), None),
            )
            return
        real(path, onerror=onerror, **kw)

    monkeypatch.setattr(publish.shutil, "rmtree", stuck)
    args = ["export", str(data / "toy"), str(out), "--stage", "clean", "--to", "parquet", "-q"]
    capsys.readouterr()
    assert main([*args, "--force"]) == 1
    err = capsys.readouterr().err
    assert f"error: {out} was replaced, but its old copy stays: " in err
    assert "part-00000.jsonl (Permission denied); remove it by hand" in err
    assert {p.suffix for p in out.iterdir()} == {".parquet"}
    monkeypatch.setattr(publish.shutil, "rmtree", real)
    # the next export sweeps the leftover (a failure there would be reported the same way)
    assert main([*args, "--force"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_unwritable_folder_inside_out_is_refused_before_anything_changes(
    data, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    export(data / "toy", out, "jsonl", "clean", progress=False)
    (out / "sub").mkdir()
    real = os.access
    monkeypatch.setattr(publish.os, "access", lambda p, m: real(p, m) and "sub" not in str(p))
    with pytest.raises(PipelineError, match=rf"{out}: cannot be replaced, {out / 'sub'} is not"):
        export(data / "toy", out, "parquet", "clean", force=True, progress=False)
    assert {p.suffix for p in out.iterdir() if p.is_file()} == {".jsonl"}


def test_export_shards_reads_no_file_outside_the_shard_folder(tmp_path):
    """`shards[0].file: "../outside/x.npz"` in metadata.json: refused by the loader's schema."""
    import json

    from loader.conftest import write_shards

    folder = write_shards(tmp_path / "run" / "shard" / "train", [4], seq_len=8)
    (tmp_path / "run" / "outside").mkdir()
    (folder / "shard_000000.npz").rename(tmp_path / "run" / "outside" / "x.npz")
    meta = json.loads((folder / "metadata.json").read_text())
    meta["shards"][0]["file"] = "../../outside/x.npz"
    (folder / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(PipelineError, match=r"field 'shards\[0\].file' must name a file inside"):
        export(tmp_path / "run", tmp_path / "out", "jsonl", shards=True, progress=False)
    assert not (tmp_path / "out").exists()


def test_a_folder_with_someone_elses_manifest_json_is_not_a_run(data, tmp_path):
    """manifest.json alone (a web app's) does not make a run folder: OUT may go inside it."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "manifest.json").write_text('{"name": "my app"}')
    done = export(data / "toy", tmp_path / "site" / "out", "jsonl", "clean", progress=False)
    assert done.rows["train"] > 0
