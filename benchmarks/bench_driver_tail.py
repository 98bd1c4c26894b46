"""Driver memory of pack and shard alone (not CI): tracemalloc in the driver while each stage
runs with 2 local workers on a synthetic tokenize output (lognormal lengths, median 100
tokens, 2,000 documents per part, 512 sequences per pack part, shards of 1,024), at two
corpus sizes, with the defaults and with a forced small `pack.window_docs` and
`shard.exact_max_sequences` (the bounded paths). The slope between the sizes is the
per-document (pack) or per-sequence (shard) driver term.

    .venv/bin/python benchmarks/bench_driver_tail.py [--docs 100000,400000]

Writes outputs/benchmarks/driver_tail.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

from bench_pack import fake_tokenize
from pipeline.executor import Executor
from pipeline.recipe import build_config
from pipeline.stage import StageContext, StageInputs
from pipeline.stages.pack import PackConfig
from pipeline.stages.pack import run as pack_run
from pipeline.stages.shard import ShardConfig
from pipeline.stages.shard import run as shard_run

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "driver_tail.json"
VARIANTS = {
    "default": ({}, {}),
    "forced": ({"window_docs": 10_000}, {"exact_max_sequences": 1_000}),
}


def traced(stage_run, cfg, work: Path, name: str, upstream: str) -> tuple[float, dict]:
    """(traced peak over start in bytes, stats) of one stage run in `work`."""
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    with Executor(2) as ex:
        ctx = StageContext(
            name,
            work,
            out,
            1,
            {upstream: StageInputs.from_dir(upstream, work / upstream)},
            upstream,
            ex,
            False,
            logging.getLogger("bench"),
        )
        tracemalloc.start()
        start = tracemalloc.get_traced_memory()[0]
        res = stage_run(cfg, ctx)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak - start, res.stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", default="100000,400000")
    ap.add_argument("--seq-len", type=int, default=256)
    args = ap.parse_args()
    sizes = [int(x) for x in args.docs.split(",")]
    rows: dict = {}
    for n in sizes:
        work = Path(tempfile.mkdtemp(prefix="bench-tail-"))
        try:
            rng = np.random.default_rng(0)
            lengths = np.maximum(2, rng.lognormal(np.log(100), 1.0, n)).astype(np.int64)
            fake_tokenize(work, lengths, 2000)
            for variant, (pack_cfg, shard_cfg) in VARIANTS.items():
                # small output parts and shards: one written inline (a map of one item runs in
                # the driver) adds a constant, not a term that grows with the corpus
                pack_keys = {"seq_len": args.seq_len, "sequences_per_part": 512, **pack_cfg}
                pcfg = build_config(PackConfig, pack_keys, "pack")
                p_bytes, p_stats = traced(pack_run, pcfg, work, "pack", "tokenize")
                scfg = build_config(ShardConfig, {"shard_size": 1024, **shard_cfg}, "shard")
                s_bytes, s_stats = traced(shard_run, scfg, work, "shard", "pack")
                rows.setdefault(variant, []).append(
                    {
                        "docs": n,
                        "sequences": p_stats["sequences"],
                        "windows": p_stats["windows"],
                        "pack_traced_mb": round(p_bytes / 1e6, 2),
                        "shard_traced_mb": round(s_bytes / 1e6, 2),
                        "shuffle_method": s_stats["shuffle_method"],
                    }
                )
                print(variant, rows[variant][-1], flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for variant, rs in rows.items():
        a, b = rs[0], rs[-1]
        pack_slope = (b["pack_traced_mb"] - a["pack_traced_mb"]) * 1e6 / (b["docs"] - a["docs"])
        d_seq = b["sequences"] - a["sequences"]
        shard_slope = (b["shard_traced_mb"] - a["shard_traced_mb"]) * 1e6 / d_seq
        rows[variant] = {
            "runs": rs,
            "pack_bytes_per_doc": round(pack_slope, 1),
            "shard_bytes_per_sequence": round(shard_slope, 1),
        }
        print(f"{variant}: pack {pack_slope:.1f} B/doc, shard {shard_slope:.1f} B/sequence")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"benchmark": "driver_tail", "variants": rows}, indent=2) + "\n")
    print(OUT)


if __name__ == "__main__":
    main()
