"""dedup stage: worked clusters, toy corpus end to end, determinism across workers, errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import make_recipe, run_dedup_parts, run_stages
from pipeline.cli import main
from pipeline.errors import DataError, RecipeError
from pipeline.inspect import inspect_cluster
from pipeline.parts import docs_table, read_table
from pipeline.stages.dedup import DedupConfig

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def _doc(seed: int, n: int = 60) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[i] for i in rng.integers(len(WORDS), size=n))


def _run_parts(tmp_path: Path, parts: list[pa.Table], workers: int = 1, **cfg):
    return run_dedup_parts(tmp_path, parts, workers, stage_seed=11, **cfg)


def _read(out: Path, pattern: str) -> list[dict]:
    rows = []
    for p in sorted(out.glob(pattern)):
        rows += read_table(p).to_pylist()
    return rows


@pytest.mark.parametrize("verify", ["exact", "estimate"])
def test_worked_example_clusters(tmp_path, verify):
    """a; b = a verbatim; c = a with one of 60 words replaced (trigrams: 55 shared of 61 -> J 0.90);
    d unrelated; e = d with different whitespace (exact after normalisation); f unrelated.
    Expected: b exact_dup and c near_dup of cluster 0 (a's index); e exact_dup of cluster 3."""
    a, d, f = _doc(1), _doc(2), _doc(3)
    words = a.split()
    words[30] = "zzzz"
    c = " ".join(words)
    e = "  " + d.replace(" ", "\n", 5) + "\n"
    texts = [a, a, c, d, e, f]
    table = docs_table([f"d{i}" for i in range(6)], texts, ["t"] * 6)
    res, out = _run_parts(tmp_path, [table.slice(0, 3), table.slice(3)], ngram=3, verify=verify)
    kept = _read(out, "part-*.parquet")
    rej = _read(out, "rejected/part-*.parquet")
    assert [r["id"] for r in kept] == ["d0", "d3", "d5"]
    assert [r["cluster"] for r in kept] == [0, 3, -1]
    assert [(r["id"], r["reasons"], r["cluster"]) for r in rej] == [
        ("d1", ["exact_dup"], 0),
        ("d2", ["near_dup"], 0),
        ("d4", ["exact_dup"], 3),
    ]
    s = res.all_stats()
    assert (s["docs_in"], s["docs_out"], s["dropped_exact_dup"], s["dropped_near_dup"]) == (
        6,
        3,
        2,
        1,
    )
    assert s["clusters"] == 2 and s["cluster_size_histogram"] == {"2": 1, "3": 1}
    assert s["largest_cluster_size"] == 3 and s["largest_cluster_id"] == 0
    assert s["verified_pairs"] == 1 and s["candidate_pairs"] >= 1
    ex = s["example_clusters"][0]
    assert ex["cluster"] == 0 and [x["id"] for x in ex["docs"]] == ["d0", "d1", "d2"]
    assert ex["docs"][0]["reason"] == "kept" and len(ex["docs"][0]["text"]) == 100
    assert s["state_bytes_per_doc_peak"] <= s["state_bytes_per_doc_budget"]


def test_keep_longest_and_quality(tmp_path):
    """Cluster {0: a, 1: a + 'extra words'}: 'longest' keeps 1; 'quality' keeps the higher score."""
    a = _doc(4, 80)
    texts = [a, a + " kilo lima", _doc(5)]
    q = pa.array([0.9, 0.2, 0.5], pa.float32())
    table = docs_table(["x", "y", "z"], texts, ["t"] * 3, quality=q)
    res, out = _run_parts(tmp_path / "l", [table], ngram=3, keep="longest")
    assert [r["id"] for r in _read(out, "part-*.parquet")] == ["y", "z"]
    res, out = _run_parts(tmp_path / "q", [table], ngram=3, keep="quality")
    kept = _read(out, "part-*.parquet")
    assert [r["id"] for r in kept] == ["x", "z"] and kept[0]["quality"] == pytest.approx(0.9)


def test_keep_quality_without_column_fails(tmp_path):
    table = docs_table(["x"], ["some text here"], ["t"])
    with pytest.raises(DataError, match="column 'quality' is missing"):
        _run_parts(tmp_path, [table], keep="quality")


def test_null_text_is_a_bad_artifact(tmp_path):
    table = pa.table({"id": ["a", "b"], "text": ["x y", None], "source": ["t", "t"]})
    with pytest.raises(DataError, match="1 rows have a null text"):
        _run_parts(tmp_path, [table])


def test_short_and_empty_documents(tmp_path):
    """Fewer words than ngram -> one shingle of all words; no words -> no shingles, never near."""
    texts = ["hello world", "Hello, world!", "hello there", "!!!", "...", ""]
    table = docs_table([str(i) for i in range(6)], texts, ["t"] * 6)
    res, out = _run_parts(tmp_path, [table], ngram=5)
    kept = [r["id"] for r in _read(out, "part-*.parquet")]
    # "Hello, world!" simplifies to "hello world": the same single shingle -> near_dup of 0
    rej = {r["id"]: r["reasons"][0] for r in _read(out, "rejected/part-*.parquet")}
    assert rej == {"1": "near_dup"}
    assert kept == ["0", "2", "3", "4", "5"]
    assert res.all_stats()["docs_without_shingles"] == 3


def test_toy_corpus_end_to_end(toy_run):
    """Labelled toy junk: exact_dup copies go as exact_dup, near_dup copies (~2.5% words
    replaced: trigram Jaccard ~0.87) as near_dup, and no good document is dropped."""
    run_stages(
        toy_run,
        {
            "download": {"source": "toy", "max_docs": 400, "docs_per_part": 100},
            "dedup": {"ngram": 3},
        },
    )
    out = toy_run / "dedup"
    kept = _read(out, "part-*.parquet")
    rej = _read(out, "rejected/part-*.parquet")
    by = Counter((r["label"], r["reasons"][0]) for r in rej)
    labels = Counter(r["label"] for r in kept)
    assert by[("junk:exact_dup", "exact_dup")] >= 1 and by[("junk:near_dup", "near_dup")] >= 1
    assert set(by) <= {("junk:exact_dup", "exact_dup"), ("junk:near_dup", "near_dup")}
    assert labels["junk:exact_dup"] == 0 and labels["junk:near_dup"] == 0
    assert all(r["cluster"] >= 0 for r in rej)
    report = json.loads((toy_run / "pipeline_report.json").read_text())
    stats = report["stages"][-1]["stats"]
    assert stats["docs_in"] == 400 == len(kept) + len(rej)
    assert set(kept[0]) == {"id", "text", "source", "label", "cluster"}


def test_same_bytes_for_one_and_two_workers(tmp_path):
    stages = {
        "download": {"source": "toy", "max_docs": 300, "docs_per_part": 60},
        "dedup": {"ngram": 3},
    }
    hashes = []
    for w in (1, 2):
        run_stages(tmp_path / f"w{w}", stages, workers=w)
        manifest = json.loads((tmp_path / f"w{w}" / "manifest.json").read_text())
        hashes.append({o["path"]: o["sha256"] for o in manifest["stages"]["dedup"]["outputs"]})
    assert hashes[0] == hashes[1] and any("rejected/" in p for p in hashes[0])


def test_rerun_on_own_output_drops_nothing(tmp_path):
    a = _doc(6)
    table = docs_table(["p", "q", "r"], [a, a, _doc(7)], ["t"] * 3)
    _, out = _run_parts(tmp_path / "1", [table])
    again, out2 = _run_parts(tmp_path / "2", [read_table(out / "part-00000.parquet")])
    assert again.all_stats()["docs_out"] == again.all_stats()["docs_in"] == 2
    assert pq.read_schema(out2 / "part-00000.parquet").names.count("cluster") == 1


def test_bloom_mode_removes_exact_dups(tmp_path):
    a, b = _doc(8), _doc(9)
    table = docs_table(["1", "2", "3", "4"], [a, b, a, b + " "], ["t"] * 4)
    res, out = _run_parts(tmp_path, [table], exact="bloom", near=False, bloom_fp_rate=1e-4)
    rej = _read(out, "rejected/part-*.parquet")
    assert [(r["id"], r["reasons"], r["cluster"]) for r in rej] == [
        ("3", ["exact_dup"], -1),
        ("4", ["exact_dup"], -1),
    ]
    s = res.all_stats()
    assert s["bloom_hashes"] == 13 and s["bloom_fp_estimate"] < 1e-4 * 1.5


@pytest.mark.parametrize(
    ("block", "match"),
    [
        ({"bands": 4}, r"dedup\.bands: set bands and rows together"),
        ({"bands": 20, "rows": 10}, r"bands\*rows must be <= num_perm 128"),
        ({"threshold": 1.5}, r"dedup\.threshold: must be in \(0\.0, 1\.0\], got 1\.5"),
        ({"exact": "off", "near": False}, r"nothing to do"),
        ({"keep": "best"}, r"dedup\.keep: got 'best'"),
    ],
)
def test_recipe_errors(tmp_path, block, match):
    with pytest.raises(RecipeError, match=match):
        make_recipe(tmp_path, {"download": {"source": "toy"}, "dedup": block})


def test_inspect_shows_a_cluster_side_by_side(tmp_path):
    a = _doc(10)
    words = a.split()
    words[20] = "zzzz"
    table = docs_table(["keep-me", "near-me", "other"], [a, " ".join(words), _doc(11)], ["t"] * 3)
    _run_parts(tmp_path, [table], ngram=3)
    text = inspect_cluster(tmp_path, "out-1", 0, chars=1000)
    assert "keep-me (kept)" in text and "near-me (near_dup)" in text and "[zzzz]" in text
    assert main(["inspect", str(tmp_path), "--stage", "out-1", "--cluster", "5"]) == 1


def test_batches_cap_documents_and_characters(monkeypatch):
    from pipeline.stages import dedup

    monkeypatch.setattr(dedup, "BATCH_CHARS", 10)
    texts = ["aaaa", "bbbb", "cccc", "x" * 50, "d", "e", "f"]
    assert dedup._batches(texts, 2) == [(0, 2), (2, 3), (3, 4), (4, 6), (6, 7)]
    assert dedup._batches([], 2) == []


# ---------------------------------------------------------------- partitioned == in-RAM


def _dup_corpus(num: int = 150) -> tuple[list[str], list[float]]:
    """Originals, exact copies (whitespace changed), near copies (1-4 of 60 words replaced,
    also of copies: chains), a few texts without words; copies point anywhere earlier, so
    clusters span parts. Quality scores repeat (ties) and include NaN."""
    rng = np.random.default_rng(42)
    texts: list[str] = []
    for i in range(num):
        r = rng.random()
        if i < 5 or r < 0.35:
            texts.append(_doc(1000 + i))
        elif r < 0.55:
            texts.append("  " + texts[int(rng.integers(len(texts)))].replace(" ", "\n", 3))
        elif r < 0.92:
            words = texts[int(rng.integers(len(texts)))].split() or ["x"]
            for k in rng.integers(len(words), size=int(rng.integers(1, 5))):
                words[k] = WORDS[int(rng.integers(len(WORDS)))] + "q"
            texts.append(" ".join(words))
        else:
            texts.append(["", "...", "!!", "a"][i % 4])
    quality = [float("nan") if i % 17 == 0 else float(i % 5) for i in range(num)]
    return texts, quality


def _reference(texts: list[str], quality: list[float], offsets, cfg, seed: int):
    """The in-RAM algorithm over global per-document arrays (what dedup did before its reduce
    was partitioned): decision, cluster and the cluster stats."""
    from oracles import choose_keepers, components, example_members, unique_pairs
    from pipeline.dedup import cluster as cl
    from pipeline.dedup import exact
    from pipeline.dedup.lsh import band_edges, band_keys
    from pipeline.dedup.minhash import exact_jaccard, minhash_texts, shingle_sets

    n = len(texts)
    keys = exact.exact_keys(texts)
    if cfg.exact == "hash_set":
        ex = exact.hash_set(keys)
    elif cfg.exact == "bloom":
        ex = exact.bloom(keys, offsets, cfg.bloom_fp_rate, cfg.bloom_expected_docs)
    else:
        ex = exact.ExactDuplicates(np.zeros(n, bool), np.zeros((0, 2), np.int64))
    edges, extra = ex.edges, {}
    if cfg.near:
        sig = minhash_texts(texts, cfg.num_perm, cfg.ngram, seed)
        empty = cl.no_shingles(sig)
        cand = np.flatnonzero(~ex.dup & ~empty)
        bands, rows = cfg.bands_rows()
        mult = np.random.default_rng([seed, 0x6C7368]).integers(
            0, 2**64, size=rows, dtype=np.uint64
        ) | np.uint64(1)
        lists = [
            cand[band_edges(band_keys(sig, cand, range(b * rows, (b + 1) * rows), mult))]
            for b in range(bands)
        ]
        pairs = unique_pairs(lists, n)
        if cfg.verify == "exact":
            sets = dict(enumerate(shingle_sets(texts, cfg.ngram, seed)))
            ok = exact_jaccard(sets, pairs) >= cfg.threshold - 1e-12
        else:
            ok = cl.verify(sig, pairs, cfg.threshold)
        edges = np.concatenate([edges, pairs[ok]])
        extra = {
            "docs_without_shingles": int(empty.sum()),
            "candidate_pairs": len(pairs),
            "verified_pairs": int(ok.sum()),
            "band_task_docs": len(cand),
        }
    labels = components(n, edges)
    score = None
    if cfg.keep == "longest":
        score = np.array([len(t) for t in texts], np.int32)
    elif cfg.keep == "quality":
        q = np.array(quality, np.float32)
        score = np.where(np.isnan(q), -np.inf, q).astype(np.float32)
    decision = choose_keepers(labels, ex.dup, score)
    cluster = np.where(np.bincount(labels, minlength=n)[labels] > 1, labels, -1)
    hist, ids, sizes = cl.size_histogram(labels)
    show = example_members(labels, decision, ids, sizes, cfg.num_examples, 5)
    reason = {0: "kept", 1: "exact_dup", 2: "near_dup"}
    rows = [
        {
            "index": i,
            "cluster": int(cluster[i]),
            "id": f"d{i}",
            "reason": reason[int(decision[i])],
            "text": texts[i][:100],
        }
        for i in np.flatnonzero(show).tolist()
    ]
    return decision, cluster, {**cl.cluster_stats(hist, ids, sizes, rows), **extra}


@pytest.mark.parametrize(
    ("cfg", "workers", "bucket_docs"),
    [
        ({}, 1, 40),
        ({"keep": "longest", "verify": "estimate"}, 2, 40),
        ({"keep": "quality", "num_examples": 50}, 1, 1 << 21),
        ({"exact": "bloom", "bloom_fp_rate": 1e-4}, 2, 40),
        ({"exact": "off", "keep": "quality"}, 1, 40),
        ({"near": False, "keep": "longest"}, 1, 8),
        ({"exact": "bloom", "near": False}, 1, 8),
    ],
)
def test_partitioned_reduce_equals_the_in_ram_algorithm(
    tmp_path, monkeypatch, cfg, workers, bucket_docs
):
    """Many exact and near copies spread over 5 uneven parts (one empty), key buckets of ~8 or
    ~40 keys (32 or 4 tasks for the exact keys and for each LSH band) and component ranges of
    ~8 edges (4 ranges), or one of each: every kept and rejected row, its cluster and the
    report's cluster stats equal those of the global in-RAM algorithm (sort-based exact
    copies, union-find over all documents)."""
    from pipeline.stages import dedup
    from pipeline.stages.dedup import reduce

    monkeypatch.setattr(dedup, "EXACT_BUCKET_DOCS", bucket_docs)
    monkeypatch.setattr(reduce, "CC_EDGES_PER_TASK", 8 if bucket_docs < 1000 else 1 << 22)
    texts, quality = _dup_corpus()
    ids = [f"d{i}" for i in range(len(texts))]
    table = docs_table(ids, texts, ["t"] * len(texts), quality=pa.array(quality, pa.float32()))
    cuts = [0, 23, 70, 70, 71, 150]  # an empty part too
    parts = [table.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    res, out = _run_parts(tmp_path, parts, workers=workers, ngram=3, **cfg)
    config = DedupConfig(ngram=3, **cfg)
    decision, cluster, want = _reference(texts, quality, np.array(cuts), config, 11)
    kept = _read(out, "part-*.parquet")
    rej = _read(out, "rejected/part-*.parquet")
    reason = {1: "exact_dup", 2: "near_dup"}
    assert [(r["id"], r["cluster"]) for r in kept] == [
        (ids[i], int(cluster[i])) for i in np.flatnonzero(decision == 0)
    ]
    assert [(r["id"], r["reasons"], r["cluster"]) for r in rej] == [
        (ids[i], [reason[int(decision[i])]], int(cluster[i])) for i in np.flatnonzero(decision)
    ]
    got = res.all_stats()
    assert {k: got[k] for k in want} == want
    assert got["clusters"] >= 10 or (config.exact == "bloom" and not config.near)
    if config.exact != "off":
        assert (decision == 1).sum() >= 10
    if config.near:
        assert (decision == 2).sum() >= 10
    assert got["state_bytes_per_doc_peak"] <= got["state_bytes_per_doc_budget"]
