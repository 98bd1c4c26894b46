"""`pipeline pretrain` / `pipeline ablate` end to end on the tiny run: the report section, the
ablation table, JSON and HTML."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")

from pipeline.cli import main  # noqa: E402

BLOCK = {
    "n_layer": 1, "n_head": 2, "d_model": 16, "batch_size": 4, "max_steps": 6,
    "warmup_steps": 2, "eval_every": 3, "save_every": 3, "eval_tokens": 256, "lr": 1e-2,
    "min_lr": 1e-3, "device": "cpu",
}  # fmt: skip


def _recipe(tmp_path, **extra):
    path = tmp_path / "pretrain.yaml"
    path.write_text(json.dumps({"pretrain": {**BLOCK, **extra}}))
    return path


def test_pretrain_command_adds_a_section_to_the_run_report(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    texts = tmp_path / "t.jsonl"
    texts.write_text(json.dumps({"text": "A held-out sentence to score."}) + "\n")
    recipe = _recipe(tmp_path, eval_texts=[str(texts)])
    assert main(["pretrain", "--config", str(recipe), "--run", str(run), "-q"]) == 0
    out = capsys.readouterr().out
    assert "train loss" in out and "bits/byte" in out and str(run / "pretrain") in out
    report = json.loads((run / "pipeline_report.json").read_text())
    section = report["stages"][-1]
    assert section["stage"] == "pretrain"
    st = section["stats"]
    assert st["steps"] == 6 and len(st["loss_curve"]) == 6
    assert set(st["eval"]) == {"shard/eval", "t.jsonl"} and st["eval"]["t.jsonl"]["bpb"] > 0
    html = (run / "report.html").read_text()
    assert 'id="stage-pretrain"' in html and "pretrain: train loss" in html and "bits/byte" in html
    # a second run without --resume refuses to overwrite; with --resume it is already done
    assert main(["pretrain", "--config", str(recipe), "--run", str(run), "-q"]) == 1
    assert "pass --resume" in capsys.readouterr().err


def test_ablate_table_json_and_html(tiny_run, tmp_path, capsys):
    twin = tmp_path / "twin"
    twin.symlink_to(tiny_run)  # the same data under a second name: every Δ must be 0
    texts = tmp_path / "t.jsonl"
    texts.write_text(json.dumps({"text": "Scored by both runs with their own tokenizer."}) + "\n")
    args = ["ablate", str(tiny_run), str(twin), "--config", str(_recipe(tmp_path))]
    args += ["--eval-texts", str(texts), "--seeds", "0,1", "--out-dir", str(tmp_path / "ab"), "-q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "t.jsonl BPB" in out and "± " in out and "+0.0000" in out
    result = json.loads((tmp_path / "ab" / "ablate.json").read_text())
    first, second = result["rows"]
    assert first["bpb"]["t.jsonl"]["per_seed"] == second["bpb"]["t.jsonl"]["per_seed"]
    a, b = first["bpb"]["t.jsonl"]["per_seed"]
    assert a != b  # two seeds, two models
    assert second["bpb"]["t.jsonl"]["delta"] == 0.0
    assert first["tokens"] == second["tokens"] == result["token_budget"]
    assert "<svg" in (tmp_path / "ab" / "ablate.html").read_text()
    assert main(args) == 0  # every cell is reused: same numbers
    assert json.loads((tmp_path / "ab" / "ablate.json").read_text())["rows"] == result["rows"]


def test_ablate_bad_seeds_and_missing_text(tiny_run, tmp_path, capsys):
    base = ["ablate", str(tiny_run), "--config", str(_recipe(tmp_path))]
    assert main([*base, "--eval-texts", str(tmp_path / "none.txt"), "-q"]) == 1
    assert "none.txt: eval text not found" in capsys.readouterr().err
    (tmp_path / "t.txt").write_text("text")
    assert main([*base, "--eval-texts", str(tmp_path / "t.txt"), "--seeds", "a,b", "-q"]) == 1
    assert "--seeds: got 'a,b'" in capsys.readouterr().err


def test_ablate_retrains_a_cell_whose_report_json_is_not_an_object(tiny_run, tmp_path, capsys):
    """A cell's report.json holding valid JSON that is not an object (a list, a string) was an
    AttributeError traceback on the re-run; like unreadable JSON, the cell is trained anew."""
    (tmp_path / "t.txt").write_text("Scored text.")
    args = ["ablate", str(tiny_run), "--config", str(_recipe(tmp_path))]
    args += ["--eval-texts", str(tmp_path / "t.txt"), "--out-dir", str(tmp_path / "ab"), "-q"]
    assert main(args) == 0
    first = json.loads((tmp_path / "ab" / "ablate.json").read_text())["rows"][0]["bpb"]
    report = tmp_path / "ab" / tiny_run.name / "seed0" / "report.json"
    for junk in ("[1, 2]", '"x"'):
        report.write_text(junk)
        assert main(args) == 0
        assert json.loads((tmp_path / "ab" / "ablate.json").read_text())["rows"][0]["bpb"] == first
        assert isinstance(json.loads(report.read_text()), dict)  # trained anew, rewritten
