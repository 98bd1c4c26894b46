"""Docs stay true to the code: the recipe reference is generated, every key has a meaning."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipeline.docgen import field_docs, generate
from pipeline.recipe import RunConfig
from pipeline.stages import STAGES

ROOT = Path(__file__).resolve().parent.parent


def test_recipe_reference_is_current():
    current = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8")
    assert current == generate(), "docs/recipes.md is stale: run `make docs`"


def test_every_config_key_has_a_meaning():
    for cls in [RunConfig, *(s.config_cls for s in STAGES.values())]:
        docs = field_docs(cls)
        missing = [f.name for f in dataclasses.fields(cls) if not docs[f.name]]
        assert not missing, f"{cls.__name__}: fields without a doc: {missing}"


def test_each_stage_has_its_doc_and_readme_links_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for link in [part.split(")")[0] for part in readme.split("](")[1:]]:
        assert (ROOT / link).is_file(), link
    for doc in ("clean", "dedup", "quality", "tokenizer", "packing", "shards", "sources"):
        assert f"docs/{doc}.md" in readme
