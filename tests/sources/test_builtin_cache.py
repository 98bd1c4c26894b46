"""Downloads a user can act on: offline errors with every hint on one screen, "resumes" only
when a part finished, and cached builtins checked against the server's size or flagged."""

from __future__ import annotations

import json
import socket

import pytest

import pipeline.stages.clean as clean_stage
from helpers import make_recipe, run_stages
from http_server import LocalServer
from pipeline.cli import main
from pipeline.fetch import cache_record
from pipeline.run.runner import run_recipe
from pipeline.sources import builtin


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _report(run_dir):
    return json.loads((run_dir / "pipeline_report.json").read_text())


def test_offline_error_keeps_every_hint_without_debug(tmp_path, monkeypatch, capsys):
    down = f"http://127.0.0.1:{_closed_port()}/" + "a-long-mirror-path/" * 8
    monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", down)
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path / "cache" / ("deep" * 30)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"out_dir: {tmp_path / 'run'}\ndownload: {{source: tinystories}}\n")
    assert main(["data", "--config", str(recipe)]) == 1
    err = capsys.readouterr().err.splitlines()
    lines = err[err.index(next(x for x in err if x.startswith("error: "))) :]
    assert lines[0].startswith("error: tinystories: cannot reach http://127.0.0.1:")
    assert "…" not in "\n".join(lines) and len(lines) == 3  # one screen: error + two hints
    dest = tmp_path / "cache" / ("deep" * 30) / "tinystories" / "TinyStories-valid.txt"
    assert lines[1].startswith("  without network: copy TinyStories-valid.txt (the URL above)")
    assert f"by hand to {dest} " in lines[1]
    assert lines[2].endswith("or your own file (--source jsonl --jsonl FILE)")
    assert "stopped before any part finished: a re-run starts it again" in "\n".join(err)
    assert "resumes" not in "\n".join(err)


def test_a_crash_after_finished_parts_says_it_resumes(tmp_path, monkeypatch, caplog):
    original = clean_stage.clean_part

    def crashing(item, **kw):
        if item.index == 2:
            raise RuntimeError("simulated crash")
        return original(item, **kw)

    monkeypatch.setattr(clean_stage, "clean_part", crashing)
    stages = {"download": {"source": "toy", "max_docs": 200, "docs_per_part": 50}, "clean": {}}
    with caplog.at_level("INFO", logger="pipeline"), pytest.raises(RuntimeError):
        run_recipe(make_recipe(tmp_path / "run", stages), progress=False)
    assert "[clean] kept " in caplog.text and "a re-run resumes from its 2 finished parts" in (
        caplog.text
    )


def test_builtin_from_the_server_is_checked_against_its_reported_size(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path / "cache"))
    data = b"Once there was a cat.\n<|endoftext|>\nEnd.\n"
    dest = tmp_path / "cache" / "tinystories" / "TinyStories-valid.txt"
    with LocalServer() as server:
        server.files["TinyStories-valid.txt"] = data
        monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", server.url)
        run_stages(tmp_path / "run", {"download": {"source": "tinystories"}})
        assert cache_record(dest)["server_size"] == dest.stat().st_size == len(data)
        stats = _report(tmp_path / "run")["stages"][0]["stats"]
        assert stats["cache_verification"] == {"TinyStories-valid.txt": "server_size"}
        # cut short in the cache later: not the size the server reported, so fetched again
        dest.write_bytes(data[:10])
        gets = sum(r[0] == "GET" for r in server.requests)
        builtin.download_builtin("tinystories", progress=False)
        assert dest.read_bytes() == data and sum(r[0] == "GET" for r in server.requests) > gets


def test_builtin_placed_by_hand_is_flagged_unverified(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIPELINE_URL_TINYSTORIES", f"http://127.0.0.1:{_closed_port()}")
    dest = tmp_path / "cache" / "tinystories" / "TinyStories-valid.txt"
    dest.parent.mkdir(parents=True)
    dest.write_text("A short file.\n<|endoftext|>\nNot the 19 MB split.\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        run_stages(tmp_path / "run", {"download": {"source": "tinystories"}})
    how = _report(tmp_path / "run")["stages"][0]["stats"]["cache_verification"]
    assert how["TinyStories-valid.txt"].startswith("unverified: placed in the cache by hand")
    assert "TinyStories-valid.txt: unverified: placed in the cache by hand" in caplog.text
    assert builtin.cache_status("shakespeare") == {"input.txt": "pinned"}
