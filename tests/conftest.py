"""Shared fixtures: small recipes run end to end inside tmp_path (never the working directory)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from helpers import TOY_RECIPE, TOY_SMALL, run_stages

# no example database, and hypothesis's own caches in the temp dir: nothing of the suite's is
# written into the working tree (.hypothesis/)
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "pipeline-tests-hypothesis"))
settings.register_profile("pipeline", database=None, deadline=None)
settings.load_profile("pipeline")


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


@pytest.fixture
def hf_offline(tmp_path, monkeypatch):
    """Hugging Face libraries offline, with every cache under tmp_path (never ~/.cache).

    `datasets` and `huggingface_hub` read these variables at import, so an earlier import in
    the session is patched too. Returns the datasets cache folder."""
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants as hub

    home = tmp_path / "hf_home"
    cache = home / "datasets"
    for var, value in {
        "HF_HOME": home,
        "HF_DATASETS_CACHE": cache,
        "HF_HUB_CACHE": home / "hub",
        "HF_MODULES_CACHE": home / "modules",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }.items():
        monkeypatch.setenv(var, str(value))
    cfg = datasets.config
    monkeypatch.setattr(cfg, "HF_CACHE_HOME", str(home))
    monkeypatch.setattr(cfg, "HF_DATASETS_CACHE", cache)
    monkeypatch.setattr(cfg, "HF_MODULES_CACHE", home / "modules")
    monkeypatch.setattr(cfg, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
    monkeypatch.setattr(cfg, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
    monkeypatch.setattr(cfg, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(cfg, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "HF_HOME", str(home))
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(home / "hub"))
    return cache


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory) -> dict[str, Path]:
    """Toy recipe runs for the report tests: `a` (all stages), `b` (the toy recipe's stages,
    clean.min_words and quality.min_score raised), `part` (as b, download and clean only)."""
    from pipeline.cli import main

    root = tmp_path_factory.mktemp("report_runs")
    moved = ["--set", "clean.min_words=120", "--set", "quality.min_score=0.6"]
    off = [f"--set={name}=false" for name in ("dedup", "quality", "tokenize", "pack", "shard")]
    # the two stages the toy recipe leaves out (decontaminate needs an eval file)
    (root / "eval.txt").write_text("An evaluation passage that no toy document contains.\n")
    web = ["--set=line_dedup.min_docs=3", f"--set=decontaminate.eval_texts=[{root / 'eval.txt'}]"]
    runs = {"a": web, "b": moved, "part": [*moved, *off]}
    for name, extra in runs.items():
        args = ["data", "--config", str(TOY_RECIPE), "--out-dir", str(root / name)]
        assert main([*args, *TOY_SMALL, *extra]) == 0
    return {name: root / name for name in runs}
