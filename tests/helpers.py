"""Helpers the tests share: recipes run in tmp_path, a stage context by hand, fake upstreams.

On the import path through pytest's `pythonpath = ["tests"]`: `from helpers import ...`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from pipeline.config import build_config
from pipeline.executor import Executor
from pipeline.parts import part_name, write_table
from pipeline.recipe import apply_overrides, build_recipe
from pipeline.run.runner import run_recipe
from pipeline.stage import StageContext, StageInputs
from pipeline.stages import dedup as dedup_stage
from pipeline.stages.dedup import DedupConfig
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


def run_stage_on_parts(
    tmp_path: Path, parts: list[pa.Table], stage: Any, cfg: Any, workers: int, seed: int, out: str
):
    """Stage module `stage` (its `run`) with config `cfg` on `parts` written to <tmp_path>/in as
    a download output; returns (StageResult, its out folder <tmp_path>/<out>)."""
    for i, t in enumerate(parts):
        write_table(tmp_path / "in" / part_name(i), t)
    out_dir = tmp_path / out
    out_dir.mkdir()
    with Executor(workers) as ex:
        ctx = StageContext(
            name=stage.STAGE.name,
            run_dir=tmp_path,
            out_dir=out_dir,
            seed=seed,
            inputs={"download": StageInputs.from_dir("download", tmp_path / "in")},
            upstream="download",
            executor=ex,
            progress=False,
        )
        return stage.run(cfg, ctx), out_dir


def run_dedup_parts(
    tmp_path: Path, parts: list[pa.Table], workers: int = 1, stage_seed: int = 11, **cfg
):
    """The dedup stage on `parts` (run_stage_on_parts, out folder out-<workers>). `stage_seed`
    is the runner-derived seed; `seed` in `cfg` is the dedup block's own."""
    cfg_obj = DedupConfig(**cfg)
    return run_stage_on_parts(
        tmp_path, parts, dedup_stage, cfg_obj, workers, stage_seed, f"out-{workers}"
    )


@contextlib.contextmanager
def moto_s3(monkeypatch, bucket: str) -> Iterator[tuple[Any, str]]:
    """(pyarrow S3FileSystem, URL query) of a local moto S3 server (`dev` extra) holding an empty
    `bucket`, deleted after: moto keeps its buckets per process, across servers, so each test
    uses a bucket of its own."""
    server = pytest.importorskip("moto.server")
    import pyarrow.fs as pafs

    for key, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)
    moto = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        host, port = moto.get_host_and_port()
        opts = {"endpoint_override": f"{host}:{port}", "scheme": "http", "region": "us-east-1"}
        fs = pafs.S3FileSystem(**opts, allow_bucket_creation=True, allow_bucket_deletion=True)
        fs.create_dir(bucket)
        yield fs, f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
        fs.delete_dir(bucket)
    finally:
        moto.stop()


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
