"""download.source: warc / html: WARC and WET files the test writes (warcio's writer and our
own bytes), both framing readers, the extractors and the built-in fallback."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from helpers import run_stages
from pipeline.inspect import inspect_rejected
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.report import load_report
from pipeline.sources import html, warc

warcio = pytest.importorskip("warcio")
from warcio.statusandheaders import StatusAndHeaders  # noqa: E402
from warcio.warcwriter import WARCWriter  # noqa: E402

BODY = (
    "<p>The old farmer crossed the river near the station, and the young teacher watched "
    "him from the bridge while the market opened below the hill.</p>"
    "<p>Every morning the doctor carried a warm letter to the village school by the road.</p>"
)
PAGE = (
    "<html><head><title>T</title><style>p {{color: red}}</style>"
    "<script>var x = 1;</script></head><body><nav>Home | About | Contact</nav>"
    "<main><h1>News {i}</h1>{body}</main><footer>Copyright 2024 Example</footer></body></html>"
)


def _response(w, url, body: bytes, ctype="text/html; charset=utf-8", status="200 OK"):
    headers = StatusAndHeaders(status, [("Content-Type", ctype)], protocol="HTTP/1.1")
    return w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers)


def write_warc(path, pages: int = 3) -> None:
    """warcinfo + request (not documents), `pages` HTML pages, one Latin-1 page, a 404, a PNG."""
    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True)
        w.write_record(w.create_warcinfo_record("x.warc.gz", {"software": "test"}))
        req = StatusAndHeaders("GET / HTTP/1.1", [("Host", "a.example.com")], is_http_request=True)
        w.write_record(w.create_warc_record("https://a.example.com/", "request", http_headers=req))
        for i in range(pages):
            body = PAGE.format(i=i, body=BODY).encode()
            w.write_record(_response(w, f"https://news{i}.example.com/story/{i}", body))
        latin = "<html><body><p>Caf\xe9 cr\xe8me br\xfbl\xe9e for everyone today.</p></body></html>"
        w.write_record(
            _response(
                w,
                "http://old.example.org/",
                latin.encode("latin-1"),
                "text/html; charset=iso-8859-1",
            )
        )
        w.write_record(_response(w, "https://a.example.com/x", b"gone", status="404 Not Found"))
        w.write_record(_response(w, "https://a.example.com/p.png", b"\x89PNG", "image/png"))


def wet_record(uri: str, text: str, date="2024-02-03T04:05:06Z") -> bytes:
    body = text.encode()
    head = (
        f"WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: {uri}\r\nWARC-Date: {date}\r\n"
        f"WARC-Record-ID: <urn:uuid:{abs(hash(uri)) % 10**8:08d}>\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body + b"\r\n\r\n"


def test_warc_records_become_documents_with_url_date_and_content_type(tmp_path):
    """3 HTML pages + the Latin-1 page are documents; the 404 and the PNG are dropped with their
    reasons (inspectable), warcinfo/request records are not documents at all."""
    write_warc(tmp_path / "crawl.warc.gz")
    run = tmp_path / "run"
    block = {"source": "warc", "path": str(tmp_path / "crawl.warc.gz")}
    run_stages(run, {"download": block})
    t = pa.concat_tables([read_table(p) for p in Manifest.load(run).parts("download")])
    assert t.column_names[:6] == ["id", "text", "source", "url", "date", "content_type"]
    assert t.num_rows == 4
    assert t.column("url").to_pylist()[0] == "https://news0.example.com/story/0"
    assert set(t.column("content_type").to_pylist()) == {"text/html"}
    assert all(d.endswith("Z") for d in t.column("date").to_pylist())
    texts = t.column("text").to_pylist()
    assert "farmer crossed the river" in texts[0] and "var x" not in texts[0]
    assert "Café crème brûlée" in texts[3]  # the header's charset decoded it
    st = next(s["stats"] for s in load_report(run)["stages"] if s["stage"] == "download")
    assert st["docs_in"] == 6 and st["docs_out"] == 4
    assert st["dropped_warc_http_status"] == 1 and st["dropped_warc_unsupported_type"] == 1
    assert st["html_extractor"] == [html.resolve("auto")] and st["warc_reader"] == ["warcio"]
    shown = inspect_rejected(run, "download", "warc_http_status", 5, 200)
    assert "404" in shown


def test_wet_conversion_records_and_both_readers_agree(tmp_path):
    """A WET file (plain, our own bytes) reads the same through warcio and the built-in reader."""
    data = b"".join(
        wet_record(f"https://s{i}.example.net/p", f"plain text page {i}") for i in range(3)
    )
    path = tmp_path / "crawl.wet"
    path.write_bytes(data)
    gz = tmp_path / "crawl.wet.gz"
    with open(gz, "wb") as f:  # one gzip member per record, as Common Crawl writes them
        for i in range(3):
            f.write(
                gzip.compress(wet_record(f"https://s{i}.example.net/p", f"plain text page {i}"))
            )
    for p in (path, gz):
        a = list(warc.read_warc([p], "tags", "wet", use_warcio=True))
        b = list(warc.read_warc([p], "tags", "wet", use_warcio=False))
        assert a == b
        assert [r.text for r in a] == [f"plain text page {i}" for i in range(3)]
        assert a[1].columns == {
            "url": "https://s1.example.net/p",
            "date": "2024-02-03T04:05:06Z",
            "content_type": "text/plain",
        }
    w1 = tmp_path / "w.warc.gz"
    write_warc(w1)
    a = list(warc.read_warc([w1], "tags", "w", use_warcio=True))
    b = list(warc.read_warc([w1], "tags", "w", use_warcio=False))
    assert a == b and len(a) == 6


def test_malformed_records_are_counted_never_fatal(tmp_path, monkeypatch):
    """good, junk without a version line, good, bad Content-Length: the built-in reader yields
    2 documents and 2 malformed records (warcio stops at the junk: 1 and 1); the stage keeps
    going past max_malformed_fraction."""
    good = [wet_record(f"https://g{i}.example.com/", f"good page {i}") for i in range(2)]
    junk = b"this is not a warc record\r\nat all\r\n\r\n"
    bad_len = b"WARC/1.0\r\nWARC-Type: conversion\r\nContent-Length: many\r\n\r\nxx"
    path = tmp_path / "bad.wet"
    path.write_bytes(good[0] + junk + good[1] + bad_len)
    items = list(warc.read_warc([path], "tags", "bad", use_warcio=False))
    kinds = [getattr(i, "reason", "doc") for i in items]
    assert kinds == ["doc", "warc_malformed", "doc", "warc_malformed"]
    items = list(warc.read_warc([path], "tags", "bad", use_warcio=True))
    assert [getattr(i, "reason", "doc") for i in items] == ["doc", "warc_malformed"]
    run = tmp_path / "run"
    block = {"source": "warc", "path": str(path), "warc_reader": "builtin"}
    run_stages(run, {"download": block})  # 50% bad: no error
    st = next(s["stats"] for s in load_report(run)["stages"] if s["stage"] == "download")
    assert st["docs_out"] == 2 and st["dropped_warc_malformed"] == 2
    assert "no WARC/ version line" in st["malformed_examples"][0]
    assert st["warc_reader"] == ["builtin"]


def test_truncated_gzip_member_ends_the_file_with_one_malformed_record(tmp_path):
    members = [
        gzip.compress(wet_record(f"https://t{i}.example.com/", f"page {i}")) for i in range(3)
    ]
    path = tmp_path / "cut.wet.gz"
    path.write_bytes(members[0] + members[1] + members[2][: len(members[2]) // 2])
    for use in (True, False):
        items = list(warc.read_warc([path], "tags", "cut", use_warcio=use))
        assert [getattr(i, "text", None) for i in items[:2]] == ["page 0", "page 1"]
        assert len(items) == 3 and items[2].reason == "warc_malformed"


def test_builtin_tag_stripper_is_the_fallback_when_no_extractor_is_installed(monkeypatch):
    page = PAGE.format(i=1, body=BODY)
    for module in ("resiliparse.extract.html2text", "trafilatura"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError: not installed
    assert html.resolve("auto") == "tags"
    with pytest.raises(ImportError, match="not installed"):
        html.resolve("resiliparse")
    text = html.extract_text(page, "tags")
    assert text.splitlines()[:2] == ["Home | About | Contact", "News 1"]  # no main-content rule
    assert "var x" not in text and "color: red" not in text
    assert "farmer crossed the river" in text and "&amp;" not in html.strip_tags("a &amp; b")


@pytest.mark.parametrize("name", ["resiliparse", "trafilatura"])
def test_well_kept_extractors_drop_navigation_and_footer(name):
    pytest.importorskip(name)
    text = html.extract_text(PAGE.format(i=1, body=BODY), name)
    assert "farmer crossed the river" in text and "doctor carried" in text
    assert "Copyright 2024" not in text and "var x" not in text


def test_html_files_source(tmp_path):
    for i in range(2):
        (tmp_path / f"p{i}.html").write_text(PAGE.format(i=i, body=BODY))
    (tmp_path / "empty.html").write_text("<html><body><script>x()</script></body></html>")
    run = tmp_path / "run"
    run_stages(
        run,
        {
            "download": {
                "source": "html",
                "path": str(tmp_path / "*.html"),
                "html_extractor": "tags",
            }
        },
    )
    t = pa.concat_tables([read_table(p) for p in Manifest.load(run).parts("download")])
    assert t.column("id").to_pylist() == ["p0.html", "p1.html"]
    assert t.column("url").null_count == 2
    st = next(s["stats"] for s in load_report(run)["stages"] if s["stage"] == "download")
    assert st["dropped_html_no_text"] == 1 and st["html_extractor"] == ["tags"]


def test_wget_style_bracketed_target_uri_is_unwrapped(tmp_path):
    path = tmp_path / "w.wet"
    path.write_bytes(wet_record("<https://b.example.com/x>", "bracketed"))
    (doc,) = warc.read_warc([path], "tags", "w", use_warcio=False)
    assert doc.columns["url"] == "https://b.example.com/x"


def test_charset_sniffing():
    assert html.charset("text/html; charset=ISO-8859-1", b"") == "iso8859-1"
    assert html.charset(None, b'<meta charset="windows-1252">') == "cp1252"
    assert html.charset("text/html; charset=bogus", b"") == "utf-8"
    assert html.decode(b"\xff ok", None) == "\ufffd ok"


def test_http_payload_is_dechunked_and_gunzipped():
    """A chunked, gzip-encoded body as a server sent it: status, headers and the page back."""
    page = b"<html><body><p>chunked and gzipped page text</p></body></html>"
    gz = gzip.compress(page)
    chunked = b"".join(
        b"%x\r\n%s\r\n" % (len(gz[i : i + 20]), gz[i : i + 20]) for i in range(0, len(gz), 20)
    )
    block = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Encoding: gzip\r\n\r\n" + chunked + b"0\r\n\r\n"
    )
    status, headers, body = warc.parse_http(block)
    assert (status, headers["content-type"], body) == (200, "text/html", page)
    broken = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx"
    rec = warc.WarcRecord(
        7, {"warc-type": "response", "content-type": "application/http; msgtype=response"}, broken
    )
    bad = warc.to_item(rec, Path("x.warc"), "tags", "x")
    assert (bad.reason, bad.where) == ("warc_malformed", "x.warc:record 7")
    assert "bad HTTP payload" in bad.detail
    with pytest.raises(ValueError, match="no HTTP status line"):
        warc.parse_http(b"not http at all\r\n\r\nbody")


def test_many_files_on_two_workers_give_the_serial_bytes(tmp_path):
    """3 WARC files (one with a 404 and a PNG each, one malformed WET): one task per file on
    2 workers writes the serial reader's parts, rejected parts and statistics."""
    for i in range(2):
        write_warc(tmp_path / f"c{i}.warc.gz", pages=2 + i)
    (tmp_path / "c2.wet").write_bytes(
        wet_record("https://w.example.com/", "wet page") + b"junk line\r\n\r\n"
    )
    block = {"source": "warc", "path": str(tmp_path / "c*"), "docs_per_part": 3}
    block["warc_reader"] = "builtin"
    run_stages(tmp_path / "w1", {"download": block})
    run_stages(tmp_path / "w2", {"download": block}, workers=2)
    files = sorted(p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1").rglob("*.parquet"))
    # 3 + 4 + 1 documents in parts of 3; 2 + 2 + 1 dropped records
    assert len([f for f in files if "rejected" in str(f)]) == 2 and len(files) == 5
    for f in files:
        assert (tmp_path / "w1" / f).read_bytes() == (tmp_path / "w2" / f).read_bytes(), f
    s1, s2 = (
        next(s["stats"] for s in load_report(tmp_path / r)["stages"] if s["stage"] == "download")
        for r in ("w1", "w2")
    )
    drop = ("seconds", "docs_per_s", "mb_per_s")  # clock
    assert {k: v for k, v in s1.items() if k not in drop} == {
        k: v for k, v in s2.items() if k not in drop
    }
    assert s1["docs_out"] == 8 and s1["dropped_warc_malformed"] == 1
    assert s1["dropped_warc_http_status"] == 2 and s1["docs_per_source"] == {"c": 8}
