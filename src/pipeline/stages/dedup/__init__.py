"""dedup: drop exact duplicates (xxh3-128 of whitespace-normalised text, hash set or Bloom filter)
and near duplicates (MinHash of word n-grams, LSH bands, verified Jaccard, connected components).

Every per-document array lives in files in the stage's temp folder (`pipeline.stages.dedup.files`),
written and read by executor tasks: a map over parts hashes and sketches; one task per exact-key
bucket finds copies; one task per LSH band writes candidate pairs; tasks per part verify them;
the driver joins the verified pairs into components (only documents in near-duplicate pairs);
tasks per bucket label the exact copies; a last map over parts writes kept and rejected parts
from its slices of those files. The driver holds per-part and per-bucket numbers, the near
components and, with `exact: bloom`, the filter. The algorithms live in pipeline.dedup.
"""

from __future__ import annotations

import functools
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import recipe_key, setting
from pipeline.dedup import cluster as cl
from pipeline.dedup import exact, measure
from pipeline.dedup.lsh import band_bucket_rows, band_mult, sig_name
from pipeline.dedup.minhash import minhash_shingles, sets_of_rows, text_shingles
from pipeline.errors import DataError
from pipeline.io import save_npy
from pipeline.parts import read_table, write_kept_and_rejected
from pipeline.permute import splitmix64
from pipeline.stage import Stage, StageContext, StageResult
from pipeline.stages.dedup import files, reduce
from pipeline.stages.dedup.config import DedupConfig
from pipeline.stages.dedup.measured import log_measured, measure_payload, measured_stats
from pipeline.stages.dedup.verify import PartRows
from pipeline.stages.download.mix import COPY_COLUMN

REASONS = {cl.EXACT_DUP: "exact_dup", cl.NEAR_DUP: "near_dup"}
EXAMPLE_DOCS = 5  # documents shown per example cluster
EXAMPLE_CHARS = 100
BATCH_CHARS = 1 << 19  # characters hashed per numpy batch at most (besides batch_docs)
SKETCH_DIR = ".sketch"  # the stage's work files (signatures, keys, pairs...) in its temp folder
EXACT_BUCKET_DOCS = 1 << 21  # keys per exact-dup bucket task: ~50 MB of keys + its sort
# Driver bytes: no term that grows with the documents. It holds PART_BYTES per task of each map
# (its result: counts, the `top` largest clusters) and, with `exact: bloom`, the filter
# (bloom_expected_docs x ~29 bits at 1e-6: the user's memory/accuracy trade-off).
STATE_BUDGET = 0  # bytes per document
PART_BYTES = 64


# ---------------------------------------------------------------- map 1: per-part files


def _batches(texts: list[str], max_docs: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of at most `max_docs` texts and about BATCH_CHARS characters: hashing
    temporaries are ~40 bytes per character, so a batch stays ~20 MB however long the texts."""
    out, lo, size = [], 0, 0
    for i, t in enumerate(texts):
        if i > lo and (i - lo >= max_docs or size + len(t) > BATCH_CHARS):
            out.append((lo, i))
            lo, size = i, 0
        size += len(t)
    if lo < len(texts):
        out.append((lo, len(texts)))
    return out


@dataclass(frozen=True, slots=True)
class SketchPart:
    """Part `index` at `path`, whose first row is global row `first`: one hash task."""

    index: int
    path: Path
    first: int


def copy_salts(table: pa.Table) -> np.ndarray:
    """uint64 [n]: 0 for a document's first pass in a download.sources mix, else a hash of its
    pass (`mix_copy`). XORed into the exact keys and MinHash values, it makes each pass its own
    corpus: a copy the mix asked for is never an exact or near duplicate of another pass, and
    duplicates within a pass are found as in the first (stages/download/mix.py)."""
    copy = table.column(COPY_COLUMN).to_numpy(zero_copy_only=False)
    copy = np.nan_to_num(copy.astype(np.float64)).astype(np.uint64)  # null (no mix): pass 0
    return np.where(copy > 0, splitmix64(copy), np.uint64(0))


def _sketch_part(
    item: SketchPart,
    cfg: DedupConfig,
    seed: int,
    work_dir: str,
    bits: int,
    tau: int = 0,
    recall_k: int = 0,
) -> dict[str, Any]:
    """Read one part (global rows from `first`); write its per-document arrays to `work_dir`:
    `score` (keep: longest | quality), exact keys (`keys` by bucket + `keybounds`, or in row
    order for bloom), `empty` (no shingle) and its MinHash signatures, transposed (uint32
    [num_perm, n]: a band's rows are contiguous). Returns counts: nothing per document, but
    the in-run measurement's recall draw (`_recall_candidates`) of `recall_k` documents."""
    index, path, first = item.index, item.path, item.first
    columns = ["text"] + (["quality"] if cfg.keep == "quality" else [])
    names = pq.ParquetFile(path).schema_arrow.names
    columns += [COPY_COLUMN] if COPY_COLUMN in names else []
    for col in columns:
        if col not in names:
            hint = " (keep: quality needs an input `quality` column)" if col == "quality" else ""
            raise DataError(str(path), f"column '{col}' is missing{hint}; columns: {names}")
    table = read_table(path, columns=columns)
    if table.column("text").null_count:
        raise DataError(str(path), f"{table.column('text').null_count} rows have a null text")
    texts = table.column("text").to_pylist()
    out: dict[str, Any] = {"num_docs": len(texts), "num_empty": 0}
    salt = copy_salts(table) if COPY_COLUMN in columns else None
    if cfg.keep == "longest":
        files.save(work_dir, "score", index, np.fromiter(map(len, texts), np.int32, len(texts)))
    if cfg.keep == "quality":
        q = table.column("quality").to_numpy(zero_copy_only=False).astype(np.float32)
        files.save(work_dir, "score", index, np.where(np.isnan(q), -np.inf, q).astype(np.float32))
    keys = exact.exact_keys(texts) if cfg.exact != "off" else None
    if keys is not None and salt is not None:
        keys ^= salt[:, None]
    if cfg.exact == "hash_set":
        rows, bounds = exact.bucket_rows(keys, first, bits)
        files.save(work_dir, "keys", index, rows)
        files.save(work_dir, "keybounds", index, bounds)
    elif cfg.exact == "bloom":
        files.save(work_dir, "keys", index, keys)
    if cfg.near:
        t0 = time.process_time()
        held = np.zeros(len(texts), bool)
        if recall_k:
            rkeys = measure.sample_keys(np.arange(first, first + len(texts)), seed, 2)
            held = rkeys < np.uint64(tau)  # candidates of the recall sample: their shingle sets
        spent = time.process_time() - t0
        sigs, held_sets = [], []
        for lo, hi in _batches(texts, cfg.batch_docs):
            shingles, per_doc = text_shingles(texts[lo:hi], cfg.ngram, seed)
            sigs.append(minhash_shingles(shingles, per_doc, cfg.num_perm, cfg.ngram, seed))
            t0 = time.process_time()
            held_sets += sets_of_rows(shingles, per_doc, np.flatnonzero(held[lo:hi]))
            spent += time.process_time() - t0
        sig = np.concatenate(sigs) if sigs else np.zeros((0, cfg.num_perm), np.uint32)
        empty = cl.no_shingles(sig)
        if salt is not None:  # after `empty`: a salted row must not look shingle-less
            sig ^= (salt & np.uint64(0xFFFFFFFF)).astype(np.uint32)[:, None]
        if recall_k:
            t0 = time.process_time()
            # a mix's copies stay out of the recall sample: a document and its own copy are
            # never merged (each pass is its own corpus), which the sample would count as missed
            skip = empty if salt is None else empty | (salt != 0)
            out["recall"] = _recall_candidates(first, rkeys, held, held_sets, skip, recall_k)
            out["measure_cpu_seconds"] = spent + time.process_time() - t0
        files.save(work_dir, "empty", index, empty)
        out["num_empty"] = int(empty.sum())
        bands, rows = cfg.bands_rows()
        mult = band_mult(seed, rows)
        keys, bounds = band_bucket_rows(sig, ~empty, first, bands, rows, mult, bits)
        files.save(work_dir, "bkeys", index, keys)
        files.save(work_dir, "bkeybounds", index, bounds)
        if cfg.verify == "estimate":  # the candidates' signatures are read back to compare
            save_npy(Path(work_dir) / sig_name(index), np.ascontiguousarray(sig.T))
    return out


def _recall_candidates(
    first: int,
    keys: np.ndarray,
    held: np.ndarray,
    held_sets: list[np.ndarray],
    empty: np.ndarray,
    k: int,
) -> dict[str, np.ndarray]:
    """The part's `k` documents with shingles of smallest seeded key (the driver keeps the
    global smallest: a uniform sample), and the shingle sets of those under the key bound
    (`held`): the sample then costs no second read or hashing of its texts."""
    ok = ~empty
    rkeys, docs = measure.bottom_k(keys[ok], k, np.flatnonzero(ok) + first)
    keep = ok[held]  # held sets of documents with shingles, in row order
    sets = [x for x, good in zip(held_sets, keep.tolist(), strict=True) if good]
    rows = np.flatnonzero(held & ok) + first
    return {"keys": rkeys, "docs": docs, "sets": dict(zip(rows.tolist(), sets, strict=True))}


def recall_docs(cfg: DedupConfig, n: int) -> int:
    """The recall sample's size: recall_sample_docs, at most recall_max_share of the n
    documents (its all-pairs work grows with that share; at 0.05 the measurement costs under
    5% of the stage, benchmarks/bench_dedup_measure.py)."""
    return min(cfg.recall_sample_docs, int(n * cfg.recall_max_share)) if cfg.near else 0


def _key_bound(k: int, n: int) -> int:
    """A sample_keys bound under which k + 4 sqrt(k) + 16 of n uniform keys fall on average
    (4 standard deviations above k): the recall sample's k smallest keys lie under it unless
    documents without shingles are common; map 2 shingles the few then missing."""
    share = (k + 4 * k**0.5 + 16) / max(n, 1)
    return (1 << 64) - 1 if share >= 1 else int(share * (1 << 64))


def _sketch(
    cfg: DedupConfig, ctx: StageContext, seed: int
) -> tuple[reduce.Plan, int, list[dict[str, Any]]]:
    """Map 1 over parts; returns the plan, the number of documents without shingles and the
    parts' recall draws (empty without the measurement)."""
    counts = [pq.ParquetFile(p).metadata.num_rows for p in ctx.input_parts]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    bits = exact.bucket_bits(int(offsets[-1]), EXACT_BUCKET_DOCS)
    plan = reduce.Plan(ctx.out_dir / SKETCH_DIR, list(ctx.input_parts), offsets, seed, bits)
    plan.work.mkdir(parents=True, exist_ok=True)
    k = recall_docs(cfg, plan.n)
    tau = _key_bound(k, plan.n) if k else 0
    fn = functools.partial(
        _sketch_part, cfg=cfg, seed=seed, work_dir=str(plan.work), bits=bits, tau=tau, recall_k=k
    )
    items = [SketchPart(i, p, int(offsets[i])) for i, p in enumerate(plan.parts)]
    results = ctx.executor.map(fn, items, desc="dedup: hash")
    for i, res in enumerate(results):
        if res["num_docs"] != counts[i]:
            raise DataError(str(plan.parts[i]), "row count changed while reading")
    draws = [{**r["recall"], "seconds": r["measure_cpu_seconds"]} for r in results if "recall" in r]
    return plan, sum(r["num_empty"] for r in results), draws


# ---------------------------------------------------------------- map 2: write


def _part_decisions(
    work: str, index: int, lo: int, hi: int, num_buckets: int, ranges: int
) -> tuple[np.ndarray, np.ndarray]:
    """Part `index`'s decision uint8 [n] and cluster int64 [n] (-1: in none) from its slices of
    the work files: exact copies (`dup`), their labels (`labels-b`), near components (`cc-i`)
    and their kept members (`win-q`)."""
    decision = np.full(hi - lo, cl.KEEP, np.uint8)
    cluster = np.full(hi - lo, -1, np.int64)
    dup = files.load_or_none(work, "dup", index)
    if dup is not None:
        decision[np.asarray(dup)] = cl.EXACT_DUP
    for b in range(num_buckets):
        doc, label, _ = files.range_rows(files.load(work, "labels", b), lo, hi)
        cluster[doc - lo] = label
    if ranges:
        node, label = np.array(files.load(work, "cc", index))
        cluster[node - lo] = label
        winners = [files.range_rows(files.load(work, "win", q), lo, hi)[0] for q in range(ranges)]
        lost = np.setdiff1d(node, np.concatenate(winners), assume_unique=True)
        decision[lost - lo] = cl.NEAR_DUP
    return decision, cluster


def _apply_part(
    item: PartRows,
    work_dir: str,
    out_dir: Path,
    num_buckets: int,
    ranges: int,
    shown: np.ndarray,
    want: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Map 2: write part `index`'s kept and rejected rows; return its counts, its rows among
    the example documents `shown` (sorted global indices) and what `want` asks to measure."""
    index, path, lo, hi = item.index, item.path, item.lo, item.hi
    decision, cluster = _part_decisions(work_dir, index, lo, hi, num_buckets, ranges)
    table = read_table(path)
    payload = measure_payload(table, lo, decision, cluster, want) if want else None
    for col in ("cluster", "reasons"):  # a re-run on dedup output: ours replace the old ones
        if col in table.column_names:
            table = table.drop_columns([col])
    keep = decision == cl.KEEP
    kept = table.filter(pa.array(keep)).append_column(
        "cluster", pa.array(cluster[keep], pa.int64())
    )
    reasons = [[REASONS[int(d)]] for d in decision[~keep]]
    outputs, counts = write_kept_and_rejected(
        out_dir, index, table, keep, reasons, kept, cluster=pa.array(cluster[~keep], pa.int64())
    )
    counts.dropped = {"exact_dup": 0, "near_dup": 0, **counts.dropped}  # both reported, even 0
    show = (shown[(shown >= lo) & (shown < hi)] - lo).tolist()
    rows = []
    if show:
        sub = table.take(pa.array(show, pa.int64())).select(["id", "text"]).to_pylist()
        for r, rec in zip(show, sub, strict=True):
            rows.append(
                {
                    "index": lo + r,
                    "cluster": int(cluster[r]),
                    "id": rec["id"],
                    "reason": REASONS.get(int(decision[r]), "kept"),
                    "text": rec["text"][:EXAMPLE_CHARS],
                }
            )
    return {"outputs": outputs, "counts": counts, "examples": rows, "measure": payload}


def _draw(
    cfg: DedupConfig, plan: reduce.Plan, recall: list[dict], merges: list[dict]
) -> dict[str, Any]:
    """The seeded samples from the maps' draws: near-dropped documents with their clusters
    (precision, drawn by the near-cluster tasks) and documents (recall, drawn by map 1), and
    the recall documents' shingle sets that map 1 saved."""
    cat = {
        key: np.concatenate([np.zeros(0, np.int64)] + [g[key] for g in merges])
        for key in ("dropped", "clusters")
    }
    mkeys = np.concatenate([np.zeros(0, np.uint64)] + [g["keys"] for g in merges])
    _, dropped, clusters = measure.bottom_k(
        mkeys, cfg.precision_sample_pairs, cat["dropped"], cat["clusters"]
    )
    rkeys = np.concatenate([np.zeros(0, np.uint64)] + [g["keys"] for g in recall])
    rdocs = np.concatenate([np.zeros(0, np.int64)] + [g["docs"] for g in recall])
    _, docs = measure.bottom_k(rkeys, recall_docs(cfg, plan.n), rdocs)
    held = {r: x for g in recall for r, x in g["sets"].items()}
    sets = {r: held[r] for r in docs.tolist() if r in held}
    missing = np.array(sorted(set(docs.tolist()) - sets.keys()), np.int64)
    return {
        "dropped": dropped,
        "dropped_clusters": clusters,
        "docs": docs,
        "sets": sets,  # recall documents' shingle sets from map 1
        "rows": np.union1d(dropped, missing),  # documents map 2 still shingles
        "clusters": np.unique(clusters),
        "ngram": cfg.ngram,
        "seed": plan.seed,
    }


def run(cfg: DedupConfig, ctx: StageContext) -> StageResult:
    if not ctx.input_parts:
        raise DataError(str(ctx.run_dir), "dedup needs an upstream stage with document parts")
    seed = ctx.seed if cfg.seed is None else cfg.seed
    measuring = cfg.near and bool(cfg.precision_sample_pairs or cfg.recall_sample_docs)
    plan, num_empty, recall = _sketch(cfg, ctx, seed)
    n = plan.n
    stats: dict[str, Any] = {**setting(cfg, "exact", "exact_method"), **setting(cfg, "near")}
    exact_stats, bloom_bytes = reduce.exact_copies(cfg, ctx, plan)
    stats.update(exact_stats)
    if "bloom_fp_target" in exact_stats:  # the core echoes the rate it was given
        stats["bloom_fp_target_key"] = recipe_key(cfg, "bloom_fp_rate")
    ranges = 0
    if cfg.near:
        for name in ("threshold", "num_perm", "ngram"):
            stats.update(setting(cfg, name))
        stats.update(setting(cfg, "seed", "minhash_seed", value=seed))
        stats.update(reduce.near_pairs(cfg, ctx, plan, num_empty))
        ranges = reduce.components(ctx, plan, stats["verified_pairs"])
    hist, num, docs, top_ids, top_sizes, shown, merges = reduce.clusters(
        cfg, ctx, plan, ranges, EXAMPLE_DOCS, cfg.precision_sample_pairs if measuring else 0
    )
    num_buckets = (1 << plan.bits) if cfg.exact == "hash_set" else 0
    t_measure, want = time.process_time(), None
    if measuring:
        want = _draw(cfg, plan, recall, merges)
    t_measure = time.process_time() - t_measure + sum(g["seconds"] for g in recall + merges)
    fn = functools.partial(
        _apply_part,
        work_dir=str(plan.work),
        out_dir=ctx.out_dir,
        num_buckets=num_buckets,
        ranges=ranges,
        shown=shown,
        want=None if want is None else {k: v for k, v in want.items() if k != "sets"},
    )
    results = ctx.executor.map(fn, plan.part_rows, desc="dedup: write")
    shutil.rmtree(plan.work, ignore_errors=True)  # work files: not stage outputs
    if want is not None:
        t0 = time.process_time()
        stats.update(measured_stats(cfg, want, results))
        t_measure += time.process_time() - t0 + sum(r["measure"]["seconds"] for r in results)
        stats["measure_cpu_seconds"] = round(t_measure, 3)
        log_measured(ctx, stats)
    stats.update(setting(cfg, "keep", "keep_in_cluster"))
    stats.update(
        cl.summary_stats(
            hist, num, docs, top_ids, top_sizes, [e for r in results for e in r["examples"]]
        )
    )
    # driver: a few numbers per task (parts, buckets, node ranges) and the Bloom filter
    groups = (1 << plan.bits) * (1 + (cfg.bands_rows()[0] if cfg.near else 0))  # keys, bands
    held = PART_BYTES * (len(plan.parts) + groups + ranges) + bloom_bytes
    stats["state_bytes_per_doc_peak"] = round(held / max(n, 1), 1)
    stats["state_bytes_per_doc_budget"] = round(STATE_BUDGET + held / max(n, 1), 1)
    outputs = [o for r in results for o in r["outputs"]]
    return StageResult(outputs=outputs, stats=stats, counts=[r["counts"] for r in results])


STAGE = Stage("dedup", DedupConfig, run, version="2", needs=("download",))
