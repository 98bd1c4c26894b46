"""Recipe validation: one test per error kind, overrides, defaults."""

from __future__ import annotations

import pytest

from helpers import make_recipe
from pipeline.errors import RecipeError
from pipeline.recipe import dump_recipe, load_recipe, parse_override


def test_defaults_filled_in(tmp_path):
    r = make_recipe(tmp_path, {"download": {"source": "toy"}})
    assert r.stages["download"].docs_per_part == 5000
    assert r.run.workers == 1
    text = dump_recipe(r)
    assert "docs_per_part: 5000" in text and "max_malformed_fraction: 0.05" in text


def test_unknown_stage_key_suggests_closest(tmp_path):
    with pytest.raises(
        RecipeError, match=r"download\.max_doc: unknown key \(did you mean 'max_docs'"
    ):
        make_recipe(tmp_path, {"download": {"source": "toy", "max_doc": 5}})


def test_unknown_top_level_key_suggests_closest(tmp_path):
    with pytest.raises(RecipeError, match=r"downlaod: unknown key.*did you mean 'download'"):
        make_recipe(tmp_path, {"downlaod": {"source": "toy"}})


def test_wrong_type_names_path_value_and_expected(tmp_path):
    with pytest.raises(
        RecipeError, match=r"download\.docs_per_part: got 'many', expected an integer"
    ):
        make_recipe(tmp_path, {"download": {"source": "toy", "docs_per_part": "many"}})


def test_bool_is_not_an_integer(tmp_path):
    with pytest.raises(RecipeError, match=r"workers: got True, expected an integer"):
        make_recipe(tmp_path, {"download": {"source": "toy"}}, workers=True)


def test_out_of_range(tmp_path):
    with pytest.raises(
        RecipeError, match=r"download\.max_malformed_fraction: must be in \[0.0, 1.0\], got 1.5"
    ):
        make_recipe(tmp_path, {"download": {"source": "toy", "max_malformed_fraction": 1.5}})
    with pytest.raises(RecipeError, match=r"workers: must be in \[1, inf\), got 0"):
        make_recipe(tmp_path, {"download": {"source": "toy"}}, workers=0)


def test_unknown_source_suggests_closest(tmp_path):
    with pytest.raises(
        RecipeError, match=r"download\.source: got 'tinystory'.*did you mean 'tinystories'"
    ):
        make_recipe(tmp_path, {"download": {"source": "tinystory"}})


def test_file_source_needs_an_existing_path(tmp_path):
    with pytest.raises(RecipeError, match=r"download\.path: is required when source is 'jsonl'"):
        make_recipe(tmp_path, {"download": {"source": "jsonl"}})
    with pytest.raises(RecipeError, match=r"download\.path: no file matches"):
        make_recipe(
            tmp_path, {"download": {"source": "jsonl", "path": str(tmp_path / "nope*.jsonl")}}
        )


def test_no_stage_enabled(tmp_path):
    with pytest.raises(RecipeError, match="no stage enabled"):
        make_recipe(tmp_path, {})
    with pytest.raises(RecipeError, match="no stage enabled"):
        make_recipe(tmp_path, {"download": False})


def test_a_run_starts_with_download(tmp_path):
    from pipeline.stages import STAGES

    later = next(name for name in STAGES if name != "download")
    with pytest.raises(RecipeError, match=rf"{later}: has no input"):
        make_recipe(tmp_path, {later: {}})


def test_needs_are_checked_before_anything_runs(tmp_path):
    """download + clean + pack: pack needs tokenize. One line names it; nothing is written."""
    from pipeline.cli import main

    stages = {"download": {"source": "toy", "max_docs": 50}, "clean": {}, "pack": {}}
    with pytest.raises(RecipeError, match=r"^pack: needs the tokenize stage: add a `tokenize:`"):
        make_recipe(tmp_path / "run", stages)
    with pytest.raises(RecipeError, match=r"^shard: needs the pack stage"):
        make_recipe(tmp_path / "run", {"download": {"source": "toy"}, "tokenize": {}, "shard": {}})
    path = tmp_path / "r.yaml"
    path.write_text("download: {source: toy, max_docs: 50}\nclean:\npack:\n")
    assert main(["data", "--config", str(path), "--out-dir", str(tmp_path / "out"), "-q"]) == 1
    assert not (tmp_path / "out").exists()


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ndownload: {source: toy\n")
    with pytest.raises(RecipeError, match=r"bad\.yaml:\d+: not valid YAML"):
        load_recipe(path)


def test_missing_recipe_file(tmp_path):
    with pytest.raises(RecipeError, match="not found"):
        load_recipe(tmp_path / "missing.yaml")


def test_overrides_are_typed_like_the_field(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: x\nout_dir: out\ndownload:\n  source: toy\n")
    r = load_recipe(path, ["download.max_docs=500", "workers=2", "name=2024", "seed=3"])
    assert r.stages["download"].max_docs == 500
    assert r.run.workers == 2 and r.run.name == "2024" and r.run.seed == 3
    with pytest.raises(
        RecipeError, match=r"download\.max_docs: got 'lots', expected an integer or null"
    ):
        load_recipe(path, ["download.max_docs=lots"])


def test_parse_override_rejects_missing_equals():
    with pytest.raises(RecipeError, match="expected stage.key=value"):
        parse_override("download.max_docs")
    assert parse_override("download.separator=<|endoftext|>") == (
        ["download", "separator"],
        "<|endoftext|>",
    )


def test_configs_are_frozen(tmp_path):
    r = make_recipe(tmp_path, {"download": {"source": "toy"}})
    with pytest.raises(AttributeError):
        r.stages["download"].max_docs = 3  # type: ignore[misc]
