"""Shared fixtures: small recipes run end to end inside tmp_path (never the working directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.recipe import apply_overrides, build_recipe
from pipeline.runner import run_recipe


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Downloads never touch ~/.cache: each test session gets its own cache folder."""
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def make_recipe(out_dir: Path, stages: dict[str, Any], overrides: list[str] | None = None, **run):
    """Build a validated Recipe from a dict; `stages` maps stage name -> block."""
    raw = {"name": "test", "seed": 7, "out_dir": str(out_dir), "workers": 1, **run, **stages}
    return build_recipe(apply_overrides(raw, overrides or []))


def run_stages(out_dir: Path, stages: dict[str, Any], **run):
    """Run a recipe made of `stages` into `out_dir`; returns the plan items."""
    return run_recipe(make_recipe(out_dir, stages, **run), progress=False)


@pytest.fixture
def toy_run(tmp_path):
    """A 400-document toy corpus downloaded into tmp_path/run (4 parts)."""
    out = tmp_path / "run"
    run_stages(out, {"download": {"source": "toy", "max_docs": 400, "docs_per_part": 100}})
    return out
