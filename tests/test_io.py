"""pipeline.io: the one writer of kept and rejected rows, and the counts it returns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.parts import docs_table, np_array, read_table, string_lists, write_kept_and_rejected


def test_kept_and_rejected_rows_reasons_and_counts(tmp_path):
    table = docs_table(["a", "b", "c", "d"], ["one", "twö", "", None], ["s"] * 4)
    keep = np.array([True, False, True, False])
    reasons = [["too_short", "no_vowel"], ["empty"]]  # of b and d, in row order
    outputs, counts = write_kept_and_rejected(
        tmp_path, 3, table, keep, reasons, score=pa.array([0.5, 0.25], pa.float32())
    )
    assert outputs == ["part-00003.parquet", "rejected/part-00003.parquet"]
    assert read_table(tmp_path / outputs[0]).column("id").to_pylist() == ["a", "c"]
    rejected = read_table(tmp_path / outputs[1])
    assert rejected.column_names == ["id", "text", "source", "reasons", "score"]
    assert rejected.column("reasons").to_pylist() == reasons
    assert (counts.docs_in, counts.docs_out) == (4, 2)
    assert counts.dropped == {"too_short": 1, "empty": 1}  # the first reason counts
    assert (counts.bytes_in, counts.bytes_out) == (3 + 4, 3)  # "twö" is 4 UTF-8 bytes


def test_a_stage_that_changed_the_kept_rows_and_dropped_none(tmp_path):
    table = docs_table(["a"], ["x"], ["s"])
    kept = table.set_column(1, "text", pa.array(["XY"]))
    outputs, counts = write_kept_and_rejected(tmp_path, 0, table, np.array([True]), [], kept)
    assert outputs == ["part-00000.parquet"] and not (tmp_path / "rejected").exists()
    assert read_table(tmp_path / outputs[0]).column("text").to_pylist() == ["XY"]
    assert (counts.dropped, counts.bytes_in, counts.bytes_out) == ({}, 1, 2)


def test_sha256_files_equals_one_by_one_in_order(tmp_path):
    """The driver's threaded hashing (commit, up-to-date checks) gives each file's own digest,
    in the order asked, for 1 or many threads."""
    import hashlib

    from pipeline.io import sha256_files

    paths = []
    for i in range(40):
        p = tmp_path / f"f{i}"
        p.write_bytes(bytes([i % 251]) * (i * 70_001 % 3_000_001))  # 0 B to ~3 MB
        paths.append(p)
    want = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    assert sha256_files(paths, threads=1) == want
    assert sha256_files(paths, threads=4) == want
    assert sha256_files(paths[::-1], threads=3) == want[::-1]
    assert sha256_files([]) == []


def test_pid_alive_live_dead_and_another_users_process(monkeypatch):
    """One answer everywhere (executor watchdog, shuffle's stale-temp sweep): a pid that exists
    but belongs to another user (kill(pid, 0) -> PermissionError) is alive."""
    import os
    import subprocess
    import sys

    from pipeline import io

    assert io.pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid no longer exists
    assert not io.pid_alive(child.pid)

    def denied(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(io.os, "kill", denied)
    assert io.pid_alive(child.pid)


def test_atomic_path_leaves_old_bytes_on_error_and_no_temp(tmp_path):
    from pipeline import io

    path = tmp_path / "sub" / "f.bin"
    io.atomic_write_bytes(path, b"old")
    try:
        with io.atomic_path(path) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed mid-write")
    except RuntimeError:
        pass
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.bin"]
    io.save_npy(path.with_suffix(".npy"), np.arange(3))
    assert np.load(path.with_suffix(".npy"), allow_pickle=False).tolist() == [0, 1, 2]


def test_column_bytes_counts_utf8_bytes_of_sliced_chunks_and_nulls():
    from pipeline.parts import column_bytes

    texts = ["é", "", "abc", "\u3000x", None, "zz"]
    whole = pa.chunked_array([pa.array(texts[:3]), pa.array(texts[3:])])
    sliced = pa.chunked_array([pa.array(["skip", *texts[:3]]).slice(1), pa.array(texts[3:5])])
    for col, want in ((whole, 2 + 3 + 4 + 2), (sliced, 2 + 3 + 4)):
        for typ in (pa.string(), pa.large_string()):
            c = col.cast(typ)
            assert column_bytes(pa.table({"text": c})) == want
            assert column_bytes(pa.table({"text": c.fill_null("")})) == want


def test_arrow_columns_from_buffers_equal_pa_array():
    """np_array / string_lists build what pa.array builds (no pandas import on the way)."""
    keep = np.array([True, False, True, True, False, False, True, True, False, True])
    for a in (
        keep,
        keep[::3],
        np.arange(7, dtype=np.int64)[::2],
        np.linspace(0, 1, 5, dtype=np.float32),
    ):
        assert np_array(a).equals(pa.array(a))
    rows = [["low_quality"], [], ["a", "bé", ""], ["\u4e2d"]]
    assert string_lists(rows).equals(pa.array(rows, pa.list_(pa.string())))
    assert string_lists([]).equals(pa.array([], pa.list_(pa.string())))


def test_numeric_column_equals_to_numpy_without_importing_pandas():
    """numeric_column reads what to_numpy reads, from sliced and empty chunks of every
    numeric width (nulls and other types take to_numpy's path), and a fresh process that reads
    a Parquet column with it has not imported pandas."""
    import subprocess
    import sys

    from pipeline.parts import numeric_column

    for dt in (np.int8, np.uint16, np.int32, np.int64, np.uint64, np.float32, np.float64):
        whole = np_array(np.arange(12).astype(dt) * 3)
        col = pa.chunked_array([whole.slice(2, 5), whole.slice(0, 0), whole.slice(9)])
        for c in (col, whole.slice(4, 3)):
            want = np.asarray(c.to_numpy(), np.int64)
            got = numeric_column(c, np.int64)
            assert got.dtype == np.int64 and got.tolist() == want.tolist()
            got[:1] = -1  # a writable copy, not a view of the Arrow buffer
    assert numeric_column(pa.chunked_array([], pa.int64()), np.int64).tolist() == []
    nulls = pa.array([1.5, None, 2.0])
    assert np.isnan(numeric_column(nulls, np.float64)[1])
    code = (
        "import sys, numpy as np, pyarrow.parquet as pq\n"
        "from pipeline.parts import numeric_column, np_array, write_table\n"
        "import pyarrow as pa\n"
        "from pathlib import Path\n"
        "import tempfile\n"
        "d = tempfile.mkdtemp(); f = Path(d) / 'x.parquet'\n"
        "write_table(f, pa.table({'n': np_array(np.arange(5))}))\n"
        "v = numeric_column(pq.ParquetFile(f).read(['n']).column('n'), np.int64)\n"
        "assert v.tolist() == [0, 1, 2, 3, 4]\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_json_text_is_the_same_value_indented_only_at_the_top_levels(tmp_path):
    """The runner's files: json.loads gives the value back at any depth; the top `levels`
    levels are indented as json.dumps(indent=2) indents them, deeper values sit on one line;
    non-str keys, empty containers and NaN convert as json.dumps converts them."""
    import json
    import math

    from pipeline.io import atomic_write_json, json_text

    value = {
        "a": [1, {"b": [2.5, None, True], "c": {}}, []],
        "é": {"d": {"e": [1, 2]}, "f": "x\ny"},
        "g": {1: "int key", None: "null key"},
        "h": math.inf,
    }
    full = json.dumps(value, indent=2)
    for levels in range(5):
        text = json_text(value, levels)
        assert text == json.dumps(value) if levels == 0 else text != json.dumps(value)
        assert json.loads(text) == json.loads(full)
    assert json_text(value, 9) == full  # deeper than the value: every level indented
    lines = json_text(value, 2).splitlines()
    assert '    "d": {"e": [1, 2]},' in lines and '    "1": "int key",' in lines
    assert '  "g": {"1": "int key", "null": "null key"},' in json_text(value, 1).splitlines()
    atomic_write_json(tmp_path / "x.json", value, levels=1)
    assert (tmp_path / "x.json").read_text().endswith("}\n")
    assert json.loads((tmp_path / "x.json").read_text()) == json.loads(full)
    atomic_write_json(tmp_path / "y.json", value)  # the stages' files: indent 2, as before
    assert (tmp_path / "y.json").read_text() == full + "\n"
