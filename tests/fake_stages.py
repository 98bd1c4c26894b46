"""A test-only stage: lowercases every document part by part through the executor.

Registered in tests under the name `clean` (the fixed stage order has no free slot), via
monkeypatch, so runner features are tested whatever real stages exist.
"""

from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from pipeline.parts import part_name, read_table, write_table
from pipeline.stage import DocCounts, Stage, StageContext, StageResult


@dataclass(frozen=True)
class LowerConfig:
    drop_prefix: str = "zzz"  # documents whose id starts with this are dropped
    fail_after_parts: int = -1  # >= 0: raise after writing this many parts (a simulated crash)


def lower_part(cfg: LowerConfig, job: tuple[int, str, str]) -> dict:
    index, path, out_dir = job
    if cfg.fail_after_parts >= 0 and index >= cfg.fail_after_parts:
        raise RuntimeError("simulated crash")
    # test hooks beside the run folder (the config, hence the fingerprint, stays the same):
    # `crash_at` holds a part index that raises, `slow` seconds to sleep per part, and every
    # part computed is appended to `lower_parts.txt`
    hooks = Path(out_dir).parent.parent
    if (hooks / "crash_at").exists() and index == int((hooks / "crash_at").read_text()):
        raise RuntimeError(f"simulated crash at part {index}")
    if (hooks / "slow").exists():
        time.sleep(float((hooks / "slow").read_text()))
    with open(hooks / "lower_parts.txt", "a") as f:
        f.write(f"{index}\n")
    table = read_table(Path(path))
    keep = pc.invert(pc.starts_with(table.column("id"), cfg.drop_prefix))
    kept = table.filter(keep)
    kept = kept.set_column(1, "text", pc.utf8_lower(kept.column("text")))
    write_table(Path(out_dir) / part_name(index), kept)
    dropped = {"prefix": table.num_rows - kept.num_rows}
    counts = DocCounts(table.num_rows, kept.num_rows, dropped)
    return {"outputs": [part_name(index)], "counts": counts, "pid": os.getpid()}


def run(cfg: LowerConfig, ctx: StageContext) -> StageResult:
    jobs = [(i, str(p), str(ctx.out_dir)) for i, p in enumerate(ctx.input_parts)]
    results = ctx.executor.map(functools.partial(lower_part, cfg), jobs)
    calls = ctx.run_dir.parent / "lower_calls.txt"
    with open(calls, "a") as f:
        f.write(json.dumps(len(results)) + "\n")
    stats = {"worker_pids": len({r["pid"] for r in results})}
    counts = [r["counts"] for r in results]  # the runner sums them
    return StageResult([part_name(i) for i in range(len(jobs))], stats, counts)


LOWER = Stage("clean", LowerConfig, run, version="test")


def computed_parts(run_dir: Path) -> list[int]:
    """Part indices lower_part computed (in any process), in completion order."""
    path = Path(run_dir).parent / "lower_parts.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def calls(run_dir: Path) -> int:
    path = Path(run_dir).parent / "lower_calls.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0
