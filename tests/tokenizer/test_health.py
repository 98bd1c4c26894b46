"""Bytes/token health by script: the classification, the table, the warnings, and the tokenize
stage's report and log."""

from __future__ import annotations

import json
import logging

import numpy as np

from helpers import run_stages
from pipeline.clean.charclass import SCRIPTS
from pipeline.tokenizer import health

LATIN, CJK = SCRIPTS.index("latin"), SCRIPTS.index("cjk")


def test_dominant_script_counts_letters_only():
    assert health.dominant_script("The cat sat on the mat.") == LATIN
    assert health.dominant_script("今天天气很好, ok 123") == CJK  # 6 Han letters vs 2 Latin
    assert health.dominant_script("12345 !!! ...") == health.NONE
    assert health.dominant_script("") == health.NONE


def test_table_and_warnings_name_the_vocab_key():
    scripts = np.array([LATIN, LATIN, CJK, health.NONE])
    sums = health.by_script(
        scripts, np.array([6000, 6000, 70000, 10]), np.array([4000, 4000, 10000, 5])
    )
    table = health.script_table(sums)
    assert table["latin"] == {
        "docs": 2,
        "bytes": 12000,
        "tokens": 8000,
        "bytes_per_token": 1.5,
        "healthy": [3.5, 5.0],
    }
    assert table["cjk"]["healthy"] == list(health.UNSPACED_RANGE)
    assert table["none"]["healthy"] is None
    warns = health.warnings(table, 300, "tokenize.vocab_size", stopped=False)
    assert warns[0].startswith("English/Latin text: 1.50 bytes/token, outside the healthy 3.5–5")
    assert warns[0].endswith("raise tokenize.vocab_size (now 300)")
    assert len(warns) == 2 and warns[1].startswith(
        "cjk (unspaced) text: 7.00 bytes/token, outside the healthy 3.5–6"
    )
    assert "training stopped early" in health.warnings(table, 300, "k", stopped=True)[1]
    table["latin"]["bytes_per_token"] = 4.2  # in range, and too little text is never judged
    table["cjk"]["bytes"] = health.MIN_SCRIPT_BYTES - 1
    assert health.warnings(table, 8192, "tokenize.vocab_size", stopped=False) == []


def test_tokenize_stage_reports_and_logs_a_small_vocabulary(tmp_path, caplog):
    stages = {"download": {"source": "toy", "max_docs": 80}, "tokenize": {"vocab_size": 300}}
    with caplog.at_level(logging.WARNING):
        run_stages(tmp_path, stages)
    report = json.loads((tmp_path / "pipeline_report.json").read_text())
    stats = next(s["stats"] for s in report["stages"] if s["stage"] == "tokenize")
    latin = stats["bytes_per_token_by_script"]["latin"]
    assert latin["docs"] == 80 and latin["bytes_per_token"] < 3.5
    assert latin["bytes_per_token"] == round(latin["bytes"] / latin["tokens"], 3)
    (warn,) = stats["bytes_per_token_warnings"]
    assert "tokenize.vocab_size (now 300)" in warn
    assert any(warn in r.getMessage() for r in caplog.records)
