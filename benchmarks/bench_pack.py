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
import statistics
import time
from pathlib import Path

import numpy as np

from pipeline.packing import (
    best_fit_decreasing_reference,
    chunk,
    concat_docs_split,
    lower_bound,
    pack_bfd,
    pack_concat,
    pack_naive,
)

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-docs", type=int, default=20_000, help="textbook BFD subsample")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    logn = np.maximum(1, rng.lognormal(np.log(400), 1.2, args.docs)).astype(np.int64)
    real, num_real = real_lengths(args.docs, 1)
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
    OUT.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "pack",
        "machine_cores": __import__("os").cpu_count(),
        "repeats": args.repeats,
        "rows": rows,
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(OUT)


if __name__ == "__main__":
    main()
