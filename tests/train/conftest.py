"""A tiny data run (toy corpus -> tokenize -> pack -> shard) shared by the train tests, and a
small pretrain config on it. Built once per session in a temp folder (~3 s)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from helpers import run_stages

TINY_STAGES = {
    "download": {"source": "toy", "max_docs": 200, "docs_per_part": 100},
    "tokenize": {"vocab_size": 300},
    "pack": {"seq_len": 32},
    "shard": {"shard_size": 64, "eval_fraction": 0.05},
}


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "run"
    run_stages(out, TINY_STAGES)
    return out


@pytest.fixture
def tiny_cfg(tiny_run):
    """A model of a few thousand parameters: a step takes milliseconds."""
    from pipeline.train.config import PretrainConfig

    return dataclasses.replace(
        PretrainConfig(),
        run_dir=str(tiny_run),
        n_layer=1,
        n_head=2,
        d_model=16,
        batch_size=4,
        max_steps=8,
        warmup_steps=2,
        eval_every=4,
        save_every=3,
        eval_tokens=256,
        lr=1e-2,
        min_lr=1e-3,
        device="cpu",
    )
