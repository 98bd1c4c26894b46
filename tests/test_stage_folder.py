"""A finished stage folder holds exactly what its manifest lists (issue 28, also noticed: a
stray file added to a finished stage folder survived the re-run, the stage being up to date).
The re-run names it and refuses; --force replaces the folder; nothing is deleted silently."""

from __future__ import annotations

import pytest

from helpers import make_recipe, run_stages
from pipeline.cli import main
from pipeline.errors import DataError
from pipeline.manifest import Manifest
from pipeline.run.runner import run_recipe

STAGES = {"download": {"source": "toy", "max_docs": 40}, "clean": None}


def test_a_stray_file_in_a_finished_stage_folder_is_named_and_refused(tmp_path, capsys):
    run = tmp_path / "run"
    run_stages(run, STAGES)
    (run / "clean" / "notes.txt").write_text("mine")
    (run / "download" / "sub").mkdir()
    (run / "download" / "sub" / "x.parquet").write_bytes(b"x")
    with pytest.raises(DataError, match=r"download: 1 file\(s\) that manifest.json does not "
                       r"list, first download/sub/x.parquet: a finished stage folder"):  # fmt: skip
        run_recipe(make_recipe(run, STAGES), progress=False)
    assert (run / "clean" / "notes.txt").read_text() == "mine"  # nothing deleted
    assert Manifest.load(run).unlisted("clean") == ["clean/notes.txt"]
    (run / "download" / "sub" / "x.parquet").unlink()
    (run / "download" / "sub").rmdir()
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: t\nseed: 7\nout_dir: {run}\nworkers: 1\n"
        "download: {source: toy, max_docs: 40}\nclean: {}\n"
    )
    capsys.readouterr()  # what direct run_recipe calls logged before (not the CLI's)
    assert main(["data", "--config", str(recipe), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {run / 'clean'}: 1 file(s) that manifest.json does not list")
    assert "\n" not in err
    assert main(["data", "--config", str(recipe), "-q", "--force", "--only", "clean"]) == 0
    assert not (run / "clean" / "notes.txt").exists()  # replaced, as asked
    assert Manifest.load(run).unlisted("clean") == []
    assert main(["data", "--config", str(recipe), "-q"]) == 0  # up to date, folder exact
