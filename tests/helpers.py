"""Helpers the tests share: recipes run in tmp_path, a stage context by hand, fake upstreams.

On the import path through pytest's `pythonpath = ["tests"]`: `from helpers import ...`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.config import build_config
from pipeline.executor import Executor
from pipeline.parts import part_name, write_table
from pipeline.recipe import apply_overrides, build_recipe
from pipeline.run.runner import run_recipe
from pipeline.stage import StageContext, StageInputs
from pipeline.stages.pack import PackConfig
from pipeline.stages.pack import run as pack_run

EOS, PAD = 1, 0  # the fake tokenizer's special ids
# the toy recipe at a size the report tests run in seconds (conftest's `report_runs`)
TOY_RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "data_toy.yaml"
TOY_SMALL = ["--set", "download.max_docs=400", "--set", "tokenize.vocab_size=1024", "-q"]


def make_recipe(out_dir: Path, stages: dict[str, Any], overrides: list[str] | None = None, **run):
    """Build a validated Recipe from a dict; `stages` maps stage name -> block."""
    raw = {"name": "test", "seed": 7, "out_dir": str(out_dir), "workers": 1, **run, **stages}
    return build_recipe(apply_overrides(raw, overrides or []))


def run_stages(out_dir: Path, stages: dict[str, Any], **run):
    """Run a recipe made of `stages` into `out_dir`; returns the plan items."""
    return run_recipe(make_recipe(out_dir, stages, **run), progress=False)


def make_ctx(
    run_dir: Path, name: str, upstream: str, workers: int = 1, seed: int = 11
) -> StageContext:
    """A context whose input is everything in <run_dir>/<upstream> (as the runner would list)."""
    out = run_dir / f".tmp-{name}"
    out.mkdir(parents=True, exist_ok=True)
    return StageContext(
        name=name,
        run_dir=run_dir,
        out_dir=out,
        seed=seed,
        inputs={upstream: StageInputs.from_dir(upstream, run_dir / upstream)},
        upstream=upstream,
        executor=Executor(workers),
        progress=False,
        log=logging.getLogger("test"),
    )


def fake_tokenize(
    run_dir: Path,
    docs_per_part: list[list[int]],
    sources=None,
    seed: int = 0,
    dtype: str = "uint16",
) -> list[Path]:
    """Write run_dir/tokenize like the tokenize stage: doc k of part i has the given length,
    tokens = random ids in [2, 1000) with EOS last. Returns the top-level part files, sorted."""
    out = run_dir / "tokenize"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files = []
    for i, lens in enumerate(docs_per_part):
        toks = []
        for n in lens:
            doc = rng.integers(2, 1000, n).astype(dtype)
            if n:
                doc[-1] = EOS
            toks.append(doc)
        arr = np.concatenate(toks) if toks else np.zeros(0, dtype)
        np.save(out / part_name(i, ".tokens.npy"), arr)
        src = [(sources or ["web"])[k % len(sources or ["web"])] for k in range(len(lens))]
        table = pa.table(
            {
                "id": [f"d{i}-{k}" for k in range(len(lens))],
                "source": src,
                "num_tokens": pa.array(lens, pa.int64()),
            }
        )
        write_table(out / part_name(i, ".docs.parquet"), table)
        files += [out / part_name(i, ".docs.parquet"), out / part_name(i, ".tokens.npy")]
    meta = {
        "vocab_size": 1000,
        "eos_id": EOS,
        "pad_id": PAD,
        "dtype": dtype,
        "tokenizer_sha256": "f" * 64,
        "special_tokens": {"<|endoftext|>": EOS},
    }
    (out / "meta.json").write_text(json.dumps(meta))
    return sorted(files)


def run_pack(run_dir: Path, cfg: dict, workers: int = 1):
    """Run pack on run_dir/tokenize, move the output to run_dir/pack; returns the result."""
    ctx = make_ctx(run_dir, "pack", "tokenize", workers)
    try:
        res = pack_run(build_config(PackConfig, cfg, "pack"), ctx)
    finally:
        ctx.executor.close()
    ctx.out_dir.rename(run_dir / "pack")
    return res
