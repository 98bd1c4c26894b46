"""Builtin corpora through the real download code, against a local HTTP server (no internet)."""

from __future__ import annotations

import hashlib
import re
import socket

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import run_stages
from http_server import LocalServer
from pipeline.errors import DataError, PipelineError
from pipeline.fetch import cache_dir, fetch
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.sources import builtin
from pipeline.sources.builtin import BUILTINS, RemoteFile, probe

STORIES = (
    "Once upon a time there was a cat.\nIt was happy.\n<|endoftext|>\n\nTom ran fast.\n"
    "<|endoftext|>\nThe end came.\n"
)


def docs(run_dir):
    tables = [read_table(p) for p in Manifest.load(run_dir).parts("download")]
    return [t for table in tables for t in table.column("text").to_pylist()]


@pytest.fixture
def server():
    with LocalServer() as s:
        yield s


def test_tinystories_download_split_and_cache_hit(tmp_path, server, monkeypatch):
    server.files["TinyStories-valid.txt"] = STORIES.encode()
    monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", server.url)
    run_stages(tmp_path / "a", {"download": {"source": "tinystories"}})
    assert docs(tmp_path / "a") == [
        "Once upon a time there was a cat.\nIt was happy.",
        "Tom ran fast.",
        "The end came.",
    ]
    gets = [r for r in server.requests if r[0] == "GET"]
    run_stages(tmp_path / "b", {"download": {"source": "tinystories"}})
    assert [r for r in server.requests if r[0] == "GET"] == gets  # cached: no new request
    assert (cache_dir() / "tinystories" / "TinyStories-valid.txt").read_text() == STORIES


def test_resume_after_truncated_download(tmp_path, server):
    data = bytes(range(256)) * 4000
    server.files["big.bin"] = data
    dest = tmp_path / "big.bin"
    (tmp_path / "big.bin.part").write_bytes(data[:300_000])  # an interrupted earlier download
    fetch(
        f"{server.url}/big.bin", dest, len(data), hashlib.sha256(data).hexdigest(), progress=False
    )
    assert dest.read_bytes() == data
    assert server.requests[-1] == ("GET", "/big.bin", "bytes=300000-")
    assert not (tmp_path / "big.bin.part").exists()


def test_dropped_connection_then_resume(tmp_path, server):
    data = b"0123456789" * 50_000
    server.files["d.bin"] = data
    server.httpd.truncate_to = 123_456
    with pytest.raises(DataError, match=r"d\.bin: (connection dropped|downloaded 123,456 of)"):
        fetch(f"{server.url}/d.bin", tmp_path / "d.bin", len(data), progress=False)
    assert (tmp_path / "d.bin.part").stat().st_size == 123_456
    fetch(f"{server.url}/d.bin", tmp_path / "d.bin", len(data), progress=False)
    assert (tmp_path / "d.bin").read_bytes() == data
    assert server.requests[-1][2] == "bytes=123456-"


def test_server_without_range_support_restarts(tmp_path):
    data = b"abcdefghij" * 1000
    with LocalServer(ranges=False) as s:
        s.files["f.txt"] = data
        (tmp_path / "f.txt.part").write_bytes(b"garbage")
        fetch(f"{s.url}/f.txt", tmp_path / "f.txt", progress=False)
    assert (tmp_path / "f.txt").read_bytes() == data


def test_size_mismatch_is_a_clear_error(tmp_path, server, monkeypatch):
    server.files["input.txt"] = b"not the tiny shakespeare file\n\nat all\n"
    monkeypatch.setenv("PIPELINE_URL_SHAKESPEARE", server.url)
    with pytest.raises(
        DataError, match=r"input\.txt: the server's file is 38 bytes, expected 1,115,394"
    ):
        run_stages(tmp_path / "run", {"download": {"source": "shakespeare"}})
    assert not (tmp_path / "run" / "download").exists()


def test_sha256_mismatch_removes_partial(tmp_path, server):
    server.files["x.txt"] = b"hello"
    with pytest.raises(DataError, match="sha256 .* does not match"):
        fetch(f"{server.url}/x.txt", tmp_path / "x.txt", 5, "0" * 64, progress=False)
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "x.txt.part").exists()


def test_http_error_names_url(tmp_path, server):
    with pytest.raises(DataError, match=r"missing\.txt: HTTP 404"):
        fetch(f"{server.url}/missing.txt", tmp_path / "m.txt", progress=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_names_offline_choices(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(PipelineError, match=r"tinystories: cannot reach ") as err:
        run_stages(tmp_path / "run", {"download": {"source": "tinystories"}})
    assert re.search(r"toy.*python_docs.*--jsonl", err.value.hints[-1])  # printed whole


def test_offline_builtin_says_where_to_put_the_file_by_hand(tmp_path, monkeypatch):
    from pipeline.sources.builtin import BUILTINS

    monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path / "cache"))
    remote = BUILTINS["tinystories"].files[0]
    dest = tmp_path / "cache" / "tinystories" / remote.name
    with pytest.raises(PipelineError, match=r"tinystories: cannot reach ") as err:
        run_stages(tmp_path / "run", {"download": {"source": "tinystories"}})
    assert f"copy {remote.name} (the URL above) by hand to {dest} " in err.value.hints[0]
    # placed there by hand (no pin for this file: trusted once, then recorded), no network needed
    stories = ["Once upon a time a cat sat.", "A dog ran home."]
    dest.write_text("\n<|endoftext|>\n".join(stories) + "\n", encoding="utf-8")
    run_stages(tmp_path / "run", {"download": {"source": "tinystories"}})
    assert (tmp_path / "run" / "download" / "part-00000.parquet").is_file()


def test_wikitext_splits_on_top_level_headings(tmp_path, server, monkeypatch):
    lines = [
        "",
        " = Alpha = \n",
        "",
        " Alpha text .\n",
        " = = Sub = = \n",
        " More alpha .\n",
        " = Beta = \n",
        " Beta text .\n",
    ]
    path = tmp_path / "w.parquet"
    pq.write_table(pa.table({"text": lines}), path)
    server.files["train-00000-of-00001.parquet"] = path.read_bytes()
    monkeypatch.setenv("PIPELINE_URL_WIKITEXT2", server.url)
    run_stages(tmp_path / "run", {"download": {"source": "wikitext2"}})
    got = docs(tmp_path / "run")
    assert len(got) == 2
    assert got[0].startswith("= Alpha =") and "= = Sub = =" in got[0] and "More alpha" in got[0]
    assert got[1].startswith("= Beta =")


def test_shakespeare_pages_keep_speeches_whole(tmp_path):
    speeches = [f"Speaker{i}:\n" + "word " * 100 for i in range(50)]
    path = tmp_path / "input.txt"
    path.write_text("\n\n".join(speeches))
    pages = list(builtin.split_shakespeare([path], min_chars=1000))
    assert "\n\n".join(pages) == "\n\n".join(s.strip() for s in speeches)
    assert all(len(p) >= 1000 for p in pages[:-1])


def test_probe_reports_sizes_and_unreachable(server, monkeypatch):
    server.files["input.txt"] = b"x" * 1234
    monkeypatch.setenv("PIPELINE_URL_SHAKESPEARE", server.url)
    down = f"http://127.0.0.1:{_closed_port()}"
    for name in BUILTINS:
        if name != "shakespeare":
            monkeypatch.setenv(f"PIPELINE_URL_{name.upper()}", down)
    rows = {name: size for name, size, _ in probe()}
    assert rows["shakespeare"] == "0.0 MB"
    assert rows["tinystories"].startswith("unreachable")
    assert all("\n" not in size for size in rows.values())


def test_remote_files_declare_known_sizes():
    assert BUILTINS["shakespeare"].files[0] == RemoteFile(
        "input.txt", 1_115_394, "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    )


@pytest.mark.parametrize("pinned", [False, True])
def test_altered_cache_entry_is_downloaded_again(tmp_path, server, caplog, pinned):
    """A cached file changed in place (same size) is caught: against the pinned sha256, or
    against the record of its first download; it is fetched again with a warning."""
    data = b"the real file\n" * 100
    server.files["f.txt"] = data
    dest, url = tmp_path / "cache" / "f.txt", f"{server.url}/f.txt"
    pin = (len(data), hashlib.sha256(data).hexdigest()) if pinned else (None, None)
    fetch(url, dest, *pin, progress=False)
    assert (tmp_path / "cache" / "f.txt.sha256").is_file()
    gets = len([r for r in server.requests if r[0] == "GET"])
    fetch(url, dest, *pin, progress=False)  # intact: served from the cache
    assert len([r for r in server.requests if r[0] == "GET"]) == gets
    dest.write_bytes(data.replace(b"real", b"FAKE"))
    with caplog.at_level("WARNING", logger="pipeline"):
        fetch(url, dest, *pin, progress=False)
    assert dest.read_bytes() == data
    assert len([r for r in server.requests if r[0] == "GET"]) == gets + 1
    assert "downloading it again" in caplog.text and "sha256" in caplog.text
    dest.write_bytes(data[:-5])  # truncated: caught by size alone
    fetch(url, dest, *pin, progress=False)
    assert dest.read_bytes() == data


@pytest.mark.parametrize("url", ["file:///etc/passwd", "/etc/passwd", "ftp://x/y", "http://"])
def test_only_http_urls_are_fetched(tmp_path, url):
    with pytest.raises(DataError, match="not an http:// or https:// URL"):
        fetch(url, tmp_path / "f", progress=False)
