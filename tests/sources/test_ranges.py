"""Byte ranges of JSONL files: cuts at newlines, lines identical to the serial reader's."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import DataError
from pipeline.sources.files import _lines
from pipeline.sources.ranges import ByteRange, newline_cuts, plan_ranges, range_lines

PIECES = ["a", "é", "中", "😀", "\n", "\r\n", " ", '{"text": "x"}']


def _all_lines(ranges):
    return [line for r in ranges for line in range_lines(r)]


@settings(max_examples=40, deadline=None)
@given(
    text=st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
    bom=st.booleans(),
    target=st.integers(1, 40),
)
def test_ranges_yield_the_serial_readers_lines(tmp_path_factory, text, bom, target):
    """Any content and range size: cuts fall right after newlines (so never inside a multi-byte
    character) and the ranges' lines, in order, are the serial reader's lines."""
    path = tmp_path_factory.mktemp("r") / "f.jsonl"
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    path.write_bytes(data)
    ranges = plan_ranges([path], target)
    cuts = [r.start for r in ranges]
    assert all(c == 0 or data[c - 1 : c] == b"\n" for c in cuts)
    assert [r.end for r in ranges[:-1]] == cuts[1:] and (not ranges or ranges[-1].end == len(data))
    assert _all_lines(ranges) == list(_lines(path))


def test_cuts_exactly_on_a_line_start_and_inside_a_character(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes("ab\n😀😀\nc".encode())  # 😀 is 4 bytes: offsets 3..10, then \n at 11
    assert newline_cuts(path, 13, 3) == [0, 3, 12, 13]  # 3 is a line start: kept as is
    assert newline_cuts(path, 13, 5) == [0, 12, 13]  # 5 and 10 fall inside a 😀
    assert newline_cuts(path, 0, 5) == [0]  # empty file: no range


def test_compressed_file_is_one_range_and_utf16_is_refused(tmp_path):
    gz = tmp_path / "f.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbfone\ntwo\n"))
    assert plan_ranges([gz], 1) == [ByteRange(str(gz), 0, None)]
    assert _all_lines(plan_ranges([gz], 1)) == [b"one", b"two"]
    w = tmp_path / "w.jsonl"
    w.write_bytes("x\ny\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"w\.jsonl: is UTF-16 \(byte-order mark\)"):
        _all_lines(plan_ranges([w], 100))
    with pytest.raises(DataError, match=r"missing\.jsonl: cannot open"):
        plan_ranges([tmp_path / "missing.jsonl"], 10)
