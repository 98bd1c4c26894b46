"""Packing benchmark: 1M document lengths, naive / concat / our BFD vs pure-Python BFD peers.

Length sets: lognormal (median 400 tokens, sigma 1.2) and a bootstrap of real web documents
(dolma CC sample, /work/shared/corpora; tokens ~ UTF-8 bytes / 4 + 1 EOS). Reports docs/s
(median of repeats), sequences, padding %, gap to ceil(tokens / seq_len) and documents cut.
Peers run side by side: a pure-Python segment-tree BFD (Ding et al. 2024's optimised BFD, as
third-party reproductions implement it) on the same 1M lengths, and the textbook O(n * bins) BFD
on a 20k subsample. Writes outputs/benchmarks/pack.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline.executor import Executor
from pipeline.io import sha256_file
from pipeline.packing import (
    chunk,
    concat_docs_split,
    lower_bound,
    pack_bfd,
    pack_concat,
    pack_naive,
)
from pipeline.parts import part_name, write_table
from pipeline.stage import StageContext, StageInputs
from pipeline.stages.pack import PackConfig
from pipeline.stages.pack import run as pack_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from oracles import best_fit_decreasing_reference  # noqa: E402  (the test oracle, tests/)

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
OUT = ROOT / "outputs" / "benchmarks" / "pack.json"


def real_lengths(n: int, seed: int) -> np.ndarray:
    """Bootstrap n token lengths from the dolma CC web sample (bytes / 4 + 1, a BPE-ish proxy)."""
    sizes = []
    for path in sorted((CORPORA / "dolma_cc_web").glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                text = json.loads(line).get("text", "")
                if text:
                    sizes.append(len(text.encode("utf-8")) // 4 + 1)
    base = np.array(sizes, np.int64)
    return np.random.default_rng(seed).choice(base, n, replace=True), len(base)


def segment_tree_bfd(sizes: list[int], capacity: int) -> int:
    """Peer: BFD with a max segment tree over capacities 1..capacity, holding counts of open bins
    per remaining capacity; best fit = leftmost capacity >= size with a bin. Pure Python."""
    size = 1
    while size < capacity + 1:
        size *= 2
    count = [0] * (capacity + 1)
    tree = [-1] * (2 * size)  # max capacity present in the subtree, -1 if none

    def update(cap: int) -> None:
        i = cap + size
        tree[i] = cap if count[cap] > 0 else -1
        i //= 2
        while i:
            left, right = tree[2 * i], tree[2 * i + 1]
            tree[i] = left if left > right else right
            i //= 2

    def find(s: int) -> int:  # smallest capacity >= s present
        if tree[1] < s:
            return -1
        i = 1
        while i < size:
            i = 2 * i if tree[2 * i] >= s else 2 * i + 1
        return i - size

    bins = 0
    for s in sorted(sizes, reverse=True):
        c = find(s)
        if c < 0:
            bins += 1
            c = capacity
        else:
            count[c] -= 1
            update(c)
        if c - s > 0:
            count[c - s] += 1
            update(c - s)
    return bins


def timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def bench_one(name: str, lengths: np.ndarray, seq_len: int, repeats: int, peer_docs: int) -> dict:
    n = len(lengths)
    lb = lower_bound(lengths, seq_len)
    order = np.random.default_rng(0).permutation(n)
    row: dict = {
        "lengths": name,
        "seq_len": seq_len,
        "docs": n,
        "tokens": int(lengths.sum()),
        "lower_bound_sequences": lb,
        "docs_longer_than_seq_len": int((lengths > seq_len).sum()),
    }
    for strat, fn in (
        ("bfd", lambda: pack_bfd(lengths, seq_len)),
        ("concat", lambda: pack_concat(lengths, seq_len, order)),
        ("naive", lambda: pack_naive(lengths, seq_len)),
    ):
        sec, pk = timed(fn, repeats)
        slots = pk.num_bins * seq_len
        row[strat] = {
            "seconds": round(sec, 4),
            "docs_per_s": round(n / sec),
            "sequences": pk.num_bins,
            "padding_pct": round(100 * (slots - pk.num_tokens) / slots, 4),
            "gap_to_lower_bound_pct": round(100 * (pk.num_bins / lb - 1), 4),
            "docs_split": pk.docs_split(),
        }
    row["concat"]["docs_split_check"] = concat_docs_split(lengths, seq_len, order)
    row["truncations_avoided_vs_concat"] = row["concat"]["docs_split"] - row["bfd"]["docs_split"]
    _, _, items = chunk(lengths, seq_len)
    t0 = time.perf_counter()
    peer_bins = segment_tree_bfd(items.tolist(), seq_len)
    sec = time.perf_counter() - t0
    row["peer_segment_tree_bfd_python"] = {
        "seconds": round(sec, 3),
        "docs_per_s": round(n / sec),
        "sequences": peer_bins,
        "same_bins_as_ours": peer_bins == row["bfd"]["sequences"],
    }
    sub = lengths[:peer_docs]
    _, _, sub_items = chunk(sub, seq_len)
    t0 = time.perf_counter()
    ref = best_fit_decreasing_reference(sub_items.tolist(), seq_len)
    sec = time.perf_counter() - t0
    ours_sub = pack_bfd(sub, seq_len).num_bins
    row["peer_textbook_bfd_python"] = {
        "docs": len(sub),
        "seconds": round(sec, 3),
        "docs_per_s": round(len(sub) / sec),
        "sequences": ref,
        "same_bins_as_ours": ref == ours_sub,
    }
    row["speedup_vs_segment_tree_python"] = round(
        row["bfd"]["docs_per_s"] / row["peer_segment_tree_bfd_python"]["docs_per_s"], 1
    )
    row["speedup_vs_textbook_python"] = round(
        row["bfd"]["docs_per_s"] / row["peer_textbook_bfd_python"]["docs_per_s"], 1
    )
    return row


def bench_windows(name: str, lengths: np.ndarray, seq_len: int, windows: list[int]) -> dict:
    """BFD over windows of `w` consecutive documents, each packed apart (the stage's
    `pack.window_docs`), vs one global BFD: sequences and padding lost to windowing."""
    glob = pack_bfd(lengths, seq_len).num_bins
    row: dict = {"lengths": name, "seq_len": seq_len, "docs": len(lengths), "global_bfd": glob}
    lb = lower_bound(lengths, seq_len)
    for w in windows:
        t0 = time.perf_counter()
        bins = sum(
            pack_bfd(lengths[a : a + w], seq_len).num_bins for a in range(0, len(lengths), w)
        )
        sec = time.perf_counter() - t0
        slots = bins * seq_len
        row[f"window_{w}"] = {
            "sequences": bins,
            "extra_sequences_vs_global_pct": round(100 * (bins / glob - 1), 4),
            "padding_pct": round(100 * (slots - int(lengths.sum())) / slots, 4),
            "gap_to_lower_bound_pct": round(100 * (bins / lb - 1), 4),
            "seconds": round(sec, 3),
        }
    return row


def fake_tokenize(run_dir: Path, lengths: np.ndarray, docs_per_part: int) -> None:
    """tokenize's layout (tokens.npy + docs.parquet per part, meta.json) with random uint16 ids."""
    out = run_dir / "tokenize"
    out.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i, lo in enumerate(range(0, len(lengths), docs_per_part)):
        lens = lengths[lo : lo + docs_per_part]
        np.save(
            out / part_name(i, ".tokens.npy"), rng.integers(2, 50_000, int(lens.sum()), np.uint16)
        )
        table = pa.table(
            {
                "id": [str(k) for k in range(lo, lo + len(lens))],
                "source": ["web"] * len(lens),
                "num_tokens": pa.array(lens, pa.int64()),
            }
        )
        write_table(out / part_name(i, ".docs.parquet"), table)
    meta = {"vocab_size": 50_000, "eos_id": 1, "pad_id": 0, "dtype": "uint16"}
    (out / "meta.json").write_text(json.dumps(meta))


def bench_stage(lengths: np.ndarray, seq_len: int, repeats: int) -> dict:
    """The whole pack stage (read lengths, BFD, gather tokens, write parts), workers 1 and 2."""
    work = Path(tempfile.mkdtemp(prefix="bench-pack-"))
    row: dict = {"docs": len(lengths), "tokens": int(lengths.sum()), "seq_len": seq_len}
    try:
        fake_tokenize(work, lengths, 10_000)
        digests = []
        for workers in (1, 2):
            times = []
            for _ in range(repeats):
                out = work / f"pack-{workers}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                with Executor(workers) as ex:
                    ctx = StageContext(
                        "pack",
                        work,
                        out,
                        1,
                        {"tokenize": StageInputs.from_dir("tokenize", work / "tokenize")},
                        "tokenize",
                        ex,
                        False,
                        logging.getLogger("bench"),
                    )
                    t0 = time.perf_counter()
                    res = pack_run(PackConfig(seq_len=seq_len), ctx)
                    times.append(time.perf_counter() - t0)
            digests.append([sha256_file(out / o) for o in sorted(res.outputs)])
            sec = statistics.median(times)
            row[f"workers_{workers}"] = {
                "seconds": round(sec, 3),
                "docs_per_s": round(len(lengths) / sec),
                "mtokens_per_s": round(lengths.sum() / sec / 1e6, 1),
            }
        row["same_bytes_workers_1_2"] = digests[0] == digests[1]
        row["padding_pct"] = res.stats["padding_pct"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-docs", type=int, default=20_000, help="textbook BFD subsample")
    ap.add_argument("--stage-docs", type=int, default=100_000, help="docs for the stage run")
    ap.add_argument(
        "--windows-only", action="store_true", help="only the window_docs comparison (seconds)"
    )
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    logn = np.maximum(1, rng.lognormal(np.log(400), 1.2, args.docs)).astype(np.int64)
    real, num_real = real_lengths(args.docs, 1)
    windowed = []
    for name, lengths in (("lognormal", logn), ("dolma_cc_web bootstrap", real)):
        for seq_len in (1024, 2048, 8192):
            row = bench_windows(name, lengths, seq_len, [2_000, 10_000, 100_000, 1_000_000])
            windowed.append(row)
            print(
                f"windows {name[:22]:<22} L={seq_len:<5} global {row['global_bfd']:,} seqs; "
                + "; ".join(
                    f"{k[7:]}: +{v['extra_sequences_vs_global_pct']}%"
                    for k, v in row.items()
                    if k.startswith("window_")
                )
            )
    if args.windows_only:
        out = OUT.with_name("pack_windows.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"benchmark": "pack windows", "rows": windowed}, indent=2) + "\n")
        print(out)
        return
    rows = []
    for name, lengths in (
        ("lognormal(median 400, sigma 1.2)", logn),
        (f"dolma_cc_web bootstrap ({num_real} docs)", real),
    ):
        for seq_len in (512, 2048):
            row = bench_one(name, lengths, seq_len, args.repeats, args.peer_docs)
            rows.append(row)
            b = row["bfd"]
            print(
                f"{name[:28]:<28} L={seq_len:<5} bfd {b['docs_per_s']:>10,} docs/s  "
                f"pad {b['padding_pct']:.3f}%  gap {b['gap_to_lower_bound_pct']:.4f}%  "
                f"cuts {b['docs_split']:,} vs concat {row['concat']['docs_split']:,}  "
                f"x{row['speedup_vs_segment_tree_python']} vs py segtree"
            )
    stage = bench_stage(logn[: args.stage_docs], 2048, 3)
    print(
        f"pack stage, {stage['docs']:,} docs / {stage['tokens']:,} tokens @ 2048: "
        f"{stage['workers_1']['docs_per_s']:,} docs/s (1 worker), "
        f"{stage['workers_2']['docs_per_s']:,} (2 workers), "
        f"same bytes {stage['same_bytes_workers_1_2']}"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "pack",
        "machine_cores": __import__("os").cpu_count(),
        "repeats": args.repeats,
        "rows": rows,
        "windows": windowed,
        "stage": stage,
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(OUT)


if __name__ == "__main__":
    main()
