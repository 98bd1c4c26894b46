"""`pipeline export --shards --to megatron|mds|nanogpt|litdata` benchmark: token MB/s per core.

Synthetic packed shards (uint16 input_ids + segment_ids [n, seq_len]: documents of ~512 tokens
ending in eos, 5% of rows with a padded tail, like the pack stage's output) go to a temp folder
and are read once (page cache warm, so the write path is what is timed). Each format is
exported with `pipeline.export.export` (temp folder + rename included) in this one process:
MB/s = input_ids bytes of the shards / wall seconds, and per core = / CPU seconds of the
process. Target: >= 200 MB/s per core. Writes outputs/benchmarks/export.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.export import export
from pipeline.exporters import TRAINER_FORMATS
from pipeline.loader.bench import environment, write_result
from pipeline.shards import save_npz, shard_name

ROOT = Path(__file__).resolve().parents[1]
EOS, PAD, VOCAB = 50256, 0, 50257


def packed_rows(rng: np.random.Generator, n: int, seq_len: int) -> dict[str, np.ndarray]:
    cuts = rng.random((n, seq_len)) < 1 / 512  # a new document starts here
    cuts[:, 0] = True
    seg = np.cumsum(cuts, axis=1).astype(np.uint16)
    ids = rng.integers(1, VOCAB - 1, (n, seq_len), dtype=np.uint16)
    ends = np.zeros((n, seq_len), bool)
    ends[:, :-1] = cuts[:, 1:]
    ends[:, -1] = True
    ids[ends] = EOS
    padded = np.flatnonzero(rng.random(n) < 0.05)
    for r in padded:
        tail = int(rng.integers(1, seq_len // 4))
        seg[r, -tail:], ids[r, -tail:] = 0, PAD
    return {"input_ids": ids, "segment_ids": seg}


def make_run(root: Path, shards: int, rows: int, seq_len: int) -> int:
    """shard/train (all shards but one) and shard/eval (one); returns input_ids bytes."""
    rng = np.random.default_rng(0)
    nbytes = 0
    for folder, count in (("train", shards - 1), ("eval", 1)):
        out = root / "shard" / folder
        out.mkdir(parents=True)
        entries = []
        for i in range(count):
            arrays = packed_rows(rng, rows, seq_len)
            save_npz(out / shard_name(i), arrays)
            nbytes += arrays["input_ids"].nbytes
            entries.append({"file": shard_name(i), "num_samples": rows, "sha256": ""})
        meta = {
            "num_samples": rows * count, "seq_len": seq_len, "dtype": "uint16",
            "fields": ["input_ids", "segment_ids"],
            "field_dtypes": {"input_ids": "uint16", "segment_ids": "uint16"},
            "vocab_size": VOCAB, "eos_id": EOS, "pad_id": PAD, "shards": entries,
        }  # fmt: skip
        (out / "metadata.json").write_text(json.dumps(meta))
    for p in root.rglob("*.npz"):  # warm the page cache: time the export, not the disk
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    return nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--rows", type=int, default=2048, help="rows per shard")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=2, help="best of this many exports")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "outputs" / "benchmarks")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        run = Path(tmp) / "run"
        nbytes = make_run(run, args.shards, args.rows, args.seq_len)
        for fmt in TRAINER_FORMATS:
            best = None
            for _ in range(args.repeats):
                out = Path(tmp) / f"out-{fmt}"
                shutil.rmtree(out, ignore_errors=True)
                w0, c0 = time.perf_counter(), time.process_time()
                export(run, out, fmt, shards=True, progress=False)
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
                row = {
                    "wall_s": round(wall, 3),
                    "cpu_s": round(cpu, 3),
                    "mb_per_s": round(nbytes / wall / 1e6, 1),
                    "mb_per_s_per_core": round(nbytes / max(cpu, 1e-9) / 1e6, 1),
                    "output_bytes": size,
                }
                if best is None or row["wall_s"] < best["wall_s"]:
                    best = row
                shutil.rmtree(out, ignore_errors=True)
            results[fmt] = best
            print(f"{fmt:>9}: {best['mb_per_s']:,.0f} MB/s wall, "
                  f"{best['mb_per_s_per_core']:,.0f} MB/s per core")  # fmt: skip
    result = {
        "benchmark": "export",
        "input_ids_bytes": nbytes,
        "shards": args.shards,
        "rows_per_shard": args.rows,
        "seq_len": args.seq_len,
        "target_mb_per_s_per_core": 200,
        "formats": results,
        **environment(),
    }
    print(write_result(result, args.out_dir, "export"))


if __name__ == "__main__":
    main()
