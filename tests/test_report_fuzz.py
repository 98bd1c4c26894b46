"""A hand-edited pipeline_report.json is one DataError line in `report`, `report A B` and
`--html`, never a traceback (issue 28, defect 10); fuzzed with any bytes and with mutations of a
real report (hypothesis), each of the three gives a result or one DataError."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import mutated
from pipeline.cli import main
from pipeline.errors import DataError
from pipeline.report import REPORT_NAME, format_report, read_run_report
from pipeline.report.compare import compare_reports, format_compare, render_compare_html
from pipeline.report.html import write_html


@pytest.fixture(scope="module")
def real_report(report_runs) -> dict:
    return json.loads((report_runs["a"] / REPORT_NAME).read_text())


def _copy(report_runs, tmp_path: Path, report) -> Path:
    """A report alone in a folder (no manifest: `pipeline report` shows the file as is)."""
    folder = tmp_path / "copied"
    folder.mkdir(exist_ok=True)
    text = report if isinstance(report, (str, bytes)) else json.dumps(report)
    (folder / REPORT_NAME).write_bytes(text.encode() if isinstance(text, str) else text)
    return folder


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda r: r.update(recipe=[1, 2]), "recipe", r"must be an object or null, got \[1, 2\]"),
        (
            lambda r: r["stages"][0]["stats"].update(docs_in="many"),
            r"stages\[0\].stats.docs_in",
            "",
        ),
        (lambda r: r["stages"][1].update(seconds="slow"), r"stages\[1\].seconds", "a number"),
        (
            lambda r: r["stages"][1]["stats"]["histograms"][
                next(iter(r["stages"][1]["stats"]["histograms"]))
            ].update(counts=["a"]),
            r"stages\[1\].stats.histograms.\w+.counts\[0\]",
            "must be a number >= 0, got 'a'",
        ),
        (lambda r: r["stages"][0].update(stats=None), r"stages\[0\].stats", "an object"),
        (lambda r: r.update(seed=1e400), "report.seed", "must be a finite number, got inf"),
    ],
)
def test_hand_edited_report_is_one_line_in_all_three(
    report_runs, real_report, tmp_path, capsys, edit, field, message
):
    """The issue's cases raised AttributeError or TypeError in each command."""
    report = json.loads(json.dumps(real_report))
    edit(report)
    bad = _copy(report_runs, tmp_path, report)
    good = str(report_runs["a"])
    calls = [[str(bad)], [str(bad), good], [good, str(bad), "--html"], [str(bad), "--html"]]
    for args in (["report", *call] for call in calls):
        capsys.readouterr()
        assert main(args) == 1, args
        err = capsys.readouterr().err.strip()
        assert "\n" not in err, err
        assert err.startswith(f"error: {bad / REPORT_NAME}: not a pipeline report: field '"), err
        assert re.search(rf"field '{field}' .*{message}", err), err
    assert not (bad / "report.html").exists()


def _all_three(folder: Path, good: dict) -> None:
    """What `report`, `report A B` (text and --html) and `report --html` do with `folder`
    (write_compare's steps, with the good run's report read once)."""
    try:
        report = read_run_report(folder)
    except DataError:
        return  # all three start with this read
    format_report(report)
    format_compare(compare_reports(report, good), ("a", "b"))
    render_compare_html(good, report, ("a", "b"))
    write_html(folder, folder / "out.html")


_FUZZ = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(data=st.data())
def test_fuzzed_reports_give_a_result_or_one_data_error(report_runs, real_report, data):
    report = data.draw(mutated(real_report))
    with tempfile.TemporaryDirectory() as tmp:
        _all_three(_copy(report_runs, Path(tmp), report), real_report)


@_FUZZ
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_as_a_report_give_a_result_or_one_data_error(report_runs, real_report, raw):
    with tempfile.TemporaryDirectory() as tmp:
        _all_three(_copy(report_runs, Path(tmp), raw), real_report)
