"""File and offline sources through the download stage."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.errors import DataError
from pipeline.io import read_table
from pipeline.manifest import Manifest
from pipeline.report import load_report
from pipeline.sources import python_docs, toy


def table(run_dir, stage="download"):
    parts = Manifest.load(run_dir).parts(stage)
    return pa.concat_tables([read_table(p) for p in parts])


def stats(run_dir, stage="download"):
    return next(s["stats"] for s in load_report(run_dir)["stages"] if s["stage"] == stage)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


ROWS = [{"id": f"d{i}", "text": f"document number {i}", "meta": i} for i in range(25)]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_jsonl_plain_gz_zst(tmp_path, suffix):
    data = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    path = tmp_path / f"c{suffix}"
    if suffix.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    elif suffix.endswith(".zst"):
        with pa.CompressedOutputStream(str(path), "zstd") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    run_stages(
        tmp_path / "run", {"download": {"source": "jsonl", "path": str(path), "docs_per_part": 10}}
    )
    t = table(tmp_path / "run")
    assert t.column("id").to_pylist() == [r["id"] for r in ROWS]
    assert t.column("text").to_pylist() == [r["text"] for r in ROWS]
    assert len(Manifest.load(tmp_path / "run").parts("download")) == 3


def test_jsonl_glob_custom_fields_and_made_ids(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"body": "alpha"}, {"body": "beta"}])
    write_jsonl(tmp_path / "b.jsonl", [{"body": "gamma"}])
    run_stages(
        tmp_path / "run",
        {
            "download": {
                "source": "jsonl",
                "path": str(tmp_path / "*.jsonl"),
                "text_field": "body",
                "id_field": None,
            }
        },
    )
    t = table(tmp_path / "run")
    assert t.column("text").to_pylist() == ["alpha", "beta", "gamma"]
    assert t.column("id").to_pylist() == ["a.jsonl:1", "a.jsonl:2", "b.jsonl:1"]


def test_malformed_lines_are_counted_reported_and_kept_aside(tmp_path):
    path = tmp_path / "c.jsonl"
    good = [json.dumps({"text": f"fine {i}"}) for i in range(96)]
    lines = (
        good[:10]
        + ["{not json"]
        + good[10:50]
        + [json.dumps({"txt": "x"})]
        + good[50:]
        + [json.dumps({"text": 5})]
    )
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"text": "bad \xff byte"}\n')
    run_stages(tmp_path / "run", {"download": {"source": "jsonl", "path": str(path)}})
    st = stats(tmp_path / "run")
    assert st["docs_in"] == 100 and st["docs_out"] == 96
    assert (
        st["dropped_bad_json"],
        st["dropped_missing_text"],
        st["dropped_text_not_string"],
        st["dropped_invalid_utf8"],
    ) == (1, 1, 1, 1)
    assert st["malformed_examples"][0].endswith(
        "c.jsonl:11: bad JSON (Expecting property name enclosed in double quotes at column 2)"
    )
    rejected = read_table(tmp_path / "run" / "download" / "rejected" / "part-00000.parquet")
    assert rejected.column("reasons").to_pylist() == [
        ["bad_json"],
        ["missing_text"],
        ["text_not_string"],
        ["invalid_utf8"],
    ]


def test_too_many_malformed_lines_stop_the_run(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "ok"}\nnope\nnope\n')
    with pytest.raises(
        DataError,
        match=r"c\.jsonl: 2 of 3 records malformed \(66\.7% > "
        r"download\.max_malformed_fraction 5\.0%\); first: .*:2: bad JSON",
    ):
        run_stages(tmp_path / "run", {"download": {"source": "jsonl", "path": str(path)}})
    assert not (tmp_path / "run" / "download").exists()


def test_records_without_the_text_field_name_their_fields_and_the_key(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "content": "x"}) + "\n" for i in range(3)))
    with pytest.raises(
        DataError,
        match=r"first: .*c\.jsonl:1: field 'text' is missing \(the record has 'id', 'content'\); "
        r"set download\.text_field to the text's field",
    ):
        run_stages(tmp_path / "run", {"download": {"source": "jsonl", "path": str(path)}})
    # and with the key set, the same file reads
    run_stages(
        tmp_path / "run",
        {"download": {"source": "jsonl", "path": str(path), "text_field": "content"}},
    )
    assert stats(tmp_path / "run")["docs_out"] == 3


def test_lone_surrogates_and_nul_survive(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a\\ud800b"}\n{"text": "nul\\u0000here"}\n{"text": ""}\n')
    run_stages(tmp_path / "run", {"download": {"source": "jsonl", "path": str(path)}})
    assert table(tmp_path / "run").column("text").to_pylist() == ["a\ufffdb", "nul\x00here", ""]


def test_parquet_source(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"content": ["x y", None, "z"], "uid": ["1", "2", "3"]}), path)
    run_stages(
        tmp_path / "run",
        {
            "download": {
                "source": "parquet",
                "path": str(path),
                "text_field": "content",
                "id_field": "uid",
                "max_malformed_fraction": 0.5,
            }
        },
    )
    t = table(tmp_path / "run")
    assert t.column("id").to_pylist() == ["1", "3"]
    assert stats(tmp_path / "run")["dropped_text_not_string"] == 1


def test_parquet_missing_column_is_a_clear_error(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"body": ["x"]}), path)
    with pytest.raises(DataError, match=r"c\.parquet: no column 'text' \(columns: body\)"):
        run_stages(tmp_path / "run", {"download": {"source": "parquet", "path": str(path)}})


def test_text_files_whole_and_split(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("first file")
    (tmp_path / "docs" / "b.txt").write_text("one\n---\ntwo\n---\n")
    run_stages(tmp_path / "r1", {"download": {"source": "text", "path": str(tmp_path / "docs")}})
    assert table(tmp_path / "r1").column("text").to_pylist() == [
        "first file",
        "one\n---\ntwo\n---\n",
    ]
    run_stages(
        tmp_path / "r2",
        {"download": {"source": "text", "path": str(tmp_path / "docs"), "separator": "---"}},
    )
    assert table(tmp_path / "r2").column("text").to_pylist() == ["first file", "one", "two"]


def test_toy_is_seeded_labelled_and_mixed():
    a = list(toy.generate(1000, seed=3))
    b = list(toy.generate(1000, seed=3))
    c = list(toy.generate(1000, seed=4))
    assert [d.text for d in a] == [d.text for d in b]
    assert [d.text for d in a] != [d.text for d in c]
    labels = [d.label for d in a]
    junk = sum(lab != "good" for lab in labels) / len(labels)
    assert 0.10 < junk < 0.20
    assert {lab.split(":")[1] for lab in labels if lab != "good"} == set(toy.JUNK_KINDS)
    goods = {d.text for d in a if d.label == "good"}
    assert all(d.text in goods for d in a if d.label == "junk:exact_dup")


def test_toy_download_has_label_column(toy_run):
    t = table(toy_run)
    assert t.column_names == ["id", "text", "source", "label"]
    assert t.num_rows == 400 and len(set(t.column("id").to_pylist())) == 400


def test_max_docs_caps_any_source(tmp_path):
    run_stages(tmp_path / "run", {"download": {"source": "python_docs", "max_docs": 30}})
    assert table(tmp_path / "run").num_rows == 30


def test_python_docs_is_real_prose_and_deterministic():
    docs = list(python_docs.generate())
    assert len(docs) > 300
    assert docs == list(python_docs.generate())
    assert len({d.id for d in docs}) == len(docs)
    text = " ".join(d.text for d in docs[:200])
    assert text.count(" the ") > 1000  # English prose, not code
