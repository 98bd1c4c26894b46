"""Shared fixtures: small recipes run end to end inside tmp_path (never the working directory)."""

from __future__ import annotations

import pytest

from helpers import run_stages


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Downloads never touch ~/.cache: each test session gets its own cache folder."""
    monkeypatch.setenv("PIPELINE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def toy_run(tmp_path):
    """A 400-document toy corpus downloaded into tmp_path/run (4 parts)."""
    out = tmp_path / "run"
    run_stages(out, {"download": {"source": "toy", "max_docs": 400, "docs_per_part": 100}})
    return out
