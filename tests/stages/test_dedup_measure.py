"""dedup measured in the run: precision of merges, recall of pairs, labelled P/R/F1, and the
same numbers for any worker count."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa

from helpers import run_dedup_parts
from pipeline.dedup.measure import jaccard
from pipeline.dedup.minhash import shingle_sets
from pipeline.parts import docs_table, read_table
from pipeline.sources.toy import generate

VOCAB = [f"w{i}" for i in range(5000)]


def _chain_docs(seed: int) -> list[str]:
    """Bases and edit chains: base -> 6 words replaced -> 6 more (Jaccard drifts down a chain)."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(12):
        words = [VOCAB[i] for i in rng.integers(len(VOCAB), size=300)]
        docs.append(" ".join(words))
        for _ in range(int(rng.integers(0, 4))):
            for pos in rng.choice(300, 6, replace=False):
                words[pos] = VOCAB[int(rng.integers(len(VOCAB)))]
            docs.append(" ".join(words))
    return docs


def _run(tmp_path, tables: list[pa.Table], workers: int = 1, **cfg):
    res, out = run_dedup_parts(tmp_path, tables, workers, stage_seed=3, **cfg)
    return res.all_stats(), out


def _rows(out, pattern):
    return [r for p in sorted(out.glob(pattern)) for r in read_table(p).to_pylist()]


def test_measured_precision_and_recall_equal_the_full_count(tmp_path):
    """Samples larger than the corpus: the estimates are the exact shares over every merged
    pair and every pair at Jaccard >= threshold, recomputed here from the stage's outputs."""
    docs = _chain_docs(0)
    ids = [f"d{i:03d}" for i in range(len(docs))]
    tables = [
        docs_table(ids[a : a + 10], docs[a : a + 10], ["s"] * len(ids[a : a + 10]))
        for a in range(0, len(docs), 10)
    ]
    cfg = dict(ngram=2, threshold=0.9, exact="off", seed=1, recall_max_share=1.0)
    stats, out = _run(tmp_path, tables, **cfg)
    kept, rejected = _rows(out, "part-*.parquet"), _rows(out, "rejected/part-*.parquet")
    text = {r["id"]: r["text"] for r in kept + rejected}
    cluster = {r["id"]: r["cluster"] for r in kept + rejected}
    winner = {r["cluster"]: r["id"] for r in kept if r["cluster"] >= 0}
    sets = dict(zip(ids, shingle_sets([text[i] for i in ids], 2, 1), strict=True))
    merged = [(r["id"], winner[r["cluster"]]) for r in rejected]
    good = sum(jaccard(sets[a], sets[b]) >= 0.9 for a, b in merged)
    assert stats["merge_precision_sample"] == len(merged) > 5
    assert stats["merge_precision"] == round(good / len(merged), 4) < 1.0  # chains drift
    pairs = [(a, b) for a, b in itertools.combinations(ids, 2) if jaccard(sets[a], sets[b]) >= 0.9]
    found = sum(cluster[a] == cluster[b] >= 0 for a, b in pairs)
    assert stats["pair_recall_pairs"] == len(pairs) and stats["pair_recall_docs"] == len(ids)
    assert stats["pair_recall"] == round(found / len(pairs), 4)
    lo, hi = stats["merge_precision_ci95"]
    assert lo < stats["merge_precision"] < hi


def test_recall_sees_pairs_lsh_misses(tmp_path):
    """One band of all 64 rows: a pair at Jaccard ~0.93 is a candidate with p = 0.93^64 ~ 1%,
    so the brute-force sample finds pairs the run did not merge."""
    docs = _chain_docs(1)
    table = docs_table([str(i) for i in range(len(docs))], docs, ["s"] * len(docs))
    stats, _ = _run(
        tmp_path,
        [table],
        ngram=2,
        threshold=0.9,
        exact="off",
        num_perm=64,
        bands=1,
        rows=64,
        recall_max_share=1.0,
    )
    assert stats["pair_recall_pairs"] > 5 and stats["pair_recall"] < 0.5
    assert stats["pair_recall_ci95"][1] < 1.0


def test_labelled_prf_and_same_numbers_for_any_worker_count(tmp_path):
    recs = list(generate(240, seed=5, junk_fraction=0.3))
    tables = []
    for a in range(0, len(recs), 80):
        chunk = recs[a : a + 80]
        t = docs_table([r.id for r in chunk], [r.text for r in chunk], [r.source for r in chunk])
        tables.append(t.append_column("label", pa.array([r.label for r in chunk])))
    one, out1 = _run(
        tmp_path, tables, workers=1, ngram=3, precision_sample_pairs=10, recall_sample_docs=150
    )
    two, out2 = _run(
        tmp_path, tables, workers=2, ngram=3, precision_sample_pairs=10, recall_sample_docs=150
    )
    # the default share caps the recall sample at 5% of the 240 documents
    assert one["pair_recall_docs"] == 12 and one["pair_recall_docs_max_share"] == 0.05
    drop = {k for k in one if k.endswith("seconds")}
    assert {k: v for k, v in one.items() if k not in drop} == {
        k: v for k, v in two.items() if k not in drop
    }
    for p in sorted(out1.rglob("*.parquet")):
        assert p.read_bytes() == (out2 / p.relative_to(out1)).read_bytes()
    assert one["merge_precision_sample"] == 10
    labelled = sum(r.label.endswith("dup") for r in recs)
    assert one["labelled_tp"] + one["labelled_fn"] == labelled
    assert (
        one["labelled_tp"] + one["labelled_fp"]
        == one["dropped_exact_dup"] + one["dropped_near_dup"]
    )
    assert one["labelled_f1"] > 0.8
    assert 0 < one["measure_cpu_seconds"]


def test_measurement_off(tmp_path):
    table = docs_table(
        ["a", "b"], ["one two three four five six", "seven eight nine ten"], ["s"] * 2
    )
    stats, _ = _run(tmp_path, [table], precision_sample_pairs=0, recall_sample_docs=0)
    assert "merge_precision" not in stats and "measure_cpu_seconds" not in stats


def test_recall_sample_shingles_come_from_map_one(tmp_path):
    """Map 1 keeps the shingle sets of documents under the key bound; documents drawn beyond
    it (here: most documents without shingles, so the bound falls short) are shingled in map 2,
    and either way the recall numbers equal an exhaustive count over the sample."""
    docs = _chain_docs(2)
    blanks = ["" for _ in range(3 * len(docs))]  # no shingles: never in the recall sample
    texts = docs + blanks
    ids = [f"d{i:03d}" for i in range(len(texts))]
    table = docs_table(ids, texts, ["s"] * len(texts))
    stats, out = _run(
        tmp_path,
        [table],
        ngram=2,
        threshold=0.9,
        exact="off",
        seed=1,
        recall_max_share=1.0,
        recall_sample_docs=len(docs),  # the bound holds ~(k + 4 sqrt k + 16) of 4k documents
    )
    assert stats["pair_recall_docs"] == len(docs)  # every document with shingles
    kept, rejected = _rows(out, "part-*.parquet"), _rows(out, "rejected/part-*.parquet")
    cluster = {r["id"]: r["cluster"] for r in kept + rejected}
    sets = dict(zip(ids, shingle_sets(docs, 2, 1), strict=False))
    pairs = [
        (a, b)
        for a, b in itertools.combinations(ids[: len(docs)], 2)
        if jaccard(sets[a], sets[b]) >= 0.9
    ]
    assert stats["pair_recall_pairs"] == len(pairs) > 3
    found = sum(cluster[a] == cluster[b] >= 0 for a, b in pairs)
    assert stats["pair_recall"] == round(found / len(pairs), 4)
