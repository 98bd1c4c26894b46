"""The driver's commit hashing: sha256 of every output file of a run folder, one by one (as
before) vs `io.sha256_files` (a thread pool), interleaved, medians of --repeats after one
warm-up pass (so both read from the page cache: this measures the CPU side).

    .venv/bin/python benchmarks/bench_commit_hash.py --dir RUN_FOLDER [--repeats 3]

Writes outputs/benchmarks/commit_hash.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pipeline.io import iter_files, sha256_file, sha256_files  # noqa: E402

OUT = ROOT / "outputs" / "benchmarks" / "commit_hash.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True, help="a run folder (or any folder)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    paths = [p for p in iter_files(args.dir) if not p.name.startswith(".")]
    total = sum(p.stat().st_size for p in paths)
    want = [sha256_file(p) for p in paths]  # warm-up: the page cache holds the files after it
    times: dict[str, list[float]] = {"serial": [], "threads": []}
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        assert [sha256_file(p) for p in paths] == want
        times["serial"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        assert sha256_files(paths) == want
        times["threads"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "files": len(paths),
        "bytes": total,
        "cpus": os.cpu_count(),
        "seconds": times,
        "median_seconds": med,
        "mb_per_s": {k: round(total / 1e6 / v, 1) for k, v in med.items()},
        "speedup": round(med["serial"] / med["threads"], 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("files", "bytes", "mb_per_s", "speedup")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
