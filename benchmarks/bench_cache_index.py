"""BatchCache index cost against capacity (issue 28, defect 14: `bench --cache-batches 10**8`
took 80 s for 20 steps, every get/put scanning the capacity). Times get and put per access on a
trace that fills the cache past capacity (evictions included), per policy, in-process and
shared, at capacities 1e3 .. 1e8, plus the issue's command (`pipeline bench` with 10**8
batches, 20 steps) end to end. Writes outputs/benchmarks/cache_index.json.

    PYTHONPATH=src python benchmarks/bench_cache_index.py [--capacities 1e3 1e8] [--accesses 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.loader.bench import BenchConfig, environment, run_bench
from pipeline.loader.cache import BatchCache
from pipeline.shards import save_npz


def per_access_us(policy: str, capacity: int, accesses: int, shared: bool) -> dict:
    """Mean microseconds of a get (and the put after a miss) over `accesses` accesses of a
    trace of keys 0..2*accesses/3 with repeats: hits, misses and (small capacities) evictions."""
    rng = np.random.default_rng(0)
    trace = rng.integers(0, max(2 * accesses // 3, 1), accesses).tolist()
    batch = {"input_ids": np.ones((8, 64), np.uint16)}
    cache = BatchCache(policy, capacity, trace=trace if policy == "opt" else None, shared=shared)
    try:
        t0 = time.perf_counter()
        for key in trace:
            if cache.get(key) is None:
                cache.put(key, batch)
        seconds = time.perf_counter() - t0
        stats = cache.stats()
    finally:
        cache.close()
    return {
        "policy": policy,
        "capacity": capacity,
        "shared": shared,
        "accesses": accesses,
        "us_per_access": 1e6 * seconds / accesses,
        "hits": stats["hits"],
        "evictions": stats["evictions"],
    }


def issue_command(tmp: Path) -> dict:
    """`pipeline bench --shards S --preset cache --cache-batches 100000000 --steps 20`."""
    folder = tmp / "train"
    folder.mkdir()
    ids = np.arange(256 * 128, dtype=np.uint16).reshape(256, 128)
    save_npz(folder / "shard_000000.npz", {"input_ids": ids, "segment_ids": np.ones_like(ids)})
    meta = {"seq_len": 128, "shards": [{"file": "shard_000000.npz", "num_samples": 256}]}
    (folder / "metadata.json").write_text(json.dumps(meta))
    cfg = BenchConfig(str(folder), preset="cache", cache_batches=10**8, steps=20, batch_size=8)
    t0 = time.perf_counter()
    r = run_bench(cfg, progress=False)
    return {"command": "bench --preset cache --cache-batches 10**8 --steps 20 --batch-size 8",
            "seconds": time.perf_counter() - t0, "batches": r["batches"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capacities", nargs="+", type=float, default=[1e3, 1e5, 1e7, 1e8])
    ap.add_argument("--accesses", type=int, default=2000)
    args = ap.parse_args()
    rows = []
    for cap in (int(c) for c in args.capacities):
        for policy in ("lru", "lfu", "opt", "fifo", "rr"):
            for shared in (False, True):
                rows.append(per_access_us(policy, cap, args.accesses, shared))
                r = rows[-1]
                print(f"{policy:4} cap {cap:>11,} shared={shared!s:5} "
                      f"{r['us_per_access']:8.1f} us/access", file=sys.stderr)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        end_to_end = issue_command(Path(tmp))
    print(f"issue command: {end_to_end['seconds']:.2f} s", file=sys.stderr)
    out = Path("outputs/benchmarks/cache_index.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"environment": environment(), "per_access": rows, "issue_command": end_to_end}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
