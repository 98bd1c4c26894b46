"""`inspect RUN --stage tokenize --cluster 1` gave `KeyError: 'text'` (issue 28, defect 12):
tokenize's parts keep dedup's `cluster` column but not the text."""

from __future__ import annotations

import pyarrow.parquet as pq

from pipeline.cli import main


def test_cluster_of_a_stage_without_text_is_one_line(report_runs, capsys):
    run = report_runs["a"]
    part = sorted((run / "tokenize").glob("part-*.parquet"))[0]
    columns = pq.read_schema(part).names
    assert "cluster" in columns and "text" not in columns  # the case the issue hit
    capsys.readouterr()
    assert main(["inspect", str(run), "--stage", "tokenize", "--cluster", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {part}: no `text` column: tokenize keeps no document text; "
        "inspect the dedup stage's clusters (--stage dedup)"
    )
    kept = pq.read_table(sorted((run / "dedup").glob("part-*.parquet"))[0], columns=["cluster"])
    cluster = kept.column("cluster")[0].as_py()
    assert main(["inspect", str(run), "--stage", "dedup", "--cluster", str(cluster)]) == 0
    assert capsys.readouterr().out.startswith(f"cluster {cluster}: ")  # dedup still works


def test_a_damaged_part_is_one_line_naming_it(report_runs, tmp_path, capsys):
    """A truncated Parquet part under the stage: one line naming it, for both views (was
    pyarrow's ArrowInvalid traceback)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(report_runs["a"], run)
    part = sorted((run / "dedup" / "rejected").glob("part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:100])
    capsys.readouterr()
    for view in (["--cluster", "1"], []):
        assert main(["inspect", str(run), "--stage", "dedup", *view]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {part}: cannot read Parquet part (") and err.count("\n") == 1
        assert "re-run the stage (`pipeline data`)" in err
