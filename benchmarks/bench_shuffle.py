"""`pipeline shuffle` benchmark: peak RSS and time of the two-phase rebalance vs an in-memory one.

Synthetic unbalanced shards (uint16 input_ids + segment_ids [n, seq_len], seeded random ids,
sizes varying 16x) go to a temp folder. Each run is a fresh child process reporting its own peak
RSS (VmHWM), so runs never see each other's peaks. Stated bound above the interpreter baseline:
one field of the largest input shard + one output shard (all fields) + one 4 MiB copy block.
Peer: load everything, concatenate, permute, split. Writes outputs/benchmarks/shuffle.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from pipeline.rebalance import COPY_BYTES

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "shuffle.json"

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import numpy as np
from pipeline.shards import save_npz, shard_sizes
from pipeline.rebalance import shuffle_shards
mode, src, dst, size, seed = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), 7
t0 = time.perf_counter()
if mode == "ours":
    shuffle_shards(src, dst, size, seed)
elif mode == "in_memory":
    paths = sorted(src.glob("*.npz"))
    data = {}
    for p in paths:
        with np.load(p) as z:
            for k in z.files:
                data.setdefault(k, []).append(z[k])
    data = {k: np.concatenate(v) for k, v in data.items()}
    n = len(next(iter(data.values())))
    perm = np.random.default_rng(seed).permutation(n)
    data = {k: v[perm] for k, v in data.items()}
    dst.mkdir()
    a = 0
    for j, m in enumerate(shard_sizes(n, size)):
        save_npz(dst / f"shard_{j:06d}.npz", {k: v[a:a + m] for k, v in data.items()})
        a += m
sec = time.perf_counter() - t0
# VmHWM: this process's peak RSS since exec (ru_maxrss keeps the parent's peak across fork+exec)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
kb = int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": sec, "peak_rss_mb": kb / 1024}))
"""


def make_input(folder: Path, total_rows: int, num_shards: int, seq_len: int) -> list[int]:
    rng = np.random.default_rng(0)
    weights = np.geomspace(1, 16, num_shards)
    rng.shuffle(weights)
    sizes = np.floor(weights / weights.sum() * total_rows).astype(int)
    sizes[0] += total_rows - sizes.sum()
    folder.mkdir(parents=True)
    for i, n in enumerate(sizes):
        ids = rng.integers(0, 50_000, (n, seq_len), dtype=np.uint16)
        seg = np.repeat(np.arange(1, 5, dtype=np.uint16), seq_len // 4)[None, :].repeat(n, 0)
        np.savez(folder / f"shard_{i:06d}.npz", input_ids=ids, segment_ids=seg)
    return sizes.tolist()


def run_child(mode: str, src: Path, dst: Path, shard_size: int) -> dict:
    shutil.rmtree(dst, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(src), str(dst), str(shard_size)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=16_384, help="samples in all")
    ap.add_argument("--shards", type=int, default=10, help="input shards (unbalanced)")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--shard-size", type=int, default=1024, help="samples per output shard")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-shuffle-"))
    try:
        sizes = make_input(work / "in", args.rows, args.shards, args.seq_len)
        row_bytes = args.seq_len * 2  # uint16 per field
        # one field of the largest input shard + one output shard + one copy block of scratch
        bound_mb = (max(sizes) * row_bytes + args.shard_size * row_bytes * 2 + COPY_BYTES) / 2**20
        result = {
            "benchmark": "shuffle",
            "rows": args.rows,
            "seq_len": args.seq_len,
            "input_shard_sizes": sizes,
            "shard_size": args.shard_size,
            "data_mb": round(args.rows * row_bytes * 2 / 2**20, 1),
            "bound_above_baseline_mb": round(bound_mb, 1),
        }
        base = [
            run_child("none", work / "in", work / "none", args.shard_size)
            for _ in range(args.repeats)
        ]
        result["baseline_rss_mb"] = round(statistics.median(b["peak_rss_mb"] for b in base), 1)
        for mode in ("ours", "in_memory"):
            runs = [
                run_child(mode, work / "in", work / mode, args.shard_size)
                for _ in range(args.repeats)
            ]
            rss = statistics.median(r["peak_rss_mb"] for r in runs)
            result[mode] = {
                "seconds": round(statistics.median(r["seconds"] for r in runs), 3),
                "peak_rss_mb": round(rss, 1),
                "above_baseline_mb": round(rss - result["baseline_rss_mb"], 1),
            }
        # 2 MB slack: interpreter objects (zipfile, permutations, dicts) beside the arrays
        result["ours"]["within_bound"] = result["ours"]["above_baseline_mb"] <= bound_mb + 2
        result["rss_ratio_in_memory_over_ours"] = round(
            result["in_memory"]["above_baseline_mb"]
            / max(result["ours"]["above_baseline_mb"], 1e-9),
            2,
        )
        result["time_ratio_ours_over_in_memory"] = round(
            result["ours"]["seconds"] / result["in_memory"]["seconds"], 2
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(OUT)


if __name__ == "__main__":
    main()
