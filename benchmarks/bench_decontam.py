"""Benchmark the decontaminate stage: WikiText-2 test passages planted into other corpora;
writes outputs/benchmarks/decontam.json.

Training mix: TinyStories, Common Crawl pages (dolma_cc_web) and C4 documents from
/work/shared/corpora. Into `--plant` of them (seeded) goes a window of `--window` words of a
WikiText-2 *raw* test paragraph, lightly detokenised as a web page would print it ("a @-@ b" ->
"a-b", "x , y" -> "x, y"). Eval files: the tokenised WikiText-2 test.txt (rare words are
`<unk>` there, so a window whose every 13-gram holds one cannot match: the recall a user gets)
and the raw wiki.test.raw. Recall = planted documents found; flagged unplanted documents are
listed with their shared n-gram (they can be real overlaps: web pages quote Wikipedia). A
pure-Python reference (regex words, a set of 13-word tuples) checks the hashed matcher's
decisions document by document and gives a speed reference. CPU seconds (time.process_time),
medians of `--repeats` after a warm-up run.
Usage: .venv/bin/python benchmarks/bench_decontam.py [--plant 200] [--window 30] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pipeline.executor import Executor
from pipeline.parts import docs_table, part_name, write_table
from pipeline.stage import StageContext, StageInputs
from pipeline.stages import decontaminate

CORPORA = Path("/work/shared/corpora")
OUT = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "decontam.json"
EVALS = {
    "wikitext-2 test.txt (tokenised, <unk>)": CORPORA / "wikitext-2" / "test.txt",
    "wikitext-2-raw wiki.test.raw": CORPORA / "wikitext-2-raw" / "wiki.test.raw",
}
NGRAM = 13
_WORD = re.compile(r"[^\W_]+")


def training_docs() -> list[tuple[str, str]]:
    """(id, text) of TinyStories stories, dolma CC pages and C4 documents."""
    docs = []
    raw = (CORPORA / "tinystories" / "tinystories_sample.txt").read_text(encoding="utf-8")
    docs += [(f"ts{i}", t.strip()) for i, t in enumerate(raw.split("<|endoftext|>")) if t.strip()]
    for path in sorted((CORPORA / "dolma_cc_web").glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            docs += [(f"cc-{path.stem}-{i}", json.loads(line)["text"]) for i, line in enumerate(f)]
    for path in sorted((CORPORA / "c4_sample").glob("*.json.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [(f"c4-{path.stem}-{i}", json.loads(line)["text"]) for i, line in enumerate(f)]
    return docs


def detokenise(s: str) -> str:
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" 's", "'s")):
        s = s.replace(a, b)
    return re.sub(r" ([,.;:!?)])", r"\1", s)


def plant(docs: list[tuple[str, str]], k: int, window: int, seed: int) -> dict[int, str]:
    """Insert `k` raw WikiText test windows into distinct documents (in place); returns
    {document index: the planted text}."""
    rng = np.random.default_rng(seed)
    raw = (CORPORA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    paras = [p.strip() for p in raw.split("\n") if len(p.split()) >= window + 10]
    paras = [p for p in paras if not p.startswith("=")]
    chosen = rng.choice(len(docs), k, replace=False)
    out = {}
    for d in chosen.tolist():
        words = paras[int(rng.integers(len(paras)))].split()
        at = int(rng.integers(0, len(words) - window))
        passage = detokenise(" ".join(words[at : at + window]))
        body = docs[d][1].split(" ")
        cut = int(rng.integers(0, len(body) + 1))
        docs[d] = (docs[d][0], " ".join(body[:cut] + [passage] + body[cut:]))
        out[d] = passage
    return out


def reference(texts: list[str], eval_texts: list[str]) -> tuple[float, set[int]]:
    """GPT-3-style: regex words, a Python set of 13-word tuples; the flagged documents."""
    t0 = time.process_time()
    grams: set[tuple[str, ...]] = set()
    for e in eval_texts:
        w = _WORD.findall(e.lower())
        grams.update(tuple(w[i : i + NGRAM]) for i in range(len(w) - NGRAM + 1))
    flagged = set()
    for d, t in enumerate(texts):
        w = _WORD.findall(t.lower())
        if any(tuple(w[i : i + NGRAM]) in grams for i in range(len(w) - NGRAM + 1)):
            flagged.add(d)
    return time.process_time() - t0, flagged


def run_stage(root: Path, eval_path: Path) -> tuple[float, dict, list[dict]]:
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    ctx = StageContext(
        name="decontaminate",
        run_dir=root,
        out_dir=out,
        seed=0,
        inputs={"download": StageInputs.from_dir("download", root / "download")},
        upstream="download",
        executor=Executor(1),
        progress=False,
        log=logging.getLogger("bench"),
    )
    cfg = decontaminate.DecontaminateConfig(eval_texts=[str(eval_path)], ngram=NGRAM)
    t0 = time.process_time()
    res = decontaminate.run(cfg, ctx)
    secs = time.process_time() - t0
    rejected = [
        r
        for p in sorted((out / "rejected").glob("*.parquet"))
        for r in pq.read_table(p).to_pylist()
    ]
    return secs, res.all_stats(), rejected


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plant", type=int, default=200)
    ap.add_argument("--window", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    docs = training_docs()
    planted = plant(docs, args.plant, args.window, args.seed)
    texts = [t for _, t in docs]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    root = Path(tempfile.mkdtemp(prefix="bench-decontam-"))
    results = {}
    try:
        for i, lo in enumerate(range(0, len(docs), 1000)):
            chunk = docs[lo : lo + 1000]
            table = docs_table([d for d, _ in chunk], [t for _, t in chunk], ["mix"] * len(chunk))
            write_table(root / "download" / part_name(i), table)
        index_of = {d: i for i, (d, _) in enumerate(docs)}
        for name, path in EVALS.items():
            eval_text = path.read_text(encoding="utf-8")
            times, ref_times = [], []
            for r in range(args.repeats + 1):
                secs, stats, rejected = run_stage(root, path)
                ref_s, ref_flagged = reference(texts, [eval_text])
                if r:
                    times.append(secs)
                    ref_times.append(ref_s)
            flagged = {index_of[row["id"]] for row in rejected}
            shared = {index_of[row["id"]]: row["matched_ngram"] for row in rejected}
            unplanted = sorted(flagged - set(planted))
            med, ref_med = statistics.median(times), statistics.median(ref_times)
            results[name] = {
                "eval_ngrams": stats["eval_files"][0]["ngrams"],
                "planted": len(planted),
                "found": len(flagged & set(planted)),
                "recall": round(len(flagged & set(planted)) / len(planted), 4),
                "missed_examples": [planted[d][:160] for d in sorted(set(planted) - flagged)][:3],
                "flagged_unplanted": len(unplanted),
                "flagged_unplanted_rate": round(len(unplanted) / (len(docs) - len(planted)), 6),
                "flagged_unplanted_examples": [
                    {"id": docs[d][0], "ngram": shared[d]} for d in unplanted[:5]
                ],
                "same_as_python_reference": flagged == ref_flagged,
                "stage_cpu_s_median": round(med, 3),
                "stage_mb_per_cpu_s": round(nbytes / 1e6 / med, 1),
                "python_reference_cpu_s_median": round(ref_med, 3),
                "python_reference_mb_per_cpu_s": round(nbytes / 1e6 / ref_med, 1),
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "training_docs": len(docs),
        "training_mb": round(nbytes / 1e6, 2),
        "ngram": NGRAM,
        "window_words": args.window,
        "repeats": args.repeats,
        "evals": results,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
