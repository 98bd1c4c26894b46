"""Loader throughput, side by side in one process run (issue 12 targets).

1. Page-cached uncompressed shards holding >= 1 GiB of input_ids (64 shards x 4096 samples x
   seq_len 2048, uint16 ids + uint16 segment ids = 2 GiB of files), batch 32, one process:
   - ours: GlobalSampler(order="global") -> ShardedTokenDataset.get_batch on a dataset whose maps
     are faulted in (steady state, as after one epoch); ours_first_touch: the same on fresh maps
     (each new 4 KiB row costs a minor page fault); ours_bench_cli: `pipeline bench`'s path
     (BatchPrefetcher thread, preset none, fresh maps);
   - rowwise_proposal: a get_batch that copies row by row (not in the library; see its note);
   - ours_sequential: the pre-shuffled sequential read (no online shuffle), for reference;
   - naive: torch DataLoader(RandomSampler, default collate) over a Dataset doing an `np.load`
     of the sample's shard per item (the issue's peer);
   - item-wise: the same DataLoader over ShardedTokenDataset items (mmap rows): the strongest
     per-item peer.
   Repeats interleaved, medians reported; the naive peer is timed over a few batches (it reads
   a whole 16 MiB member per sample).
2. Pre-shuffle story on compressed shards (16 x 1024 x 2048, np.savez_compressed, metadata
   pre_shuffled): global random order with one cached shard vs the pre-shuffled sequential read
   (and shard_block with two): shards touched and decompressions per batch, time per batch.

Synthetic shards go to a temp folder (default under /tmp, removed at the end unless --keep), never
into the repo. Writes outputs/benchmarks/loader.json. ~3-6 min on 2 shared cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.loader.bench import BenchConfig, environment, run_bench
from pipeline.loader.dataset import ShardedTokenDataset
from pipeline.loader.sampler import GlobalSampler
from pipeline.shards import save_npz

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "benchmarks" / "loader.json"
SEQ, B, VOCAB = 2048, 32, 50257


def shard_arrays(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Random ids and packed-document segment ids (documents of 64..1024 tokens)."""
    ids = rng.integers(0, VOCAB, size=(n, SEQ), dtype=np.uint16)
    starts = rng.random((n, SEQ)) < 1 / 400
    starts[:, 0] = True
    seg = np.cumsum(starts, axis=1).astype(np.uint16)
    return {"input_ids": ids, "segment_ids": seg}


def make_shards(folder: Path, num_shards: int, shard_size: int, *, compressed: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(12)
    entries = []
    for i in range(num_shards):
        path = folder / f"shard_{i:06d}.npz"
        arrays = shard_arrays(rng, shard_size)
        if compressed:
            np.savez_compressed(path, **arrays)
        else:
            save_npz(path, arrays)
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if compressed else None
        entries.append({"file": path.name, "num_samples": shard_size, "sha256": digest})
    meta = {
        "num_samples": num_shards * shard_size,
        "seq_len": SEQ,
        "dtype": "uint16",
        "fields": ["input_ids", "segment_ids"],
        "field_dtypes": {"input_ids": "uint16", "segment_ids": "uint16"},
        "num_shards": num_shards,
        "shard_sizes": [shard_size] * num_shards,
        "shards": entries,
        "pre_shuffled": True,  # synthetic rows are i.i.d.: as good as shuffled
        "seed": 12,
        "pad_id": 0,
        "version": 1,
    }
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


def warm(folder: Path) -> int:
    """Read every file once so the runs see page-cached data; returns bytes read."""
    total = 0
    for p in sorted(folder.glob("*.npz")):
        with open(p, "rb") as f:
            while block := f.read(64 << 20):
                total += len(block)
    return total


# ---------------------------------------------------------------- side by side


def prefault(ds: ShardedTokenDataset) -> ShardedTokenDataset:
    """Map every shard and touch one element per 4 KiB page: the page tables a process has after
    its first epoch (page-cached data still costs a minor fault per page on first touch)."""
    for i in range(ds.num_shards):
        for f in ds.fields:
            arr = ds.shard(i)[f]
            int(arr.reshape(-1)[:: 4096 // arr.itemsize].sum())
    return ds


def plan(n: int, steps: int, seed: int, order: str = "global") -> list[np.ndarray]:
    sampler = GlobalSampler(n, B, seed=seed, order=order, drop_last=True)
    out = []
    for idx in sampler:
        out.append(idx)
        if len(out) == steps:
            break
    return out


def loop(get_batch, idxs: list[np.ndarray]) -> dict:
    """Deliver the planned batches; token MB/s counts input_ids, all MB/s every field."""
    nbytes = ids_bytes = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for idx in idxs:
        batch = get_batch(idx)
        ids_bytes += batch["input_ids"].nbytes
        nbytes += sum(v.nbytes for v in batch.values())
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"batches": len(idxs), "seconds": sec, "token_mb_per_s": ids_bytes / sec / 1e6,
            "mb_per_s": nbytes / sec / 1e6, "samples_per_s": len(idxs) * B / sec,
            "token_mb_per_cpu_s": ids_bytes / cpu / 1e6}  # fmt: skip


def rowwise_get_batch(ds: ShardedTokenDataset):
    """A proposed get_batch (not in the library): one row copy per sample instead of one fancy
    gather per shard touched; under a global shuffle a batch touches ~B shards, so the per-shard
    overhead (unique, flatnonzero, lock, 3 fancy-index calls per field) dominates."""

    def get_batch(idx: np.ndarray) -> dict[str, np.ndarray]:
        shard, row = ds.locate(idx)
        out = {f: np.empty((len(idx), ds.seq_len), ds.dtypes[f]) for f in ds.fields}
        for i, (s, r) in enumerate(zip(shard.tolist(), row.tolist(), strict=True)):
            arrays = ds.shard(s)
            for f in ds.fields:
                out[f][i] = arrays[f][r]
        return out

    return get_batch


def ours_bench(folder: Path, steps: int, seed: int) -> dict:
    r = run_bench(
        BenchConfig(
            str(folder),
            preset="none",
            order="global",
            batch_size=B,
            steps=steps,
            seed=seed,
            max_open_shards=64,
        ),  # fmt: skip
        progress=False,
    )
    keys = ("seconds", "token_mb_per_s", "mb_per_s", "samples_per_s", "batches")
    return {k: r[k] for k in keys}


class NaiveNpz(torch.utils.data.Dataset):
    """What a first attempt looks like: per item, np.load the sample's shard, index one row."""

    def __init__(self, folder: Path):
        meta = json.loads((folder / "metadata.json").read_text())
        self.files = [folder / e["file"] for e in meta["shards"]]
        self.bounds = np.cumsum([0, *meta["shard_sizes"]])

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        s = int(np.searchsorted(self.bounds, i, side="right") - 1)
        with np.load(self.files[s], allow_pickle=False) as z:
            row = i - self.bounds[s]
            return {"input_ids": z["input_ids"][row], "segment_ids": z["segment_ids"][row]}


def torch_peer(dataset, batches: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=B, sampler=torch.utils.data.RandomSampler(dataset, generator=g)
    )
    ids_bytes = nbytes = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for k, batch in enumerate(loader):
        ids_bytes += batch["input_ids"].numel() * batch["input_ids"].element_size()
        nbytes += sum(v.numel() * v.element_size() for v in batch.values())
        if k + 1 == batches:
            break
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"batches": k + 1, "seconds": sec, "token_mb_per_s": ids_bytes / sec / 1e6,
            "mb_per_s": nbytes / sec / 1e6, "samples_per_s": (k + 1) * B / sec,
            "token_mb_per_cpu_s": ids_bytes / cpu / 1e6}  # fmt: skip


def median_of(runs: list[dict]) -> dict:
    out = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out["runs_token_mb_per_s"] = [float(f"{r['token_mb_per_s']:.3g}") for r in runs]
    return out


# ---------------------------------------------------------------- pre-shuffle story


def order_run(folder: Path, order: str, max_open: int, batches: int) -> dict:
    ds = ShardedTokenDataset(folder, max_open_shards=max_open)
    sampler = GlobalSampler(
        len(ds), B, seed=1, order=order, drop_last=True, shard_sizes=ds.shard_sizes,
        window_shards=2,
    )  # fmt: skip
    touched = []
    t0 = time.perf_counter()
    for k, idx in enumerate(sampler):
        ds.get_batch(idx)
        touched.append(len(np.unique(ds.locate(idx)[0])))
        if k + 1 == batches:
            break
    sec = time.perf_counter() - t0
    return {"order": order, "max_open_shards": max_open, "batches": k + 1,
            "ms_per_batch": sec / (k + 1) * 1e3, "shards_per_batch": float(np.mean(touched)),
            "decompressions_per_batch": ds.num_opens / (k + 1)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None, help="scratch folder (default: a /tmp one)")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic shards")
    ap.add_argument("--steps", type=int, default=2048, help="batches per run of ours")
    ap.add_argument("--naive-batches", type=int, default=4, help="batches per np.load peer run")
    ap.add_argument("--item-batches", type=int, default=200, help="batches per item-wise run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shards", type=int, default=64, help="uncompressed shards of 4096 samples")
    args = ap.parse_args()
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="bench-loader-", dir="/tmp"))
    try:
        raw, packed = scratch / "raw", scratch / "compressed"
        if not (raw / "metadata.json").exists():
            print(f"writing {args.shards} uncompressed shards to {raw}", file=sys.stderr)
            make_shards(raw, args.shards, 4096, compressed=False)
        if not (packed / "metadata.json").exists():
            print(f"writing 16 compressed shards to {packed}", file=sys.stderr)
            make_shards(packed, 16, 1024, compressed=True)
        cached = warm(raw)
        ids_gib = args.shards * 4096 * SEQ * 2 / 2**30
        steady = prefault(ShardedTokenDataset(raw, max_open_shards=64))
        names = ["ours", "ours_first_touch", "ours_bench_cli", "rowwise_proposal",
                 "ours_sequential", "naive_npload", "itemwise_mmap"]  # fmt: skip
        runs: dict[str, list[dict]] = {k: [] for k in names}
        for rep in range(args.repeats):  # interleaved so drift on the shared box hits all
            print(f"repeat {rep + 1}/{args.repeats}", file=sys.stderr)
            idxs = plan(len(steady), args.steps, seed=rep)
            runs["ours"].append(loop(steady.get_batch, idxs))
            fresh = ShardedTokenDataset(raw, max_open_shards=64)
            runs["ours_first_touch"].append(loop(fresh.get_batch, idxs))
            runs["ours_bench_cli"].append(ours_bench(raw, args.steps, seed=rep))
            runs["rowwise_proposal"].append(loop(rowwise_get_batch(steady), idxs))
            seq = plan(len(steady), args.steps, seed=rep, order="sequential")
            runs["ours_sequential"].append(loop(steady.get_batch, seq))  # not shuffled: reference
            runs["naive_npload"].append(torch_peer(NaiveNpz(raw), args.naive_batches, rep))
            runs["itemwise_mmap"].append(torch_peer(steady, args.item_batches, rep))
        med = {k: median_of(v) for k, v in runs.items()}
        ours = med["ours"]["token_mb_per_s"]
        story = [
            order_run(packed, "global", 1, 8),
            order_run(packed, "shard_block", 2, 64),
            order_run(packed, "sequential", 1, 256),
        ]
        seq_ms = story[-1]["ms_per_batch"]
        result = {
            "setup": {
                "seq_len": SEQ,
                "batch_size": B,
                "shards": args.shards,
                "input_ids_gib": ids_gib,
                "page_cached_bytes": cached,
                "processes": 1,
            },  # fmt: skip
            "throughput": med,
            "ratios": {
                "ours_vs_naive_npload": ours / med["naive_npload"]["token_mb_per_s"],
                "ours_vs_itemwise_mmap": ours / med["itemwise_mmap"]["token_mb_per_s"],
                "rowwise_proposal_vs_ours": med["rowwise_proposal"]["token_mb_per_s"] / ours,
            },
            "pre_shuffle": story,
            "global_vs_sequential_time_ratio": story[0]["ms_per_batch"] / seq_ms,
            **environment(),
        }
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(result, indent=2) + "\n")
        print_table(result)
        print(OUT)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def print_table(r: dict) -> None:
    s = r["setup"]
    print(f"{s['input_ids_gib']:.2f} GiB of input_ids page-cached, batch {s['batch_size']} x "
          f"seq {s['seq_len']}, one process; medians of repeats")  # fmt: skip
    print(f"{'loader':<18}{'input_ids MB/s':>15}{'all MB/s':>10}{'samples/s':>11}"
          f"{'ids MB/cpu-s':>14}  runs (input_ids MB/s)")  # fmt: skip
    for name, m in r["throughput"].items():
        cpu = m.get("token_mb_per_cpu_s")
        cpu_s = "-" if cpu is None else f"{cpu:,.0f}"
        print(f"{name:<18}{m['token_mb_per_s']:>15,.0f}{m['mb_per_s']:>10,.0f}"
              f"{m['samples_per_s']:>11,.0f}{cpu_s:>14}"
              f"  {m['runs_token_mb_per_s']}")  # fmt: skip
    for k, v in r["ratios"].items():
        print(f"{k}: {v:,.1f}x")
    print(f"{'compressed, order':<28}{'ms/batch':>10}{'shards/batch':>14}{'decompress/batch':>18}")
    for row in r["pre_shuffle"]:
        name = f"{row['order']} (open {row['max_open_shards']})"
        print(f"{name:<28}{row['ms_per_batch']:>10,.1f}{row['shards_per_batch']:>14.2f}"
              f"{row['decompressions_per_batch']:>18.2f}")  # fmt: skip
    print(f"global / sequential time per batch: {r['global_vs_sequential_time_ratio']:,.0f}x")


if __name__ == "__main__":
    sys.exit(main())
