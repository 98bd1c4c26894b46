"""`pipeline report A B [--html]`: recipe changes first, then each stage's numbers side by side
with B - A; different stages or missing sections still compare (blank where absent)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from pipeline.cli import main
from pipeline.report import load_report
from pipeline.report.compare import COMPARE_NAME, compare_reports, diff, recipe_changes


def rows_of(cmp: dict, stage: str) -> dict[str, tuple]:
    st = next(s for s in cmp["stages"] if s["stage"] == stage)
    return {r[0]: r[1:] for r in st["rows"]}


def test_text_comparison_shows_recipe_changes_then_stage_numbers(report_runs, capsys):
    a, b = report_runs["a"], report_runs["b"]
    assert main(["report", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    changes = out.split("recipe changes (A -> B):")[1].split("[download]")[0]
    assert "clean.min_words: 50 -> 120" in changes
    assert "quality.min_score: 0.5 -> 0.6" in changes
    ra, rb = load_report(a)["stages"][1]["stats"], load_report(b)["stages"][1]["stats"]
    moved = rb["docs_out"] - ra["docs_out"]
    assert moved < 0  # more words needed: clean keeps fewer
    line = next(
        ln
        for ln in out.splitlines()
        if ln.strip().startswith("docs_out")
        and f"{ra['docs_out']:,}" in ln
        and f"{rb['docs_out']:,}" in ln
    )
    assert f"-{-moved:,} (" in line
    assert re.search(r"threshold \(clean\.min_words\)\s+50\s+120\s+\+70 \(\+140\.0%\)", out)


def test_runs_with_different_stages_compare_with_blanks(report_runs, capsys):
    a, part = load_report(report_runs["a"]), load_report(report_runs["part"])
    cmp = compare_reports(a, part)
    shard = next(s for s in cmp["stages"] if s["stage"] == "shard")
    assert shard["in"] == [True, False]
    assert all(r[3] is None and r[4] == "" for r in shard["rows"])  # blank in B
    assert ("shard", "enabled", None) in recipe_changes(a, part)
    assert main(["report", str(report_runs["a"]), str(report_runs["part"])]) == 0
    assert "[shard] (only in A)" in capsys.readouterr().out


def test_a_reason_one_run_never_met_counts_as_zero(report_runs):
    """clean lists only reasons that dropped something; in a run that has the stage, an
    absent dropped_<reason> is 0 documents, not unknown."""
    a, b = load_report(report_runs["a"]), load_report(report_runs["b"])
    sa = a["stages"][1]["stats"]
    sb = b["stages"][1]["stats"]
    only = sorted((set(sa) ^ set(sb)) & {k for k in {**sa, **sb} if k.startswith("dropped_")})
    rows = rows_of(compare_reports(a, b), "clean")
    for k in only:
        assert 0 in rows[k][1:3]


def test_json_comparison_holds_the_same_rows(report_runs, capsys):
    import json

    a, b = report_runs["a"], report_runs["b"]
    assert main(["report", str(a), str(b), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["runs"] == [str(a), str(b)]
    assert ["clean.min_words", 50, 120] in got["recipe"]
    clean = next(s for s in got["stages"] if s["stage"] == "clean")
    assert any(r[0] == "docs_out" and r[4].startswith("-") for r in clean["rows"])


def test_diff_worked_examples():
    assert diff(10, 12) == "+2 (+20.0%)"
    assert diff(0.5, 0.25) == "-0.25 (-50.0%)"
    assert diff(0, 3) == "+3"
    assert diff(4, 4) == "0"
    assert diff(None, 3) == diff("x", None) == diff("x", "x") == ""
    assert diff("bfd", "concat") == "changed"


def test_html_comparison_is_well_formed_and_self_contained(report_runs, capsys):
    a, b = report_runs["a"], report_runs["part"]
    assert main(["report", str(a), str(b), "--html"]) == 0
    path = b / COMPARE_NAME
    assert capsys.readouterr().out.strip() == str(path)
    html = path.read_text(encoding="utf-8")
    root = ET.fromstring(html)
    assert not re.search(r"https?:|url\(|<script|<link|<img", html)
    sections = {s.get("id"): s for s in root.iter("section")}
    assert "recipe" in sections and "overview" in sections
    for name in [s["stage"] for s in load_report(a)["stages"]]:
        assert list(sections[f"stage-{name}"].iter("svg")), name


def test_more_than_two_runs_is_a_one_line_error(report_runs, capsys):
    runs = [str(report_runs[k]) for k in ("a", "b", "part")]
    assert main(["report", *runs]) == 1
    assert capsys.readouterr().err.startswith("error: report: give one run folder, or two")
