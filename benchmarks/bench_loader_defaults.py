"""The loader's defaults on the global-shuffle shape of issue 25: 64 shards x 4096 samples x
seq_len 2048 (uint16 input_ids + segment_ids: 1 GiB of input_ids, 2 GiB of files, page-cached),
batch 32, one process. GlobalSampler(ds, 32) + get_batch with ShardedTokenDataset's default
max_open_shards (every shard, bounded by the open-file limit) against the old default of 2, and
a yardstick: the same rows copied one by one from plain np.memmap views (what the machine's
memory gives under its current load).
Wall MB/s and MB per CPU-second (the process's user + system time: what one core delivers on a
shared machine). Synthetic shards in a temp folder, removed after. Writes
outputs/benchmarks/loader_defaults.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.loader import GlobalSampler, ShardedTokenDataset
from pipeline.loader.bench import environment, write_result
from pipeline.shards import save_npz, shard_name

ROOT = Path(__file__).resolve().parents[1]
SEQ, B = 2048, 32


def make_shards(folder: Path, num_shards: int, rows: int) -> None:
    rng = np.random.default_rng(0)
    entries = []
    for i in range(num_shards):
        ids = rng.integers(0, 50257, (rows, SEQ), dtype=np.uint16)
        seg = np.cumsum(rng.random((rows, SEQ)) < 1 / 400, axis=1).astype(np.uint16) + 1
        save_npz(folder / shard_name(i), {"input_ids": ids, "segment_ids": seg})
        entries.append({"file": shard_name(i), "num_samples": rows})
    meta = {"seq_len": SEQ, "fields": ["input_ids", "segment_ids"], "shards": entries}
    (folder / "metadata.json").write_text(json.dumps(meta))
    for p in folder.glob("*.npz"):  # page cache warm: the loader is timed, not the disk
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def run(folder: Path, max_open: int | None, steps: int) -> dict:
    ds = ShardedTokenDataset(folder, max_open_shards=max_open)
    sampler = GlobalSampler(ds, B, seed=0)
    it = iter(sampler)
    for _ in range(20):  # warm-up: maps opened, first pages faulted
        ds.get_batch(next(it))
    t0, c0, nbytes = time.perf_counter(), time.process_time(), 0
    for _ in range(steps):
        nbytes += ds.get_batch(next(it))["input_ids"].nbytes
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "max_open_shards": ds.max_open_shards,
        "input_ids_mb_per_s": round(nbytes / secs / 1e6, 1),
        # per CPU-second: what one core delivers, whatever else the machine runs
        "input_ids_mb_per_cpu_s": round(nbytes / max(cpu, 1e-9) / 1e6, 1),
        "shard_opens": ds.num_opens,
        "seconds": round(secs, 3),
    }


def reference(folder: Path, steps: int) -> dict:
    """The machine's yardstick: the same batches copied row by row from np.memmap views of
    every shard, opened once (no dataset, no checks): what a perfect loader costs here."""
    from pipeline.shards import npz_member

    ds = ShardedTokenDataset(folder)
    maps = [npz_member(p, "input_ids") for p in ds.shard_files]
    it = iter(GlobalSampler(ds, B, seed=0))
    for _ in range(20):
        next(it)
    out = np.empty((B, SEQ), np.uint16)
    t0, c0, nbytes = time.perf_counter(), time.process_time(), 0
    for _ in range(steps):
        shard, row = ds.locate(next(it))
        for i, (sh, r) in enumerate(zip(shard.tolist(), row.tolist(), strict=True)):
            out[i] = maps[sh][r]
        nbytes += out.nbytes
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "max_open_shards": len(maps),
        "input_ids_mb_per_s": round(nbytes / secs / 1e6, 1),
        "input_ids_mb_per_cpu_s": round(nbytes / max(cpu, 1e-9) / 1e6, 1),
        "shard_opens": len(maps),
        "seconds": round(secs, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=1000, help="batches timed per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "outputs" / "benchmarks")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-loader-defaults-") as tmp:
        folder = Path(tmp)
        make_shards(folder, args.shards, args.rows)
        runs = {"default": [], "max_open_shards_2": [], "reference_row_copy": []}
        for _ in range(args.repeats):  # interleaved: a load spike hits all alike
            runs["default"].append(run(folder, None, args.steps))
            runs["max_open_shards_2"].append(run(folder, 2, args.steps))
            runs["reference_row_copy"].append(reference(folder, args.steps))
    summary = {
        name: {
            "median_input_ids_mb_per_s": statistics.median(r["input_ids_mb_per_s"] for r in rs),
            "median_input_ids_mb_per_cpu_s": statistics.median(
                r["input_ids_mb_per_cpu_s"] for r in rs
            ),
            "max_open_shards": rs[0]["max_open_shards"],
            "runs": rs,
        }
        for name, rs in runs.items()
    }
    for name, s in summary.items():
        print(f"{name:>18}: {s['median_input_ids_mb_per_s']:,.0f} MB/s of input_ids, "
              f"{s['median_input_ids_mb_per_cpu_s']:,.0f} MB per CPU-s "
              f"(max_open_shards {s['max_open_shards']})")  # fmt: skip
    result = {
        "benchmark": "loader_defaults",
        "shape": {"shards": args.shards, "rows": args.rows, "seq_len": SEQ, "batch": B},
        "target_mb_per_s": 1000,
        "results": summary,
        **environment(),
    }
    print(write_result(result, args.out_dir, "loader_defaults"))


if __name__ == "__main__":
    main()
