"""GlobalSampler vs torch's DistributedSampler, side by side in one process: time to the first
batch (order build included), index memory on one rank, time per step, and time to resume at
mid-epoch. Writes outputs/benchmarks/sampler.json. Medians of `--repeats` runs.

    PYTHONPATH=src python benchmarks/bench_sampler.py [--sizes 1e6 1e7] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from pathlib import Path
from unittest import mock

import numpy as np

from pipeline.loader import GlobalSampler
from pipeline.loader import order as order_mod

P, B, STEPS = 8, 32, 200  # 8 ranks, 32 samples per rank per step; time per step over 200 steps


def ours(n: int, mode: str) -> dict:
    limit = {"array": 1 << 62, "feistel": 0}[mode]
    with mock.patch.object(order_mod, "ARRAY_MAX_SAMPLES", limit):
        tracemalloc.start()
        t0 = time.perf_counter()
        s = GlobalSampler(n, B, seed=1, world_size=P, rank=3, order="global")
        it = iter(s)
        next(it)
        first = time.perf_counter() - t0
        mem = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            next(it)
        step = (time.perf_counter() - t0) / STEPS
        state = s.state_dict()
        state["cursor"] = n // 2
        t0 = time.perf_counter()
        r = GlobalSampler(n, B, seed=1, world_size=P, rank=3, order="global")
        r.load_state_dict(state)
        next(iter(r))
        resume = time.perf_counter() - t0
    return {"first_batch_s": first, "peak_index_bytes": mem, "step_s": step, "resume_s": resume}


def torch_ds(n: int) -> dict:
    import torch
    from torch.utils.data import DistributedSampler

    tracemalloc.start()
    t0 = time.perf_counter()
    s = DistributedSampler(range(n), num_replicas=P, rank=3, shuffle=True, seed=1)
    batches = torch.utils.data.BatchSampler(s, B, drop_last=False)
    it = iter(batches)
    next(it)
    first = time.perf_counter() - t0
    mem = tracemalloc.get_traced_memory()[1] + 8 * n  # + the randperm tensor (not traced)
    tracemalloc.stop()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        next(it)
    step = (time.perf_counter() - t0) / STEPS
    t0 = time.perf_counter()  # no state: resuming at mid-epoch means skipping the batches
    it = iter(batches)
    for _ in range(n // 2 // (P * B)):
        next(it)
    next(it)
    resume = time.perf_counter() - t0
    del torch
    return {"first_batch_s": first, "peak_index_bytes": mem, "step_s": step, "resume_s": resume}


def median(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    p.add_argument("--huge", type=float, nargs="+", default=[1e9, 1e12])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    rows = []
    for n in [int(x) for x in args.sizes]:
        for name, fn in (
            ("GlobalSampler global (array)", lambda n=n: ours(n, "array")),
            ("GlobalSampler global (Feistel)", lambda n=n: ours(n, "feistel")),
            ("torch DistributedSampler + BatchSampler", lambda n=n: torch_ds(n)),
        ):
            rows.append({"n": n, "sampler": name, **median([fn() for _ in range(args.repeats)])})
    for n in [int(x) for x in args.huge]:  # only an O(1)-memory order can hold these
        runs = [ours(n, "feistel") for _ in range(args.repeats)]
        rows.append({"n": n, "sampler": "GlobalSampler global (Feistel)", **median(runs)})
    for r in rows:
        print(
            f"N={r['n']:>14,}  {r['sampler']:<42} first batch {r['first_batch_s'] * 1e3:9.2f} ms  "
            f"index memory {r['peak_index_bytes'] / r['n']:8.3f} B/sample  "
            f"step {r['step_s'] * 1e6:8.1f} us  resume at N/2 {r['resume_s'] * 1e3:9.2f} ms"
        )
    out = Path("outputs/benchmarks/sampler.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"world_size": P, "batch_size": B, "steps_timed": STEPS, "repeats": args.repeats}
    out.write_text(json.dumps({"config": meta, "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
