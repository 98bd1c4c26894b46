"""Input files enter fingerprints by content: an input edited in place re-runs its stage and
what follows; a touched (same content) input does not; hashes are cached by size + mtime."""

from __future__ import annotations

import json
import os

import pytest

import pipeline.run.input_hashes as inputs_mod
from helpers import make_recipe
from pipeline.run.input_hashes import HashCache, input_fields
from pipeline.run.runner import fingerprint, run_recipe
from pipeline.stages import STAGES


def actions(items):
    return {i.name: i.action for i in items}


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))


TEXTS = [f"document number {i} with some words in it" for i in range(30)]


@pytest.fixture
def jsonl_run(tmp_path):
    src = tmp_path / "in.jsonl"
    write_jsonl(src, TEXTS)
    stages = {"download": {"source": "jsonl", "path": str(src)}, "clean": {"min_words": 1}}
    return src, lambda: make_recipe(tmp_path / "run", stages)


def test_input_edited_in_place_reruns_it_and_what_follows(jsonl_run):
    src, recipe = jsonl_run
    run_recipe(recipe(), progress=False)
    write_jsonl(src, [t.replace("number", "NUMBER") for t in TEXTS])  # same size, new content
    os.utime(src, ns=(1, 1))  # even with an old mtime: content decides
    items = run_recipe(recipe(), progress=False)
    assert actions(items) == {"download": "run", "clean": "run"}
    assert "input" in items[0].why and "changed" in items[0].why
    assert actions(run_recipe(recipe(), progress=False)) == {"download": "skip", "clean": "skip"}


def test_touched_input_is_not_rerun_and_hashes_are_cached(jsonl_run, monkeypatch):
    src, recipe = jsonl_run
    run_recipe(recipe(), progress=False)
    hashed = []
    real = inputs_mod.sha256_file
    monkeypatch.setattr(inputs_mod, "sha256_file", lambda p: hashed.append(p) or real(p))
    os.utime(src, ns=(10**18, 10**18))  # touched: re-hashed once, same content, no re-run
    assert actions(run_recipe(recipe(), progress=False)) == {"download": "skip", "clean": "skip"}
    assert len(hashed) == 1
    assert actions(run_recipe(recipe(), dry_run=True, progress=False))["download"] == "skip"
    assert len(hashed) == 1  # cached by (path, size, mtime, inode)


def test_every_file_a_stage_reads_is_an_input_field():
    fields = {name: set(input_fields(s.config_cls())) for name, s in STAGES.items()}
    assert "path" in fields["download"]
    assert "tokenizer_path" in fields["tokenize"]
    assert {"seed_set_path", "model_path"} <= fields["quality"]


@pytest.mark.parametrize(
    ("stage", "key", "content"),
    [
        ("tokenize", "tokenizer_path", '{"model": 1}'),
        ("quality", "seed_set_path", '{"text": "a", "label": "good"}\n'),
        ("quality", "model_path", "npz bytes"),
    ],
)
def test_named_files_change_the_fingerprint(tmp_path, stage, key, content):
    f = tmp_path / "file"
    f.write_text(content)
    cfg = STAGES[stage].config_cls(**{key: str(f)})
    cache = HashCache(None)
    before = fingerprint(stage, cfg, 0, None, inputs_mod.describe_inputs(cfg, cache))
    f.write_text(content.upper())
    os.utime(f, ns=(1, 1))
    after = fingerprint(stage, cfg, 0, None, inputs_mod.describe_inputs(cfg, cache))
    assert before != after


def test_a_folder_counts_every_file_below_it(tmp_path):
    """download.path or hf_path naming a folder: a nested file edited re-runs the stage."""
    (tmp_path / "data" / "train").mkdir(parents=True)
    (tmp_path / "data" / "train" / "a.parquet").write_bytes(b"one")
    (tmp_path / "data" / ".cache").mkdir()
    (tmp_path / "data" / ".cache" / "lock").write_bytes(b"ignored")
    cfg = STAGES["download"].config_cls(source="hf", hf_path=str(tmp_path / "data"))
    found = inputs_mod.input_files(cfg)
    assert [p.name for p in found] == ["a.parquet"]
    cache = HashCache(None)
    before = fingerprint("download", cfg, 0, None, inputs_mod.describe_inputs(cfg, cache))
    (tmp_path / "data" / "train" / "a.parquet").write_bytes(b"two")
    after = fingerprint("download", cfg, 0, None, inputs_mod.describe_inputs(cfg, cache))
    assert before != after


def test_a_quality_reference_file_enters_the_fingerprint(tmp_path):
    from pipeline.run.input_hashes import input_files
    from pipeline.stages.quality import QualityConfig

    ref = tmp_path / "ref.jsonl"
    ref.write_text('{"text": "a"}\n')
    assert input_files(QualityConfig(reference=str(ref))) == [ref]
    assert input_files(QualityConfig()) == []  # `self` names no file
