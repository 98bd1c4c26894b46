"""The command line: exit codes, one-line errors, show / report / datasets / inspect / dry-run."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main


def write_recipe(tmp_path, body: str) -> str:
    path = tmp_path / "r.yaml"
    path.write_text(f"name: t\nseed: 1\nout_dir: {tmp_path / 'run'}\n{body}")
    return str(path)


TOY = "download:\n  source: toy\n  max_docs: 120\n  docs_per_part: 50\n"


def test_recipe_error_is_one_line_and_exit_1(tmp_path, capsys):
    cfg = write_recipe(tmp_path, "download:\n  source: toy\n  max_dcs: 5\n")
    assert main(["data", "--config", cfg]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "error: download.max_dcs: unknown key (did you mean 'max_docs'?)"


def test_data_without_config_names_the_recipes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["data"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no --config given and no recipes in recipes/: pass a recipe")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "data_demo.yaml").write_text("# The demo.\nname: demo\n")
    (tmp_path / "recipes" / "mine.yaml").write_text("name: mine\n")
    assert main(["data"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: no --config given; try `pipeline data --config recipes/data_demo.yaml`, or "
        "`pipeline data --source jsonl --jsonl FILE` for the built-in default recipe. "
        "Recipes: recipes/data_demo.yaml (The demo.); recipes/mine.yaml"
    )


def test_debug_shows_the_traceback(tmp_path):
    cfg = write_recipe(tmp_path, "download:\n  source: toy\n  max_dcs: 5\n")
    with pytest.raises(Exception, match="max_dcs"):
        main(["data", "--config", cfg, "--debug"])


def test_data_then_report_table(tmp_path, capsys):
    cfg = write_recipe(tmp_path, TOY)
    assert main(["data", "--config", cfg, "-q"]) == 0
    assert capsys.readouterr().out.strip().endswith("pipeline_report.json")
    assert main(["report", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "download" in out and "120" in out and "docs/s" in out
    assert main(["report", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stages"][0]["stats"]["docs_out"] == 120


def test_report_without_run_is_an_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 1
    assert "no pipeline_report.json" in capsys.readouterr().err


def test_set_out_dir_workers_and_source_shorthands(tmp_path, capsys):
    cfg = write_recipe(tmp_path, "download:\n  source: tinystories\n")
    data = tmp_path / "mine.jsonl"
    data.write_text('{"text": "hello there"}\n{"text": "general kenobi"}\n')
    out = tmp_path / "mine"
    assert (
        main(
            [
                "data",
                "--config",
                cfg,
                "--jsonl",
                str(data),
                "--out-dir",
                str(out),
                "--workers",
                "2",
                "-q",
            ]
        )
        == 0
    )
    report = json.loads((out / "pipeline_report.json").read_text())
    assert report["stages"][0]["stats"]["docs_out"] == 2
    assert report["stages"][0]["stats"]["source"] == "jsonl"


def test_show_fills_defaults(tmp_path, capsys):
    cfg = write_recipe(tmp_path, TOY)
    assert main(["show", "--config", cfg, "--set", "download.max_docs=7"]) == 0
    out = capsys.readouterr().out
    assert "max_docs: 7" in out and "docs_per_part: 50" in out and "text_field: text" in out


def test_dry_run_prints_plan(tmp_path, capsys):
    cfg = write_recipe(tmp_path, TOY)
    assert main(["data", "--config", cfg, "--dry-run"]) == 0
    assert "download  run    not run yet" in capsys.readouterr().out
    assert not (tmp_path / "run").exists()


def test_datasets_lists_builtins(capsys):
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    for name in ("tinystories", "tinystories_train", "wikitext2", "wikitext103", "shakespeare"):
        assert name in out


def test_inspect_rejected(tmp_path, capsys):
    data = tmp_path / "c.jsonl"
    data.write_text('{"text": "ok"}\n' * 30 + "{broken\n")
    cfg = write_recipe(tmp_path, f"download:\n  source: jsonl\n  path: {data}\n")
    assert main(["data", "--config", cfg, "-q"]) == 0
    assert (
        main(["inspect", str(tmp_path / "run"), "--stage", "download", "--reason", "bad_json"]) == 0
    )
    out = capsys.readouterr().out
    assert "reasons: bad_json=1" in out and "c.jsonl:31" in out and "{broken" in out
    assert main(["inspect", str(tmp_path / "run"), "--stage", "download", "--reason", "nope"]) == 1
    assert "no document" in capsys.readouterr().err
