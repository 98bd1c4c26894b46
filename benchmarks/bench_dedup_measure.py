"""Cost and output of dedup's in-run measurement (merge precision, pair recall, Wilson CIs).

Runs the dedup stage (Parquet in and out, workers=1) on real text from /work/shared/corpora
(TinyStories, Reuters-21578, Common Crawl pages: bench_dedup.load_docs) with near-duplicates
injected (word substitutions at 2-10%, 5% of the documents), and a larger corpus made by
recombining the real documents' sentences into new documents (no natural duplicates). Each
corpus runs with the default samples (200 merged pairs; 1,000 documents, at most 5% of the
corpus) and with the measurement off, interleaved; reports stage CPU seconds (one worker runs
inline), the stage's own `measure_cpu_seconds`, their ratio, the on-minus-off difference, and
what was measured. Writes outputs/benchmarks/dedup_measure.json.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline.stages.dedup as stage  # noqa: E402
from bench_dedup import load_docs, mutate  # noqa: E402
from pipeline.executor import Executor  # noqa: E402
from pipeline.parts import docs_table, write_table  # noqa: E402
from pipeline.stage import StageContext, StageInputs  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "dedup_measure.json"
KEYS = (
    "merge_precision",
    "merge_precision_ci95",
    "merge_precision_sample",
    "pair_recall",
    "pair_recall_ci95",
    "pair_recall_pairs",
    "pair_recall_docs",
    "dropped_near_dup",
    "measure_cpu_seconds",
)


def corpus(num_docs: int, seed: int) -> list[str]:
    """Real documents + 5% injected near-duplicates, then recombined documents up to num_docs."""
    rng = np.random.default_rng(seed)
    docs = load_docs(10**9)
    vocab = [w for d in docs[:500] for w in d.split()]
    dups = [
        mutate(docs[int(i)], "substitute", float(rng.uniform(0.02, 0.1)), vocab, rng)
        for i in rng.choice(len(docs), len(docs) // 20, replace=False)
    ]
    out = docs + dups
    sentences = [s for d in docs for s in re.split(r"(?<=[.!?])\s+", d) if len(s.split()) >= 4]
    while len(out) < num_docs:
        k = int(rng.integers(5, 30))
        out.append(" ".join(sentences[int(i)] for i in rng.integers(len(sentences), size=k)))
    order = rng.permutation(len(out))
    return [out[i] for i in order[:num_docs]] if num_docs else [out[i] for i in order]


def run_stage(parts_dir: Path, out_dir: Path, cfg: stage.DedupConfig) -> tuple[float, dict]:
    out_dir.mkdir(parents=True)
    with Executor(1) as ex:
        ctx = StageContext(
            name="dedup",
            run_dir=out_dir.parent,
            out_dir=out_dir,
            seed=1,
            inputs={"download": StageInputs.from_dir("download", parts_dir)},
            upstream="download",
            executor=ex,
            progress=False,
        )
        t0 = time.process_time()  # one worker runs inline: the stage's whole CPU time
        res = stage.run(cfg, ctx)
        return time.process_time() - t0, res.all_stats()


def measure_corpus(texts: list[str], repeats: int, tmp: Path) -> dict:
    parts = tmp / "in"
    for i in range(0, len(texts), 2000):
        chunk = texts[i : i + 2000]
        ids = [str(i + k) for k in range(len(chunk))]
        write_table(
            parts / f"part-{i // 2000:05d}.parquet", docs_table(ids, chunk, ["b"] * len(chunk))
        )
    on, off, stats = [], [], {}
    for r in range(repeats):  # the order alternates: neither side always runs first
        for side in ("on", "off") if r % 2 == 0 else ("off", "on"):
            if side == "on":
                sec, stats = run_stage(parts, tmp / f"on-{r}", stage.DedupConfig())
                on.append((sec, stats["measure_cpu_seconds"]))
            else:
                cfg = stage.DedupConfig(precision_sample_pairs=0, recall_sample_docs=0)
                off.append(run_stage(parts, tmp / f"off-{r}", cfg)[0])
    stage_s = statistics.median(s for s, _ in on)
    measure_s = statistics.median(m for _, m in on)
    return {
        "docs": len(texts),
        "mb": round(sum(map(len, texts)) / 1e6, 1),
        "stage_cpu_seconds_default": round(stage_s, 3),
        "stage_cpu_seconds_measure_off": round(statistics.median(off), 3),
        "measure_cpu_seconds": round(measure_s, 3),
        "measure_share_of_stage": round(measure_s / stage_s, 4),
        "on_minus_off_share": round((stage_s - statistics.median(off)) / stage_s, 4),
        "measured": {k: stats[k] for k in KEYS},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--large-docs", type=int, default=60_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, n in (("real_plus_injected", 0), ("recombined", args.large_docs)):
            rows[name] = measure_corpus(corpus(n, 0), args.repeats, Path(tmp) / name)
            print(name, json.dumps(rows[name]), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "defaults": {
                    "precision_sample_pairs": 200,
                    "recall_sample_docs": 1000,
                    "recall_max_share": 0.05,
                },
                **rows,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
