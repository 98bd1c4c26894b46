"""Bad input, table-driven, through the real CLI (in-process): each case either exits 1 with one
`error:` line (no traceback, bounded length, naming what is wrong), or is handled and counted
(exit 0, with the effect checked)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.cli import MAX_ERROR_CHARS, main
from pipeline.manifest import Manifest
from pipeline.parts import read_table
from pipeline.report import REPORT_NAME
from pipeline.tokenizer import hf
from pipeline.tokenizer.bpe import Tokenizer

TOY = {"source": "toy", "max_docs": 20, "docs_per_part": 10}


def recipe(tmp: Path, name: str = "r.yaml", **stages) -> list[str]:
    """Write a recipe (run folder tmp/run) and return `data --config` argv for it."""
    raw = {"name": "t", "seed": 1, "out_dir": str(tmp / "run"), "download": TOY, **stages}
    (tmp / name).write_text(yaml.safe_dump(raw))
    return ["data", "--config", str(tmp / name), "-q"]


def jsonl(tmp: Path, data: bytes, **download) -> list[str]:
    (tmp / "in.jsonl").write_bytes(data)
    return recipe(tmp, download={"source": "jsonl", "path": str(tmp / "in.jsonl"), **download})


def lines(n: int) -> bytes:
    return b"".join(json.dumps({"text": f"doc {i}"}).encode() + b"\n" for i in range(n))


def tokenizer_file(tmp: Path, edit) -> str:
    obj = hf.to_json(Tokenizer([(115, 111)]))  # one merge: "s" + "o"
    edit(obj)
    path = tmp / "tokenizer.json"
    path.write_text(json.dumps(obj))
    return str(path)


def with_tokenizer(tmp: Path, edit) -> list[str]:
    return recipe(tmp, tokenize={"tokenizer_path": tokenizer_file(tmp, edit)})


def billion_laughs(tmp: Path) -> list[str]:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"{cur}: &{cur} [{','.join(['*' + prev] * 9)}]\n"
    (tmp / "bomb.yaml").write_text(text + "download: {source: *i}\n")
    return ["data", "--config", str(tmp / "bomb.yaml")]


def finished_run(tmp: Path) -> Path:
    assert main(recipe(tmp)) == 0
    return tmp / "run"


def damaged_manifest(tmp: Path) -> list[str]:
    argv = recipe(tmp)
    assert main(argv) == 0
    path = tmp / "run" / "manifest.json"
    data = json.loads(path.read_text())
    data["stages"]["download"] = ["not", "an", "object"]
    path.write_text(json.dumps(data))
    return argv


def shards(tmp: Path, meta: str | None = None, pickled: bool = False) -> list[str]:
    (tmp / "in").mkdir()
    if pickled:
        arr = np.array([{"a": 1}, None], dtype=object)
        np.savez(tmp / "in" / "shard_000000.npz", input_ids=arr)
    else:
        np.savez(tmp / "in" / "shard_000000.npz", input_ids=np.zeros((4, 3), np.uint16))
    if meta is not None:
        (tmp / "in" / "metadata.json").write_text(meta)
    out = ["shuffle", "--input-dir", str(tmp / "in"), "--output-dir", str(tmp / "out")]
    return [*out, "--shard-size", "2", "--seed", "1"]


def shards_into_file(tmp: Path) -> list[str]:
    argv = shards(tmp)
    (tmp / "out").write_text("a file")
    return argv


def report_of(tmp: Path, content: str) -> list[str]:
    (tmp / "rep").mkdir()
    (tmp / "rep" / REPORT_NAME).write_text(content)
    return ["report", str(tmp / "rep")]


def url_override(tmp: Path, monkeypatch, url: str) -> list[str]:
    monkeypatch.setenv("PIPELINE_URL_SHAKESPEARE", url)
    return recipe(tmp, download={"source": "shakespeare"})


def out_dir_is(tmp: Path, kind: str) -> list[str]:
    (tmp / "afile").write_text("x")
    target = tmp / "afile" if kind == "file" else tmp / "afile" / "run"
    return [*recipe(tmp), "--out-dir", str(target)]


# (id, argv factory(tmp, monkeypatch), words the one error line must contain)
FAILS = [
    (
        "nan-fraction",
        lambda t, m: [*recipe(t), "--set", "download.max_malformed_fraction=.nan"],
        ["max_malformed_fraction", "finite"],
    ),
    (
        "nan-min-score",
        lambda t, m: [*recipe(t, quality={}), "--set", "quality.min_score=.nan"],
        ["quality.min_score", "finite"],
    ),
    (
        "inf-number",
        lambda t, m: [*recipe(t, quality={}), "--set", "quality.l2=.inf"],
        ["quality.l2", "finite"],
    ),
    ("negative-seed", lambda t, m: [*recipe(t), "--set", "seed=-1"], ["seed", "got -1"]),
    (
        "negative-dedup-seed",
        lambda t, m: [*recipe(t, dedup={}), "--set", "dedup.seed=-7"],
        ["dedup.seed", "got -7"],
    ),
    ("huge-seed", lambda t, m: [*recipe(t), "--set", f"seed={10**30}"], ["seed", "must be in"]),
    ("billion-laughs", lambda t, m: billion_laughs(t), ["expands to more than", "aliases"]),
    (
        "binary-recipe",
        lambda t, m: ["data", "--config", _write(t, "b.yaml", bytes(range(256)))],
        ["binary"],
    ),
    (
        "utf16-jsonl",
        lambda t, m: jsonl(t, "\ufeff".encode("utf-16-le") + lines(3)),
        ["UTF-16", "iconv"],
    ),
    ("out-dir-is-file", lambda t, m: out_dir_is(t, "file"), ["afile", "not a folder"]),
    ("out-dir-under-file", lambda t, m: out_dir_is(t, "under"), ["afile", "not a folder"]),
    ("token-without-content", lambda t, m: with_tokenizer(t, _drop_content), ["added_tokens[0]"]),
    ("bad-split-regex", lambda t, m: with_tokenizer(t, _bad_regex), ["Split regex"]),
    (
        "binary-seed-set",
        lambda t, m: recipe(
            t, quality={"seed_set_path": _write(t, "seed.jsonl", b"\x81\x00" * 100)}
        ),
        ["seed.jsonl", "not valid"],
    ),
    (
        "inspect-cluster-of-tokenize",
        lambda t, m: ["inspect", str(finished_run(t)), "--stage", "tokenize", "--cluster", "1"],
        ["tokenize"],
    ),
    ("report-is-a-list", lambda t, m: report_of(t, "[]"), ["not a pipeline report", "list"]),
    (
        "report-without-stage",
        lambda t, m: report_of(t, '{"stages": [{"x": 1}]}'),
        ["stages[0]", "stage"],
    ),
    ("shuffle-pickled-npz", lambda t, m: shards(t, pickled=True), ["Python objects"]),
    ("shuffle-list-metadata", lambda t, m: shards(t, meta="[1, 2]"), ["metadata.json", "list"]),
    ("shuffle-corrupt-metadata", lambda t, m: shards(t, meta="{oops"), ["metadata.json", "JSON"]),
    ("shuffle-output-is-file", lambda t, m: shards_into_file(t), ["out", "not a folder"]),
    ("url-override-plain-path", lambda t, m: url_override(t, m, str(t)), ["http"]),
    ("url-override-file-scheme", lambda t, m: url_override(t, m, f"file://{t}"), ["http"]),
]


def _write(tmp: Path, name: str, data: bytes) -> str:
    (tmp / name).write_bytes(data)
    return str(tmp / name)


def _drop_content(obj: dict) -> None:
    del obj["added_tokens"][0]["content"]


def _bad_regex(obj: dict) -> None:
    obj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed["


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in FAILS], ids=[c[0] for c in FAILS])
def test_bad_input_is_one_clear_line(tmp_path, monkeypatch, capsys, make, words):
    argv = make(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    assert len(errors[0]) <= MAX_ERROR_CHARS + 7
    for w in words:
        assert w in errors[0], errors[0]


def test_billion_laughs_error_is_short(tmp_path, capsys):
    """A wrong value is quoted by a short prefix, never in full (an alias bomb made 39 MB)."""
    text = "download:\n  source: toy\n  max_docs:\n"
    text += "    - &a [" + ",".join(['"' + "x" * 50 + '"'] * 9) + "]\n"
    for prev, cur in zip("abc", "bcd", strict=True):
        text += f"    - &{cur} [{','.join(['*' + prev] * 9)}]\n"
    (tmp_path / "r.yaml").write_text(text)
    assert main(["data", "--config", str(tmp_path / "r.yaml")]) == 1
    err = capsys.readouterr().err
    assert len(err) < 300 and "download.max_docs" in err, err


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="Linux sysfs: unwritable even for root")
def test_unwritable_out_dir_is_one_line(tmp_path, capsys):
    assert main([*recipe(tmp_path), "--out-dir", "/sys/pipeline-test-run"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: /sys/pipeline-test-run: cannot create the run folder"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_unreadable_input_is_one_line(tmp_path, monkeypatch, capsys):
    """As a non-root user would see it (root reads anything, so the refusal is simulated)."""
    import builtins

    argv = jsonl(tmp_path, lines(5))
    real_open = builtins.open

    def refusing_open(file, *args, **kwargs):
        if str(file).endswith("in.jsonl"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing_open)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "in.jsonl" in err and "Permission denied" in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes anything")
@pytest.mark.parametrize("what", ["input", "out_dir"])
def test_permissions_are_one_line(tmp_path, capsys, what):
    argv = jsonl(tmp_path, lines(5))
    target = tmp_path / "in.jsonl" if what == "input" else tmp_path
    os.chmod(target, 0o000 if what == "input" else 0o555)
    try:
        assert main(argv) == 1
    finally:
        os.chmod(target, 0o644 if what == "input" else 0o755)
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err


# ---------------------------------------------------------------- handled and counted


def docs(run_dir: Path) -> list[str]:
    parts = Manifest.load(run_dir).parts("download")
    return [t for p in parts for t in read_table(p)["text"].to_pylist()]


def test_utf8_bom_is_stripped_not_a_bad_record(tmp_path):
    assert main(jsonl(tmp_path, b"\xef\xbb\xbf" + lines(3))) == 0
    assert docs(tmp_path / "run") == ["doc 0", "doc 1", "doc 2"]


def test_utf16_text_files_are_decoded(tmp_path):
    (tmp_path / "a.txt").write_bytes("héllo wörld".encode("utf-16"))
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbfplain")
    path = str(tmp_path / "*.txt")
    assert main(recipe(tmp_path, download={"source": "text", "path": path})) == 0
    assert docs(tmp_path / "run") == ["héllo wörld", "plain"]


def test_deeply_nested_json_is_a_counted_bad_record(tmp_path):
    deep = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    assert main(jsonl(tmp_path, lines(30) + deep, max_malformed_fraction=0.1)) == 0
    rep = json.loads((tmp_path / "run" / REPORT_NAME).read_text())
    assert rep["stages"][0]["stats"]["dropped_bad_json"] == 1


def test_damaged_manifest_entry_reruns_that_stage(tmp_path, capsys):
    assert main(damaged_manifest(tmp_path)) == 0
    assert "will re-run" in capsys.readouterr().err
    assert isinstance(Manifest.load(tmp_path / "run").stages["download"], dict)


def test_no_pickle_is_ever_loaded(tmp_path):
    """A pickle where a model belongs is refused, not executed."""
    (tmp_path / "model.npz").write_bytes(pickle.dumps({"x": 1}))
    argv = recipe(tmp_path, quality={"model_path": str(tmp_path / "model.npz")})
    assert main(argv) == 1
