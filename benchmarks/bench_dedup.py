"""Benchmark dedup on real text from /work/shared/corpora; writes outputs/benchmarks/dedup.json.

Speed: our MinHash + LSH + verification + union-find core vs datasketch (MinHash + MinHashLSH, same
num_perm, shingles, bands x rows and threshold) on the same documents, one core, medians of
repeats. Quality: near-duplicates of known Jaccard (word substitutions, deletions, insertions,
paragraph reordering, boilerplate) injected into real documents; P/R/F1 at threshold 0.8.
Usage: .venv/bin/python benchmarks/bench_dedup.py [--repeats 3] [--max-docs N]
Over 400 lines on purpose: a benchmark script is read top to bottom as one experiment (corpus,
injected duplicates, both peers, the table); splitting it would scatter that story.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import platform
import re
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from pipeline.dedup import cluster as cl
from pipeline.dedup.lsh import band_edges, optimal_bands, s_curve
from pipeline.dedup.minhash import (
    estimate_jaccard,
    exact_jaccard,
    minhash_texts,
    shingle_sets,
    simplify,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from oracles import band_key_groups, components, unique_pairs  # noqa: E402  (the test oracles, tests/)

CORPORA = Path("/work/shared/corpora")
OUT = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "dedup.json"
NUM_PERM, NGRAM, THRESHOLD, FN_WEIGHT = 128, 5, 0.8, 0.9
BATCH = 250  # DedupConfig.batch_docs
BOILERPLATE = (
    "Share this article on Facebook Twitter and LinkedIn. Subscribe to our newsletter "
    "for the latest news and updates. All rights reserved. Privacy policy and terms of "
    "use apply to this site. Click here to read more stories like this one."
)


def load_docs(max_docs: int) -> list[str]:
    """TinyStories stories, Reuters-21578 article bodies and Common Crawl pages (>= 20 words)."""
    docs = []
    raw = (CORPORA / "tinystories" / "tinystories_sample.txt").read_text(encoding="utf-8")
    docs += [t.strip() for t in raw.split("<|endoftext|>")]
    body = re.compile(r"<BODY>(.*?)</BODY>", re.S)
    for path in sorted((CORPORA / "reuters21578").glob("*.sgm")):
        text = path.read_text(encoding="latin-1")
        docs += [b.replace("&lt;", "<").replace("&amp;", "&").strip() for b in body.findall(text)]
    cc = CORPORA / "dolma_cc_web" / "CC-MAIN-20190717121559-20190717143559-00140.jsonl.gz"
    with gzip.open(cc, "rt", encoding="utf-8") as f:
        docs += [json.loads(line)["text"] for line in f]
    docs = [d for d in docs if len(d.split()) >= 20]
    return docs[:max_docs]


def shingle_set(text: str, n: int = NGRAM) -> set[str]:
    w = simplify(text).split()
    return {" ".join(w[i : i + n]) for i in range(max(1, len(w) - n + 1))} if w else set()


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


# ---------------------------------------------------------------- the two implementations


def ours(
    texts: list[str], bands: int, rows: int, seed: int = 1, exact: bool = False
) -> tuple[np.ndarray, int]:
    """Signatures (batches as in the stage), one band at a time -> edges, verify (estimated or
    exact Jaccard), components."""
    sig = np.concatenate(
        [
            minhash_texts(texts[i : i + BATCH], NUM_PERM, NGRAM, seed)
            for i in range(0, len(texts), BATCH)
        ]
    )
    mult = np.random.default_rng(seed).integers(0, 2**64, size=rows, dtype=np.uint64) | np.uint64(1)
    edges = [
        band_edges(k) for group in band_key_groups(sig, None, bands, rows, mult, 1) for k in group
    ]
    pairs = unique_pairs(edges, len(texts))
    if exact:
        docs = np.unique(pairs).tolist()
        sets = dict(zip(docs, shingle_sets([texts[i] for i in docs], NGRAM, seed), strict=True))
        ok = exact_jaccard(sets, pairs) >= THRESHOLD
    else:
        ok = cl.verify(sig, pairs, THRESHOLD)
    return components(len(texts), pairs[ok]), len(pairs)


def theirs(texts: list[str], bands: int, rows: int, seed: int = 1) -> tuple[np.ndarray, int]:
    """datasketch: per doc build shingles, MinHash.update_batch, query the LSH, verify candidates
    by MinHash.jaccard, insert; union-find over the verified pairs."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(bands, rows))
    sketches: list = []
    edges, candidates = [], 0
    for i, text in enumerate(texts):
        m = MinHash(num_perm=NUM_PERM, seed=seed)
        m.update_batch([s.encode("utf-8") for s in shingle_set(text)])
        for j in lsh.query(m):
            candidates += 1
            if m.jaccard(sketches[j]) >= THRESHOLD:
                edges.append((j, i))
        lsh.insert(i, m)
        sketches.append(m)
    return components(len(texts), np.array(edges, np.int64).reshape(-1, 2)), candidates


def theirs_bulk(texts: list[str], bands: int, rows: int, seed: int = 1) -> tuple[np.ndarray, int]:
    """datasketch at its best: shingles for all docs, MinHash.bulk (permutations made once), then
    query / verify / insert as above."""
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=(bands, rows))
    shingles = [[s.encode("utf-8") for s in shingle_set(t)] for t in texts]
    sketches = MinHash.bulk(shingles, num_perm=NUM_PERM, seed=seed)
    edges, candidates = [], 0
    for i, m in enumerate(sketches):
        for j in lsh.query(m):
            candidates += 1
            if m.jaccard(sketches[j]) >= THRESHOLD:
                edges.append((j, i))
        lsh.insert(i, m)
    return components(len(texts), np.array(edges, np.int64).reshape(-1, 2)), candidates


def interleaved(fns: dict, texts, bands, rows, repeats) -> dict[str, tuple]:
    """Alternate the implementations each repeat, so both see the same machine load."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    outs: dict[str, tuple] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            outs[name] = fn(texts, bands, rows)
            times[name].append(time.perf_counter() - t0)
    return {k: (statistics.median(times[k]), times[k], *outs[k]) for k in fns}


# ---------------------------------------------------------------- quality


def mutate(text: str, kind: str, rate: float, vocab: list[str], rng: np.random.Generator) -> str:
    """A near-duplicate of `text`: `rate` of its words substituted, deleted or inserted; or its
    paragraphs reordered; or boilerplate added (rate = how many boilerplate copies / 4)."""
    words = text.split()
    k = max(1, int(round(rate * len(words))))
    if kind == "substitute":
        for i in rng.choice(len(words), size=min(k, len(words)), replace=False):
            words[i] = vocab[int(rng.integers(len(vocab)))]
    elif kind == "delete":
        drop = set(rng.choice(len(words), size=min(k, len(words) - 1), replace=False).tolist())
        words = [w for i, w in enumerate(words) if i not in drop]
    elif kind == "insert":
        for _ in range(k):
            words.insert(int(rng.integers(len(words) + 1)), vocab[int(rng.integers(len(vocab)))])
    elif kind == "reorder":
        paras = [p for p in re.split(r"\n\s*\n|\n", text) if p.strip()]
        if len(paras) < 3:  # one block: reorder sentence groups instead
            sents = re.split(r"(?<=[.!?])\s+", text)
            step = max(1, len(sents) // 4)
            paras = [" ".join(sents[i : i + step]) for i in range(0, len(sents), step)]
        order = rng.permutation(len(paras))
        return "\n\n".join(paras[i] for i in order)
    elif kind == "boilerplate":
        copies = 1 + int(rate * 40)
        extra = " ".join([BOILERPLATE] * copies) if rng.random() < 0.5 else BOILERPLATE
        return (extra + "\n\n" + text) if rng.random() < 0.5 else (text + "\n\n" + extra)
    return " ".join(words)


def quality_set(docs: list[str], num_bases: int, seed: int = 0):
    """(texts, injected pairs [(base_i, variant_i, J_true, kind)]): bases then their variants."""
    rng = np.random.default_rng(seed)
    long_docs = [d for d in docs if len(d.split()) >= 60]
    bases = [long_docs[i] for i in rng.choice(len(long_docs), size=num_bases, replace=False)]
    vocab = [w for d in docs[:500] for w in d.split()]
    kinds = ("substitute", "delete", "insert", "reorder", "boilerplate")
    texts, pairs = list(bases), []
    for i, base in enumerate(bases):
        kind = kinds[i % len(kinds)]
        var = mutate(base, kind, float(rng.uniform(0.0, 0.12)), vocab, rng)
        pairs.append((i, len(texts), jaccard(shingle_set(base), shingle_set(var)), kind))
        texts.append(var)
    return texts, pairs


def prf(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    tp, fp, fn = int((pred & truth).sum()), int((pred & ~truth).sum()), int((~pred & truth).sum())
    p = tp / max(tp + fp, 1)
    r = tp / max(tp + fn, 1)
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(2 * p * r / max(p + r, 1e-12), 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def cluster_pairs(labels: np.ndarray) -> set[tuple[int, int]]:
    out = set()
    sizes = np.bincount(labels)
    for c in np.flatnonzero(sizes > 1):
        m = np.flatnonzero(labels == c).tolist()
        out.update((a, b) for i, a in enumerate(m) for b in m[i + 1 :])
    return out


def evaluate(texts, pairs, labels) -> dict:
    """Injected pairs: truth J >= 0.8, predicted = same cluster. Plus precision over every pair
    the method put in one cluster (true Jaccard recomputed), and recall per Jaccard bin."""
    truth = np.array([j >= THRESHOLD for _, _, j, _ in pairs])
    pred = np.array([labels[a] == labels[b] for a, b, _, _ in pairs])
    out = {"injected_pairs": prf(pred, truth)}
    shingles: dict[int, set[str]] = {}
    all_pred = cluster_pairs(labels)
    good = 0
    for a, b in all_pred:
        sa = shingles.setdefault(a, shingle_set(texts[a]))
        sb = shingles.setdefault(b, shingle_set(texts[b]))
        good += jaccard(sa, sb) >= THRESHOLD
    out["all_cluster_pairs"] = {
        "pairs": len(all_pred),
        "precision": round(good / max(len(all_pred), 1), 4),
    }
    js = np.array([j for _, _, j, _ in pairs])
    bins = {}
    for lo, hi in ((0.0, 0.7), (0.7, 0.75), (0.75, 0.8), (0.8, 0.85), (0.85, 0.9), (0.9, 1.01)):
        sel = (js >= lo) & (js < hi)
        if sel.any():
            bins[f"{lo:.2f}-{min(hi, 1):.2f}"] = {
                "pairs": int(sel.sum()),
                "same_cluster": round(float(pred[sel].mean()), 3),
            }
    out["same_cluster_rate_by_true_jaccard"] = bins
    kinds = sorted({k for *_, k in pairs})
    out["f1_by_kind"] = {
        k: prf(pred[[p[3] == k for p in pairs]], truth[[p[3] == k for p in pairs]])["f1"]
        for k in kinds
    }
    return out


def jaccard_agreement(texts, pairs, limit: int = 300) -> dict:
    """Estimated vs true Jaccard on injected pairs, ours and datasketch's (same num_perm)."""
    from datasketch import MinHash

    ours_err, theirs_err, diff = [], [], []
    for a, b, j, _ in pairs[:limit]:
        sig = minhash_texts([texts[a], texts[b]], NUM_PERM, NGRAM, seed=a)
        e1 = float(estimate_jaccard(sig[:1], sig[1:])[0])
        ms = []
        for t in (texts[a], texts[b]):
            m = MinHash(num_perm=NUM_PERM, seed=a)
            m.update_batch([s.encode("utf-8") for s in shingle_set(t)])
            ms.append(m)
        e2 = ms[0].jaccard(ms[1])
        ours_err.append(e1 - j)
        theirs_err.append(e2 - j)
        diff.append(e1 - e2)
    sd = float(
        np.sqrt(np.mean([max(j * (1 - j), 1e-9) for _, _, j, _ in pairs[:limit]]) / NUM_PERM)
    )
    return {
        "pairs": len(ours_err),
        "expected_sd": round(sd, 4),
        "ours_bias": round(float(np.mean(ours_err)), 4),
        "ours_rmse": round(float(np.sqrt(np.mean(np.square(ours_err)))), 4),
        "datasketch_bias": round(float(np.mean(theirs_err)), 4),
        "datasketch_rmse": round(float(np.sqrt(np.mean(np.square(theirs_err)))), 4),
        "mean_ours_minus_datasketch": round(float(np.mean(diff)), 4),
    }


def stage_run(texts: list[str], tmp: Path) -> dict:
    """The whole stage (Parquet in and out, exact + near, workers=1): speed, then again under
    tracemalloc, per phase: bytes per document held after map 1, and the transient peak of the
    exact and near phases above it (numpy and Python; Arrow buffers are not traced)."""
    import pipeline.stages.dedup as stage
    from pipeline.executor import Executor
    from pipeline.parts import docs_table, write_table
    from pipeline.stage import StageContext, StageInputs

    parts = []
    for i in range(0, len(texts), 500):
        parts.append(tmp / "in" / f"part-{i // 500:05d}.parquet")
        chunk = texts[i : i + 500]
        ids = [str(i + k) for k in range(len(chunk))]
        write_table(parts[-1], docs_table(ids, chunk, ["bench"] * len(chunk)))
    phases: dict[str, tuple[int, int, int]] = {}
    original = {name: getattr(stage, name) for name in ("_gather", "_exact", "_near")}

    def traced(name):
        def fn(*args, **kwargs):
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            result = original[name](*args, **kwargs)
            phases[name] = (start, *tracemalloc.get_traced_memory())
            return result

        return fn

    out: dict = {}
    for trace in (False, True):
        dest = tmp / f"out-{trace}"
        dest.mkdir(parents=True)
        with Executor(1) as ex:
            ctx = StageContext(
                name="dedup",
                run_dir=tmp,
                out_dir=dest,
                seed=1,
                inputs={"download": StageInputs.from_dir("download", parts[0].parent)},
                upstream="download",
                executor=ex,
                progress=False,
            )
            if trace:
                for name in original:
                    setattr(stage, name, traced(name))
                tracemalloc.start()
            t0 = time.perf_counter()
            res = stage.run(stage.DedupConfig(batch_docs=BATCH), ctx)
            sec = time.perf_counter() - t0
            if trace:
                tracemalloc.stop()
                for name, fn in original.items():
                    setattr(stage, name, fn)
        if not trace:
            keys = (
                "docs_out",
                "dropped_exact_dup",
                "dropped_near_dup",
                "state_bytes_per_doc_peak",
                "state_bytes_per_doc_budget",
            )
            out.update(
                {
                    "docs": len(texts),
                    "docs_per_s": round(len(texts) / sec, 1),
                    "seconds": round(sec, 3),
                    **{k: res.all_stats()[k] for k in keys},
                }
            )
    n = len(texts)
    out["traced_held_after_map_bytes_per_doc"] = round(phases["_gather"][1] / n, 1)
    out["traced_map_peak_mb"] = round(phases["_gather"][2] / 1e6, 1)
    for name in ("_exact", "_near"):
        start, _, peak = phases[name]
        out[f"traced{name}_peak_bytes_per_doc"] = round(peak / n, 1)
        out[f"traced{name}_transient_mb"] = round((peak - start) / 1e6, 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-docs", type=int, default=8000)
    ap.add_argument("--num-bases", type=int, default=1500)
    args = ap.parse_args()
    import tempfile

    import datasketch

    docs = load_docs(args.max_docs)
    bands, rows = optimal_bands(THRESHOLD, NUM_PERM, FN_WEIGHT)
    words = sum(len(d.split()) for d in docs)
    report: dict = {
        "machine": f"{platform.machine()} {platform.python_version()}, one process",
        "datasketch": datasketch.__version__,
        "num_perm": NUM_PERM,
        "ngram": NGRAM,
        "threshold": THRESHOLD,
        "bands": bands,
        "rows": rows,
        "p_candidate_at_0_8": round(float(s_curve(0.8, bands, rows)), 4),
        "speed": {"docs": len(docs), "mean_words_per_doc": round(words / len(docs))},
    }
    print(f"speed: {len(docs)} docs, {bands}x{rows} bands", file=sys.stderr)
    fns = {
        "ours": ours,
        "ours_verify_exact": functools.partial(ours, exact=True),
        "datasketch": theirs,
        "datasketch_bulk": theirs_bulk,
    }
    timings = interleaved(fns, docs, bands, rows, args.repeats)
    for name, (med, times, labels, cand) in timings.items():
        report["speed"][name] = {
            "seconds_median": round(med, 3),
            "seconds": [round(t, 3) for t in times],
            "docs_per_s": round(len(docs) / med, 1),
            "candidates": cand,
            "docs_in_clusters": int((np.bincount(labels)[labels] > 1).sum()),
        }
        print(f"  {name}: {len(docs) / med:,.0f} docs/s", file=sys.stderr)
    sp = report["speed"]
    for name in ("ours", "ours_verify_exact"):  # medians; best-of also, as load varies
        for peer in ("datasketch", "datasketch_bulk"):
            sp[f"ratio_{name}_over_{peer}"] = round(
                sp[name]["docs_per_s"] / sp[peer]["docs_per_s"], 1
            )
            sp[f"ratio_{name}_over_{peer}_best_of"] = round(
                min(sp[peer]["seconds"]) / min(sp[name]["seconds"]), 1
            )
    texts, pairs = quality_set(docs, args.num_bases)
    report["quality"] = {
        "docs": len(texts),
        "injected_pairs": len(pairs),
        "injected_at_or_above_threshold": sum(j >= THRESHOLD for _, _, j, _ in pairs),
    }
    exact = functools.partial(ours, exact=True)
    for name, fn in (("ours", ours), ("ours_verify_exact", exact), ("datasketch", theirs)):
        labels, _ = fn(texts, bands, rows)
        report["quality"][name] = evaluate(texts, pairs, labels)
        print(f"  quality {name}: {report['quality'][name]['injected_pairs']}", file=sys.stderr)
    report["jaccard_agreement"] = jaccard_agreement(texts, pairs)
    with tempfile.TemporaryDirectory() as tmp:
        report["stage"] = stage_run(docs, Path(tmp))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
