"""Download stage throughput on a generated JSONL: the serial reader (main's, in the driver) vs
the byte-range reader (executor tasks), 1 and 2 local workers, medians of --repeats runs,
interleaved so machine load hits every configuration alike. Every run's parts must have the
same sha256s (the byte-identity check on real text).

    PYTHONPATH=src python benchmarks/bench_download.py --mb 200 --repeats 3

The corpus is bench_scale's (real text from /work/shared/corpora, perturbed copies), written to
a temp folder, never into the repo. Results: outputs/benchmarks/download.json (git-ignored).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import make_corpus  # noqa: E402
from pipeline.executor import Executor  # noqa: E402
from pipeline.stage import StageContext  # noqa: E402
from pipeline.stages import download  # noqa: E402

OUT = ROOT / "outputs" / "benchmarks" / "download.json"
CONFIGS = [("serial", 1), ("serial", 2), ("split", 1), ("split", 2)]


def run_once(
    path: Path, out: Path, reader: str, workers: int, docs_per_part: int, trace: bool = False
) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cfg = download.DownloadConfig(source="jsonl", path=str(path), docs_per_part=docs_per_part)
    fn = download._run_split if reader == "split" else download._run_serial
    with Executor(workers) as ex:
        ctx = StageContext("download", out.parent, out, 0, {}, None, ex, progress=False)
        ex.map(_warm, range(4 * workers), "warm")  # start the pool, imports, outside the timing
        pool = list(getattr(ex._pool, "_processes", {}) or {}) if ex._pool else []
        w0, c0 = _cpu(pool), time.process_time()
        if trace:  # the driver's Python/numpy allocations (not Arrow buffers): slow, separate
            tracemalloc.start()
        t0 = time.perf_counter()
        res = fn(cfg, ctx)
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] if trace else None
        tracemalloc.stop()
        driver_cpu, worker_cpu = time.process_time() - c0, _cpu(pool) - w0
    digest = hashlib.sha256()
    for rel in sorted(res.outputs):
        digest.update(rel.encode() + (out / rel).read_bytes())
    return {
        "seconds": seconds,
        "driver_cpu_s": driver_cpu,
        "worker_cpu_s": worker_cpu,
        "sha256": digest.hexdigest(),
        "parts": len(res.outputs),
        "driver_traced_peak_mb": None if peak is None else round(peak / 1e6, 2),
        "docs": res.counts[0].docs_in,
    }


def _warm(_: int) -> None:
    import pipeline.stages.download.split  # noqa: F401  (what the tasks import)

    time.sleep(0.2)  # long enough for every worker to take one


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (Linux /proc)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="text megabytes in the corpus")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--docs-per-part", type=int, default=5000)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--trace-only", action="store_true", help="only the tracemalloc runs")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-download-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        info = make_corpus(corpus, args.mb)
        file_mb = corpus.stat().st_size / 1e6
        traced = {
            f"{r}-{w}": run_once(corpus, Path(tmp) / "out", r, w, args.docs_per_part, True)
            for r, w in (("serial", 1), ("split", 2))
        }
        for name, r in traced.items():
            print(f"traced {name}: driver peak {r['driver_traced_peak_mb']} MB", flush=True)
        if args.trace_only:
            traced_only = {
                k: {"docs": v["docs"], "driver_traced_peak_mb": v["driver_traced_peak_mb"]}
                for k, v in traced.items()
            }
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(
                json.dumps({"corpus": info, "traced": traced_only}, indent=2) + "\n"
            )
            return 0
        runs: dict[str, list[dict]] = {f"{r}-{w}": [] for r, w in CONFIGS}
        run_once(corpus, Path(tmp) / "out", "serial", 1, args.docs_per_part)  # warm caches
        for rep in range(args.repeats):
            for reader, workers in CONFIGS:
                r = run_once(corpus, Path(tmp) / "out", reader, workers, args.docs_per_part)
                runs[f"{reader}-{workers}"].append(r)
                print(
                    f"rep {rep} {reader:6s} w={workers}: {r['seconds']:6.2f} s wall, "
                    f"driver {r['driver_cpu_s']:.2f} + workers {r['worker_cpu_s']:.2f} CPU-s",
                    flush=True,
                )
    digests = {r["sha256"] for rs in [*runs.values(), traced.values()] for r in rs}
    table = {}
    for name, rs in runs.items():
        med = statistics.median(r["seconds"] for r in rs)
        drv = statistics.median(r["driver_cpu_s"] for r in rs)
        cpu = statistics.median(r["driver_cpu_s"] + r["worker_cpu_s"] for r in rs)
        table[name] = {
            "median_s": round(med, 3),
            "runs_s": [round(r["seconds"], 3) for r in rs],
            "file_mb_per_s": round(file_mb / med, 2),
            "driver_cpu_s": round(drv, 3),
            "total_cpu_s": round(cpu, 3),
            "driver_mb_per_cpu_s": round(file_mb / drv, 1) if drv else None,
            "mb_per_cpu_s": round(file_mb / cpu, 2),
        }
    result = {
        "corpus": {**info, "file_mb": round(file_mb, 1), "docs_per_part": args.docs_per_part},
        "configs": table,
        "speedup_split2_vs_serial1": round(
            table["serial-1"]["median_s"] / table["split-2"]["median_s"], 3
        ),
        "all_outputs_identical": len(digests) == 1,
        "traced": {
            k: {"docs": v["docs"], "driver_traced_peak_mb": v["driver_traced_peak_mb"]}
            for k, v in traced.items()
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
