"""`pipeline data --source jsonl --jsonl F` without --config: the built-in default recipe."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from pipeline.cli import main
from pipeline.loader import ShardedTokenDataset
from pipeline.recipe import DEFAULT_RECIPE, load_recipe
from pipeline.sources.toy import good_doc


def write_jsonl(path, n: int = 150, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"d{i}", "text": good_doc(rng)}) + "\n")


def test_jsonl_one_liner_runs_every_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "my_corpus.jsonl")
    assert (
        main(["data", "-q", "--source", "jsonl", "--jsonl", "my_corpus.jsonl", "--out-dir", "data"])
        == 0
    )
    assert capsys.readouterr().out.strip() == "data/pipeline_report.json"
    report = json.loads((tmp_path / "data" / "pipeline_report.json").read_text())
    stages = [s["stage"] for s in report["stages"]]
    assert stages == list(yaml.safe_load(DEFAULT_RECIPE))[4:]  # every stage block, in order
    assert report["stages"][0]["stats"]["docs_out"] == 150
    assert len(ShardedTokenDataset(tmp_path / "data" / "shard" / "train")) > 0


def test_jsonl_flag_alone_selects_its_source_and_show_prints_the_default(tmp_path, capsys):
    write_jsonl(tmp_path / "c.jsonl", n=3)
    assert main(["show", "--jsonl", str(tmp_path / "c.jsonl")]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["download"]["source"] == "jsonl"
    assert shown["download"]["path"] == str(tmp_path / "c.jsonl")
    assert shown["out_dir"] == "data/default" and shown["name"] == "default"


@pytest.mark.parametrize(
    "flag,source,field",
    [("--parquet", "parquet", "path"), ("--text", "text", "path"), ("--hf", "hf", "hf_path")],
)
def test_each_path_flag_sets_its_source(tmp_path, capsys, flag, source, field):
    target = tmp_path / "in.x"
    target.write_text("a document\n")
    assert main(["show", flag, str(target)]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["download"]["source"] == source and shown["download"][field] == str(target)


def test_conflicting_source_flags_are_one_line_errors(tmp_path, capsys):
    write_jsonl(tmp_path / "c.jsonl", n=3)
    assert main(["data", "--source", "parquet", "--jsonl", str(tmp_path / "c.jsonl")]) == 1
    assert capsys.readouterr().err.startswith("error: --source parquet with --jsonl: --jsonl")
    assert main(["data", "--jsonl", "a", "--text", "b"]) == 1
    assert capsys.readouterr().err.startswith("error: --jsonl and --text: give one input")


def test_a_path_flag_keeps_odd_paths_as_strings(tmp_path):
    odd = tmp_path / "[1]: 'x'.jsonl"
    write_jsonl(odd, n=2)
    quoted = "'" + str(odd).replace("'", "''") + "'"
    got = load_recipe(None, ["download.source=jsonl", f"download.path={quoted}"])
    assert got.stages["download"].path == str(odd)
