"""Per-epoch re-packing cost: RepackingDataset's epoch_packing on 1M document lengths, and a
whole RepackingDataset (open + one epoch's batches) on a synthetic tokenize folder.

Lengths: lognormal, median 400 tokens, sigma 1.2 (as bench_pack.py), seq_len 2048. Reports
seconds per epoch (median of repeats), ns per document, padding %, and how many of an epoch's
sequences reappear with the very same documents in the next epoch. Writes
outputs/benchmarks/repack.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.loader.repack import RepackingDataset, epoch_packing
from pipeline.packing import lower_bound, pack_bfd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "repack.json"
SEQ_LEN = 2048


def lengths(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(400), 1.2, n).astype(np.int64), 1, 100_000)


def groups(packing, bin_order, starts) -> set[frozenset[int]]:
    """The document sets of sequences holding two or more documents (a document filling a
    sequence alone has no neighbour to change)."""
    out = set()
    for b in bin_order.tolist():
        if starts[b + 1] - starts[b] > 1:
            out.add(frozenset(packing.item_doc[starts[b] : starts[b + 1]].tolist()))
    return out


def time_epochs(lens: np.ndarray, method: str, window: int | None, repeats: int) -> dict:
    times = []
    for e in range(repeats):
        t0 = time.perf_counter()
        packing, order, starts = epoch_packing(lens, SEQ_LEN, 0, e, method, window)
        times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    pad = 1 - packing.num_tokens / (packing.num_bins * SEQ_LEN)
    return {
        "method": method,
        "window_docs": window,
        "seconds_per_epoch": round(sec, 4),
        "ns_per_doc": round(sec / len(lens) * 1e9, 1),
        "sequences": packing.num_bins,
        "over_lower_bound": packing.num_bins - lower_bound(lens, SEQ_LEN),
        "padding_pct": round(100 * pad, 3),
    }


def same_neighbours(lens: np.ndarray, method: str, window: int) -> float:
    a = groups(*epoch_packing(lens, SEQ_LEN, 0, 0, method, window))
    b = groups(*epoch_packing(lens, SEQ_LEN, 0, 1, method, window))
    return round(len(a & b) / len(b), 4)


def end_to_end(num_docs: int, repeats: int) -> dict:
    """Open a tokenize folder of num_docs documents, then per epoch: set_epoch + every batch."""
    lens = lengths(num_docs, 1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tokenize"
        folder.mkdir()
        rng = np.random.default_rng(0)
        toks = rng.integers(2, 60000, int(lens.sum()), dtype=np.uint16)
        toks[np.cumsum(lens) - 1] = 1  # EOS ends each document
        np.save(folder / "part-00000.tokens.npy", toks)
        (folder / "meta.json").write_text(json.dumps({"eos_id": 1, "pad_id": 0}))
        t0 = time.perf_counter()
        ds = RepackingDataset(tmp, SEQ_LEN, seed=0, epoch=0)
        open_s = time.perf_counter() - t0
        pack_s, read_s = [], []
        for e in range(1, repeats + 1):
            t0 = time.perf_counter()
            ds.set_epoch(e)
            t1 = time.perf_counter()
            while ds.next_batch(64) is not None:
                pass
            pack_s.append(t1 - t0)
            read_s.append(time.perf_counter() - t1)
        return {
            "docs": num_docs,
            "tokens": int(lens.sum()),
            "sequences": len(ds),
            "open_seconds": round(open_s, 3),
            "set_epoch_seconds": round(statistics.median(pack_s), 4),
            "read_epoch_seconds": round(statistics.median(read_s), 3),
            "repack_share_of_epoch_read": round(
                statistics.median(pack_s) / statistics.median(read_s), 4
            ),
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--e2e-docs", type=int, default=50_000)
    args = ap.parse_args()
    lens = lengths(args.docs, 0)
    t0 = time.perf_counter()
    fixed = pack_bfd(lens, SEQ_LEN)
    fixed_s = time.perf_counter() - t0
    rows = [
        time_epochs(lens, "bfd", None, args.repeats),  # the default: one BFD, ties reshuffled
        time_epochs(lens, "bfd", 4096, args.repeats),
        time_epochs(lens, "concat", None, args.repeats),
    ]
    sub = lens[:100_000]  # sequences of >= 2 documents whose document set recurs next epoch
    for r in rows:
        r["same_neighbours_next_epoch"] = same_neighbours(sub, r["method"], r["window_docs"])
    result = {
        "docs": args.docs,
        "seq_len": SEQ_LEN,
        "pack_stage_bfd_once": {
            "seconds": round(fixed_s, 4),
            "sequences": fixed.num_bins,
            "padding_pct": round(100 * (1 - fixed.num_tokens / (fixed.num_bins * SEQ_LEN)), 3),
        },
        "epoch_packing": rows,
        "end_to_end": end_to_end(args.e2e_docs, args.repeats),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
