"""Benchmark the line_dedup stage on the demo corpus; writes outputs/benchmarks/line_dedup.json.

The demo recipe's input (recipes/data_demo.yaml: python_docs, 100 documents per part) goes
through the download stage once; then the line_dedup stage runs inline (one core) `--repeats`
times, interleaved with a naive reference (a Python dict of every stripped line -> documents, the
memory-unbounded way) that also checks the stage's removals line by line. Throughput is input
text MB per CPU second (time.process_time), medians of the repeats; the first run of each
warms imports and caches and is not counted. `--copies K` repeats the corpus K times under new
ids (a larger, highly duplicated input).
The stage's own Parquet reads and writes are timed apart (`parquet_io_*`, the same calls on
the same parts) and the core is the stage minus them.
Usage: .venv/bin/python benchmarks/bench_line_dedup.py [--repeats 5] [--copies 1]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pipeline.dedup import lines
from pipeline.executor import Executor
from pipeline.io import PARQUET_FAST_KW
from pipeline.parts import column_bytes, docs_table, part_name, write_table
from pipeline.stage import StageContext, StageInputs
from pipeline.stages import line_dedup

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "line_dedup.json"
SEED = 1234


def demo_parts(folder: Path, copies: int) -> list[Path]:
    """The demo recipe's documents (python_docs), 100 per part, `copies` times."""
    from pipeline.sources.python_docs import generate

    recs = list(generate())
    texts = [r.text for r in recs] * copies
    ids = [f"{r.id}#{c}" for c in range(copies) for r in recs]
    paths = []
    for i, lo in enumerate(range(0, len(texts), 100)):
        chunk = texts[lo : lo + 100]
        paths.append(folder / part_name(i))
        write_table(paths[-1], docs_table(ids[lo : lo + 100], chunk, ["python_docs"] * len(chunk)))
    return paths


def run_stage(root: Path, seed: int) -> tuple[float, dict, Path]:
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    ctx = StageContext(
        name="line_dedup",
        run_dir=root,
        out_dir=out,
        seed=seed,
        inputs={"download": StageInputs.from_dir("download", root / "download")},
        upstream="download",
        executor=Executor(1),
        progress=False,
        log=logging.getLogger("bench"),
    )
    t0 = time.process_time()
    res = line_dedup.run(line_dedup.LineDedupConfig(), ctx)
    return time.process_time() - t0, res.all_stats(), out


def parquet_io(root: Path, parts: list[Path]) -> float:
    """CPU seconds of the stage's Parquet work alone, the same calls on the same parts: read
    each part once, whole, on one thread without pre-buffering (map 1) and write it back at
    the stage's settings, pipeline.io.PARQUET_FAST_KW (map 3). The stage also writes each
    part's rejected rows (not counted here)."""
    t0 = time.process_time()
    for i, p in enumerate(parts):
        with pq.ParquetFile(p, pre_buffer=False) as f:
            t = f.read(use_threads=False)
        write_table(root / "io" / part_name(i), t, PARQUET_FAST_KW)
    return time.process_time() - t0


def naive(parts: list[Path], seed: int) -> tuple[float, int]:
    """Every stripped line -> the documents it is in (a dict of sets), then the removals."""
    t0 = time.process_time()
    texts = [t for p in parts for t in pq.read_table(p, columns=["text"]).column(0).to_pylist()]
    keys = lines.doc_keys(0, len(texts), seed).tolist()
    seen: dict[str, set[int]] = {}
    for d, text in enumerate(texts):
        for s in map(str.strip, text.split("\n")):
            if s:
                seen.setdefault(s, set()).add(keys[d])
    first = {s: min(ks) for s, ks in seen.items() if len(ks) >= 2}
    removed = sum(
        1
        for d, text in enumerate(texts)
        for s in map(str.strip, text.split("\n"))
        if s in first and first[s] != keys[d]
    )
    return time.process_time() - t0, removed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--copies", type=int, default=1)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-line-dedup-"))
    try:
        parts = demo_parts(root / "download", args.copies)
        nbytes = sum(column_bytes(pq.read_table(p, columns=["text"])) for p in parts)
        stage_s, naive_s, io_s = [], [], []
        stats: dict = {}
        for r in range(args.repeats + 1):  # interleaved; run 0 warms up
            s, stats, _ = run_stage(root, SEED)
            n, removed = naive(parts, SEED)
            io = parquet_io(root, parts)
            assert removed == stats["lines_removed"], (removed, stats["lines_removed"])
            if r:
                stage_s.append(s)
                naive_s.append(n)
                io_s.append(io)
        med, med_naive = statistics.median(stage_s), statistics.median(naive_s)
        med_io = statistics.median(io_s)
        result = {
            "corpus": f"demo (python_docs) x {args.copies}",
            "docs": stats["docs_in"],
            "text_mb": round(nbytes / 1e6, 3),
            "parts": len(parts),
            "repeats": args.repeats,
            "stage_cpu_s_median": round(med, 4),
            "stage_mb_per_cpu_s": round(nbytes / 1e6 / med, 1),
            "target_mb_per_cpu_s": 30,
            "parquet_io_cpu_s_median": round(med_io, 4),
            "parquet_io_mb_per_cpu_s": round(nbytes / 1e6 / med_io, 1),
            "core_cpu_s": round(med - med_io, 4),
            "core_mb_per_cpu_s": round(nbytes / 1e6 / (med - med_io), 1),
            "naive_dict_cpu_s_median": round(med_naive, 4),
            "naive_dict_mb_per_cpu_s": round(nbytes / 1e6 / med_naive, 1),
            "lines_in": stats["lines_in"],
            "lines_removed": stats["lines_removed"],
            "line_bytes_removed": stats["line_bytes_removed"],
            "repeated_lines": stats["repeated_lines"],
            "docs_changed": stats["docs_changed"],
            "dropped_short_after_line_dedup": stats["dropped_short_after_line_dedup"],
            "removals_match_naive": True,
            "top_lines": stats["examples"][:5],
            "spread_s": [round(float(x), 4) for x in np.sort(stage_s)],
            "python": platform.python_version(),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
