"""Source `hf` read speed: records/s of our readers and of the loops a `datasets` user writes,
side by side on the same 60k documents (~36 MB of text).

Readers: our JSONL reader (`source: jsonl`); `source: hf` on a save_to_disk folder, on a JSONL
data folder (non-streaming: prepare into the cache, then a cache hit) and streaming; peers: the
row loop `for row in ds: row["text"]` and `ds.iter(batch_size=1024)` on the same Dataset.
Every HF cache lives in a temp folder. Medians of `--repeats` runs. Writes
outputs/benchmarks/hf.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "outputs" / "benchmarks" / "hf.json"


def corpus(num_docs: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(5000)]
    lengths = rng.integers(20, 200, num_docs)
    return [" ".join(rng.choice(words, n)) for n in lengths]


def timed(fn, repeats: int) -> tuple[float, int]:
    times, n = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=60_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_hf_"))
    os.environ["HF_HOME"] = str(tmp / "hf_home")  # before datasets is imported: cache in tmp
    os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    from pipeline.sources.files import read_jsonl
    from pipeline.sources.hf import read_hf

    datasets.disable_progress_bars()
    texts = corpus(args.docs, 0)
    (tmp / "jsonl").mkdir()
    with open(tmp / "jsonl" / "train.jsonl", "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": str(i), "text": t}) + "\n")
    ds = datasets.Dataset.from_dict({"id": [str(i) for i in range(len(texts))], "text": texts})
    ds.save_to_disk(str(tmp / "saved"))
    ds = datasets.load_from_disk(str(tmp / "saved"))

    def hf(path: str, streaming: bool = False):
        return lambda: sum(
            1 for _ in read_hf(path, None, "train", "text", "id", streaming, None, False)
        )

    rows = {}
    cases = {
        "ours_jsonl_reader": lambda: sum(
            1 for _ in read_jsonl([tmp / "jsonl" / "train.jsonl"], "text", "id", "x")
        ),
        "hf_save_to_disk": hf(str(tmp / "saved")),
        "hf_jsonl_folder_prepare": None,  # first read: json -> Arrow in the cache
        "hf_jsonl_folder_cached": hf(str(tmp / "jsonl")),
        "hf_jsonl_folder_streaming": hf(str(tmp / "jsonl"), streaming=True),
        "peer_row_loop": lambda: sum(1 for row in ds if row["text"]),
        # one Python step per text, as any per-record reader makes (ours builds a Record)
        "peer_iter_batches": lambda: sum(
            1 for b in ds.iter(batch_size=1024) for t in b["text"] if t
        ),
    }
    t0 = time.perf_counter()
    n = sum(1 for _ in read_hf(str(tmp / "jsonl"), None, "train", "text", "id", False, None, False))
    rows["hf_jsonl_folder_prepare"] = {"seconds": time.perf_counter() - t0, "records": n}
    for name, fn in cases.items():
        if fn is None:
            continue
        sec, n = timed(fn, args.repeats)
        rows[name] = {"seconds": sec, "records": n}
    mb = sum(len(t.encode()) for t in texts) / 1e6
    for r in rows.values():
        r["records_per_s"] = round(r["records"] / r["seconds"])
        r["mb_per_s"] = round(mb / r["seconds"], 1)
        r["seconds"] = round(r["seconds"], 3)
    base = rows["peer_row_loop"]["seconds"]
    for r in rows.values():
        r["speedup_vs_row_loop"] = round(base / r["seconds"], 2)
    result = {"docs": args.docs, "text_mb": round(mb, 1), "repeats": args.repeats, "rows": rows}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    for name, r in rows.items():
        print(
            f"{name:<28} {r['records_per_s']:>9,} rec/s {r['mb_per_s']:>7} MB/s "
            f"x{r['speedup_vs_row_loop']} vs row loop"
        )
    print(OUT)


if __name__ == "__main__":
    main()
