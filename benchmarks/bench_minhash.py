"""MinHash against rensa (Rust) on real text, per document-length distribution (not CI).

    .venv/bin/python benchmarks/bench_minhash.py [--mb 4] [--repeats 5]

Texts: a stream of real English (TinyStories, WikiText-2 articles, C4 and Dolma CC pages from
/work/shared/corpora) cut into documents of seeded word counts, `--mb` MB of text per
distribution: short (10-60 words), medium (200-800), long (5,000-20,000) and mixed (lognormal,
median 300 words, sigma 1.5, 5 to 50,000). 128 permutations, word 5-grams, one core, CPU-time
medians of interleaved repeats (time.process_time: every thread of the process counts).

- raw text, ours: `minhash_texts` over the dedup stage's batches (simplify, word hashes,
  shingles and signatures: the whole path).
- raw text, rensa: Python shingling, then `RMinHash.digest_matrix_from_token_sets` (rensa's bulk
  path, no Python object per document). Two shinglings: `split` (lowercase + str.split, the
  least Python work, less than ours: no punctuation removal) and `simplify` (our simplified text
  in Python, the same words as ours).
- core, same shingles: our uint64 shingle hashes of the texts into our `signatures` vs into
  rensa's `digest_matrix_from_flat_token_hashes` (flat buffer + row offsets).
Writes outputs/benchmarks/minhash.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import rensa

from pipeline.dedup.minhash import (
    _tables,
    minhash_texts,
    shingle_hashes,
    signatures,
    simplify,
    word_hashes,
)
from pipeline.stages.dedup import _batches

CORPORA = Path("/work/shared/corpora")
OUT = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "minhash.json"
NUM_PERM, NGRAM, SEED, BATCH_DOCS = 128, 5, 1, 250
DISTRIBUTIONS = ("short", "medium", "long", "mixed")


def text_stream(max_bytes: int) -> list[str]:
    """Whitespace-separated tokens of real documents (whitespace kept), about max_bytes."""
    docs: list[str] = []
    raw = (CORPORA / "tinystories" / "tinystories_sample.txt").read_text(encoding="utf-8")
    docs += [d.strip() for d in raw.split("<|endoftext|>")]
    wiki = (CORPORA / "wikitext-2-raw" / "wiki.test.raw").read_text(encoding="utf-8")
    docs += re.split(r"\n ?= [^=\n]+ = ?\r?\n", wiki)
    for path in sorted((CORPORA / "c4_sample").glob("*.json.gz")) + sorted(
        (CORPORA / "dolma_cc_web").glob("*.jsonl*")
    ):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line).get("text", "") for line in f]
    rng = np.random.default_rng(0)
    order = rng.permutation(len(docs))  # the sources interleaved
    out, size = [], 0
    while size < max_bytes:
        for i in order.tolist():
            toks = re.split(r"(\s+)", docs[i].strip())
            out += ["".join(toks[j : j + 2]) for j in range(0, len(toks), 2)]
            size += len(docs[i])
            if size >= max_bytes:
                break
    return out


def documents(tokens: list[str], kind: str, mb: float, seed: int = 0) -> list[str]:
    """`mb` MB of documents cut from the token stream with `kind`'s word counts."""
    rng = np.random.default_rng([seed, DISTRIBUTIONS.index(kind)])
    docs, pos, size = [], int(rng.integers(0, len(tokens) // 2)), 0
    while size < mb * 1e6:
        if kind == "short":
            n = int(rng.integers(10, 61))
        elif kind == "medium":
            n = int(rng.integers(200, 801))
        elif kind == "long":
            n = int(rng.integers(5000, 20001))
        else:
            n = int(np.clip(rng.lognormal(np.log(300), 1.5), 5, 50000))
        if pos + n > len(tokens):
            pos = 0
        doc = "".join(tokens[pos : pos + n]).strip()
        pos += n
        docs.append(doc)
        size += len(doc)
    return docs


def ours_raw(texts: list[str]) -> np.ndarray:
    sigs = [
        minhash_texts(texts[lo:hi], NUM_PERM, NGRAM, SEED) for lo, hi in _batches(texts, BATCH_DOCS)
    ]
    return np.concatenate(sigs)


def _grams(words: list[str]) -> list[str]:
    if len(words) < NGRAM:
        return [" ".join(words)] if words else []
    return [" ".join(g) for g in zip(*(words[k:] for k in range(NGRAM)), strict=False)]


def rensa_split(texts: list[str]) -> np.ndarray:
    sets = [_grams(t.lower().split()) for t in texts]
    return np.asarray(rensa.RMinHash.digest_matrix_from_token_sets(sets, NUM_PERM, SEED))


def rensa_simplify(texts: list[str]) -> np.ndarray:
    sets = [_grams(simplify(t).split()) for t in texts]
    return np.asarray(rensa.RMinHash.digest_matrix_from_token_sets(sets, NUM_PERM, SEED))


def shingles_of(texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Our (uint64 shingle hashes, shingles per doc) per stage batch."""
    keys, mult, _ = _tables(SEED, NUM_PERM, NGRAM)
    out = []
    for lo, hi in _batches(texts, BATCH_DOCS):
        words, counts = word_hashes(texts[lo:hi], keys)
        out.append(shingle_hashes(words, counts, mult))
    return out


def core_ours(batches) -> None:
    a = _tables(SEED, NUM_PERM, NGRAM)[2]
    for sh, per_doc in batches:
        signatures(sh, per_doc, a)


def core_rensa(batches) -> None:
    for sh, per_doc in batches:
        offsets = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.uint64)
        rensa.RMinHash.digest_matrix_from_flat_token_hashes(sh, offsets, NUM_PERM, SEED)


def timed(fns: dict, arg, repeats: int) -> dict[str, float]:
    """Median CPU seconds per function, the functions interleaved in each repeat."""
    runs: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn(arg)
            runs[name].append(time.process_time() - t0)
    return {k: statistics.median(v) for k, v in runs.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0, help="MB of text per distribution")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    tokens = text_stream(int(max(args.mb, 1) * 3e6))
    results: dict = {}
    for kind in DISTRIBUTIONS:
        texts = documents(tokens, kind, args.mb)
        mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        raw = timed(
            {"ours": ours_raw, "rensa_split": rensa_split, "rensa_simplify": rensa_simplify},
            texts,
            args.repeats,
        )
        batches = shingles_of(texts)
        core = timed({"ours": core_ours, "rensa": core_rensa}, batches, args.repeats)
        num_shingles = int(sum(len(s) for s, _ in batches))
        words = np.array([len(t.split()) for t in texts])
        results[kind] = {
            "docs": len(texts),
            "text_mb": round(mb, 2),
            "words_median": int(np.median(words)),
            "words_mean": round(float(words.mean()), 1),
            "shingles": num_shingles,
            "raw_cpu_s": {k: round(v, 4) for k, v in raw.items()},
            "raw_mb_per_s": {k: round(mb / v, 2) for k, v in raw.items()},
            "raw_speedup_vs_rensa_split": round(raw["rensa_split"] / raw["ours"], 2),
            "raw_speedup_vs_rensa_simplify": round(raw["rensa_simplify"] / raw["ours"], 2),
            "core_cpu_s": {k: round(v, 4) for k, v in core.items()},
            "core_mshingles_per_s": {k: round(num_shingles / 1e6 / v, 2) for k, v in core.items()},
            "core_ours_over_rensa_time": round(core["ours"] / core["rensa"], 2),
        }
        print(kind, json.dumps(results[kind]), flush=True)
    worst = min(r["raw_speedup_vs_rensa_split"] for r in results.values())
    summary = {
        "benchmark": "minhash",
        "num_perm": NUM_PERM,
        "ngram": NGRAM,
        "rensa": getattr(rensa, "__version__", "0.5"),
        "distributions": results,
        "worst_raw_speedup_vs_rensa_split": worst,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"worst raw-text speedup over rensa (split shingling): {worst}x")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
