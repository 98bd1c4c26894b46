"""File and offline sources through the download stage."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from pipeline.errors import DataError
from pipeline.manifest import Manifest
from pipeline.parts import read_table
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


# ---------------------------------------------------------------- JSONL over byte ranges


def _run(path, out, workers, split, docs_per_part=4, **cfg):
    """The download stage's run() into `out`; split=False forces the serial reader."""
    from pipeline.executor import Executor
    from pipeline.stage import StageContext
    from pipeline.stages import download

    out.mkdir(parents=True)
    c = download.DownloadConfig(source="jsonl", path=str(path), docs_per_part=docs_per_part, **cfg)
    with Executor(workers) as ex:
        ctx = StageContext("download", out.parent, out, 0, {}, None, ex, progress=False)
        res = (download._run_split if split else download._run_serial)(c, ctx)
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert sorted(files) == sorted(res.outputs)  # nothing else left behind (temp files)
    return files, res.stats, res.counts


def _tricky_bytes():
    """A BOM, CRLF, blank and whitespace lines, malformed lines of every kind, multi-byte
    characters (2, 3, 4 bytes), lone surrogates, made and given ids, no final newline."""
    rows = []
    for i in range(40):
        text = "é" * (i % 3) + "中文" * (i % 5) + "😀" * (i % 2) + f" doc {i}"
        rows.append(json.dumps({"id": f"x{i}", "text": text} if i % 4 else {"text": text}))
        if i % 7 == 3:
            rows.append("{broken")
        if i % 11 == 5:
            rows.append("   ")
            rows.append("")
        if i % 13 == 6:
            rows.append('{"text": 12}')
            rows.append('{"body": "x"}')
            rows.append("[1, 2]")
    data = "\ufeff" + "\r\n".join(rows[:20]) + "\r\n" + "\n".join(rows[20:])
    data += '\n{"text": "\\ud800 lone"}\n'
    return (
        data.encode() + b'{"text": "bad \xff utf8"}\n' + '{"text": "last, no newline ü"}'.encode()
    )


@pytest.mark.parametrize("target", [1, 7, 64, 200, 10**6])
def test_split_reader_writes_the_serial_readers_bytes(tmp_path, monkeypatch, target):
    """Any range size (cuts inside multi-byte characters, on newlines, ranges with no record or
    only malformed lines) and 1 or 2 workers: the same parts, rejected parts and stats."""
    from pipeline.stages.download import split as download_split

    path = tmp_path / "c.jsonl"
    path.write_bytes(_tricky_bytes())
    base = _run(path, tmp_path / "serial", 1, False, max_malformed_fraction=0.5)
    assert len([f for f in base[0] if f.startswith("rejected/")]) == 4  # 16 malformed
    monkeypatch.setattr(download_split, "target_bytes", lambda total, workers: target)
    for workers in (1, 2):
        got = _run(path, tmp_path / f"split{workers}", workers, True, max_malformed_fraction=0.5)
        assert got == base


def test_split_reader_numbers_lines_across_files_and_cuts(tmp_path, monkeypatch):
    """Several files (one gzip: one range, read whole), made ids file:line and error lines
    stay right when a file is cut into many ranges."""
    from pipeline.stages.download import split as download_split

    (tmp_path / "a.jsonl").write_bytes(_tricky_bytes())
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(_tricky_bytes()))
    (tmp_path / "c.jsonl").write_bytes(b"")  # an empty file: no range
    (tmp_path / "d.jsonl").write_text('{"text": "only line"}')
    pattern = str(tmp_path / "*.jsonl*")
    base = _run(pattern, tmp_path / "serial", 1, False, docs_per_part=7, max_malformed_fraction=1)
    monkeypatch.setattr(download_split, "target_bytes", lambda total, workers: 50)
    got = _run(pattern, tmp_path / "split", 2, True, docs_per_part=7, max_malformed_fraction=1)
    assert got == base
    ids = pa.concat_tables(
        [pq.read_table(pa.BufferReader(b)) for f, b in sorted(got[0].items()) if "rej" not in f]
    ).column("id")
    assert "a.jsonl:1" in ids.to_pylist() and "d.jsonl:1" in ids.to_pylist()
    assert got[1]["malformed_examples"][0].endswith(
        "a.jsonl:5: bad JSON (Expecting property name enclosed in double quotes at column 2)"
    )


def test_split_reader_one_line_and_empty_file(tmp_path, monkeypatch):
    from pipeline.stages.download import split as download_split

    monkeypatch.setattr(download_split, "target_bytes", lambda total, workers: 3)
    one = tmp_path / "one.jsonl"
    one.write_text('{"text": "ü only"}\n')
    assert _run(one, tmp_path / "s1", 2, True) == _run(one, tmp_path / "r1", 1, False)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    for split in (False, True):
        with pytest.raises(DataError, match=r"empty\.jsonl: the source produced no documents"):
            _run(empty, tmp_path / f"e{split}", 2, split)


def test_split_reader_errors_keep_file_and_line(tmp_path, monkeypatch):
    """Too many malformed lines stop the run before any part is written, naming the first
    malformed line's file:line even when it lies in a later range; a UTF-16 file is refused."""
    from pipeline.stages.download import split as download_split

    monkeypatch.setattr(download_split, "target_bytes", lambda total, workers: 30)
    path = tmp_path / "c.jsonl"
    path.write_text("".join(f'{{"text": "fine {i}"}}\n' for i in range(12)) + "nope\n" * 3)
    for split in (False, True):
        with pytest.raises(
            DataError,
            match=r"c\.jsonl: 3 of 15 records malformed .* first: "
            r".*c\.jsonl:13: bad JSON",
        ):
            _run(path, tmp_path / f"m{split}", 2, split)
    # counted first: no part written, only pass 1's temp files
    assert [p.name for p in (tmp_path / "mTrue").iterdir()] == [".ranges"]
    utf16 = tmp_path / "w.jsonl"
    utf16.write_bytes('{"text": "x"}\n{"text": "y"}\n'.encode("utf-16"))
    with pytest.raises(DataError, match=r"w\.jsonl: is UTF-16 \(byte-order mark\)"):
        _run(utf16, tmp_path / "u", 2, True)


def test_split_reader_maps_are_recorded_for_resume(tmp_path, monkeypatch):
    """Reading and part-writing tasks return their files: after a crash mid-way through the
    parts, a re-run reads no range again, rewrites only the unfinished parts and ends with the
    same bytes as an uninterrupted run."""
    from pipeline.stages.download import split as download_split

    path = tmp_path / "c.jsonl"
    path.write_bytes(_tricky_bytes())
    monkeypatch.setattr(download_split, "target_bytes", lambda total, workers: 100)
    real_read, real_part = download_split.read_range, download_split.gather_part
    reads, parts, crash = [], [], [True]

    def read(job, **kw):
        reads.append(job[0])
        return real_read(job, **kw)

    def part(job, **kw):
        parts.append(job[0])
        if crash and len(parts) == 3:
            crash.pop()
            raise OSError("simulated crash")
        return real_part(job, **kw)

    monkeypatch.setattr(download_split, "read_range", read)
    monkeypatch.setattr(download_split, "gather_part", part)
    recipe = {
        "download": {
            "source": "jsonl",
            "path": str(path),
            "docs_per_part": 4,
            "max_malformed_fraction": 0.5,
        }
    }
    with pytest.raises(OSError):
        run_stages(tmp_path / "run", recipe)
    assert len(reads) > 3 and parts == [0, 1, 2]
    reads.clear()
    parts.clear()
    run_stages(tmp_path / "run", recipe)
    assert reads == [] and parts[0] == 2 and len(parts) == 11 - 2  # 42 records: 11 parts
    monkeypatch.undo()
    run_stages(tmp_path / "fresh", recipe)
    fresh = Manifest.load(tmp_path / "fresh").parts("download")
    assert len(fresh) == 11
    for p in fresh:
        assert p.read_bytes() == (tmp_path / "run" / "download" / p.name).read_bytes()
