"""The pretrain section of pipeline_report.json, from <run>/pretrain/report.json (no torch)."""

from __future__ import annotations

import json

from pipeline.report import pretrain_section
from pipeline.report.sections import stage_figures


def _write(run, **over):
    final = {
        "shard_eval": {"loss": 2.0, "perplexity": 7.39},
        "texts": {"/x/h.jsonl": {"bpb": 1.5, "bytes": 10}},
    }
    rep = {
        "steps": 500, "tokens": 10**6, "num_params": 1000,
        "losses": [5.0 - i / 100 for i in range(500)], "tokens_per_s": 123.0,
        "peak_memory_bytes": 2**20, "mfu": None, "stall_fraction": 0.01,
        "device": "cpu", "precision": "fp32", "train_seconds": 9.0, "final": final,
    } | over  # fmt: skip
    (run / "pretrain").mkdir(parents=True, exist_ok=True)
    (run / "pretrain" / "report.json").write_text(json.dumps(rep))


def test_section_thins_the_curve_and_names_eval_sets(tmp_path):
    assert pretrain_section(tmp_path) is None  # no pretrain run: no section
    _write(tmp_path)
    sec = pretrain_section(tmp_path)
    st = sec["stats"]
    assert sec["stage"] == "pretrain" and sec["seconds"] == 9.0
    assert len(st["loss_curve"]) == 167 and st["loss_curve"][0] == [1, 5.0]  # every 3rd step
    assert st["eval"] == {
        "shard/eval": {"loss": 2.0, "perplexity": 7.39},
        "h.jsonl": {"bpb": 1.5, "bytes": 10},
    }
    html = "".join(stage_figures("pretrain", st, {}))
    assert "<svg" in html and "bits/byte" in html and "h.jsonl" in html


def test_damaged_report_is_left_out_with_a_warning(tmp_path, caplog):
    _write(tmp_path, losses="not a list")
    assert pretrain_section(tmp_path) is None
    assert "damaged" in caplog.text
