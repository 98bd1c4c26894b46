"""dedup: drop exact duplicates (xxh3-128 of whitespace-normalised text, hash set or Bloom filter)
and near duplicates (MinHash of word n-grams, LSH bands, verified Jaccard, connected components).

Every per-document array lives in files in the stage's temp folder (`pipeline.dedup.files`),
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import SEED_LIMIT, bounded, recipe_key, setting
from pipeline.dedup import cluster as cl
from pipeline.dedup import exact, files
from pipeline.dedup.bloom import BloomFilter, bloom_size
from pipeline.dedup.lsh import band_file_task, optimal_bands, s_curve, sig_name
from pipeline.dedup.minhash import minhash_texts
from pipeline.dedup.partitioned import copy_flags_task, exact_bucket_task, resolve_task
from pipeline.dedup.unionfind import edge_components
from pipeline.dedup.verify import candidate_sets_task, verify_task
from pipeline.errors import DataError, RecipeError
from pipeline.io import read_table, save_npy, write_kept_and_rejected
from pipeline.stage import Stage, StageContext, StageResult

REASONS = {cl.EXACT_DUP: "exact_dup", cl.NEAR_DUP: "near_dup"}
CURVE_POINTS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
EXAMPLE_DOCS = 5  # documents shown per example cluster
EXAMPLE_CHARS = 100
BATCH_CHARS = 1 << 19  # characters hashed per numpy batch at most (besides batch_docs)
SKETCH_DIR = ".sketch"  # the stage's work files (signatures, keys, pairs...) in its temp folder
EXACT_BUCKET_DOCS = 1 << 21  # keys per exact-dup bucket task: ~50 MB of keys + its sort
# Driver bytes: no term per input document. Per document in a verified near-duplicate pair
# (nodes, labels, parents, scores, sort order of the components) and per verified pair (the
# edges, their compact ids, the hooking temporaries), plus a few int64 per part; `exact:
# bloom` adds its filter (bloom_expected_docs x bits per key: the user's trade-off).
NODE_BYTES = 64
EDGE_BYTES = 56
PART_BYTES = 64


@dataclass(frozen=True)
class DedupConfig:
    exact: Literal["hash_set", "bloom", "off"] = "hash_set"  # exact-dup index; off = skip exact
    bloom_fp_rate: float = bounded(1e-6, gt=0.0, lt=1.0)  # bloom: target false-positive rate
    bloom_expected_docs: int | None = bounded(None, ge=1)  # bloom: n for sizing; None = input docs
    near: bool = True  # MinHash LSH near-duplicate removal on/off
    threshold: float = bounded(0.8, gt=0.0, le=1.0)  # Jaccard of shingle sets to call near-dup
    num_perm: int = bounded(128, ge=8, le=1024)  # MinHash permutations (4 bytes each per doc)
    ngram: int = bounded(5, ge=1, le=32)  # words per shingle, on the simplified text
    bands: int | None = bounded(None, ge=1)  # LSH bands; None = optimal for threshold
    rows: int | None = bounded(None, ge=1)  # signature values per band; set together with bands
    fn_weight: float = bounded(0.9, ge=0.0, le=1.0)  # weight of missed pairs vs false candidates
    verify: Literal["exact", "estimate"] = "exact"  # candidate check: shingle sets or signatures
    keep: Literal["first", "longest", "quality"] = "first"  # cluster member that survives
    seed: int | None = bounded(None, ge=0, lt=SEED_LIMIT)  # MinHash seed; None: the stage's
    batch_docs: int = bounded(250, ge=1)  # documents per numpy batch: temporaries stay cache-sized
    num_examples: int = bounded(5, ge=0)  # example clusters shown in the report

    def validate(self, path: str) -> None:
        if (self.bands is None) != (self.rows is None):
            raise RecipeError(
                f"{path}.bands",
                "set bands and rows together, or neither "
                f"(got bands={self.bands}, rows={self.rows})",
            )
        if self.bands is not None and self.bands * (self.rows or 0) > self.num_perm:
            raise RecipeError(
                f"{path}.bands",
                f"bands*rows must be <= num_perm {self.num_perm}, got {self.bands}*{self.rows}",
            )
        if self.exact == "off" and not self.near:
            raise RecipeError(f"{path}.near", "exact is off and near is false: nothing to do")

    def bands_rows(self) -> tuple[int, int]:
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        return optimal_bands(self.threshold, self.num_perm, self.fn_weight)


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


def _sketch_part(
    item: tuple[int, Path, int], cfg: DedupConfig, seed: int, work_dir: str, bits: int
) -> dict[str, Any]:
    """Read one part (global rows from `first`); write its per-document arrays to `work_dir`:
    `score` (keep: longest | quality), exact keys (`keys` by bucket + `keybounds`, or in row
    order for bloom), `empty` (no shingle) and its MinHash signatures, transposed (uint32
    [num_perm, n]: a band's rows are contiguous). Returns counts: nothing per document."""
    index, path, first = item
    columns = ["text"] + (["quality"] if cfg.keep == "quality" else [])
    names = pq.ParquetFile(path).schema_arrow.names
    for col in columns:
        if col not in names:
            hint = " (keep: quality needs an input `quality` column)" if col == "quality" else ""
            raise DataError(str(path), f"column '{col}' is missing{hint}; columns: {names}")
    table = read_table(path, columns=columns)
    if table.column("text").null_count:
        raise DataError(str(path), f"{table.column('text').null_count} rows have a null text")
    texts = table.column("text").to_pylist()
    out: dict[str, Any] = {"num_docs": len(texts), "num_empty": 0}
    if cfg.keep == "longest":
        files.save(work_dir, "score", index, np.fromiter(map(len, texts), np.int32, len(texts)))
    if cfg.keep == "quality":
        q = table.column("quality").to_numpy(zero_copy_only=False).astype(np.float32)
        files.save(work_dir, "score", index, np.where(np.isnan(q), -np.inf, q).astype(np.float32))
    if cfg.exact == "hash_set":
        rows, bounds = exact.bucket_rows(exact.exact_keys(texts), first, bits)
        files.save(work_dir, "keys", index, rows)
        files.save(work_dir, "keybounds", index, bounds)
    elif cfg.exact == "bloom":
        files.save(work_dir, "keys", index, exact.exact_keys(texts))
    if cfg.near:
        sigs = [
            minhash_texts(texts[lo:hi], cfg.num_perm, cfg.ngram, seed)
            for lo, hi in _batches(texts, cfg.batch_docs)
        ]
        sig = np.concatenate(sigs) if sigs else np.zeros((0, cfg.num_perm), np.uint32)
        empty = cl.no_shingles(sig)
        files.save(work_dir, "empty", index, empty)
        out["num_empty"] = int(empty.sum())
        save_npy(Path(work_dir) / sig_name(index), np.ascontiguousarray(sig.T))
    return out


@dataclass
class _Plan:
    """What every step of the reduce needs: per part, never per document."""

    work: Path  # the work files, in the stage's temp folder
    parts: list[Path]
    offsets: np.ndarray  # int64 [num_parts + 1]: global row range of each part
    seed: int  # MinHash and LSH seed
    bits: int  # exact buckets: 2^bits (hash_set)

    @property
    def n(self) -> int:
        return int(self.offsets[-1])

    @property
    def ranges(self) -> list[tuple[int, int, int]]:
        """(part, first row, end row) of every part."""
        o = self.offsets.tolist()
        return [(i, o[i], o[i + 1]) for i in range(len(self.parts))]


def _sketch(cfg: DedupConfig, ctx: StageContext, seed: int) -> tuple[_Plan, int]:
    """Map 1 over parts; returns the plan and the number of documents without shingles."""
    counts = [pq.ParquetFile(p).metadata.num_rows for p in ctx.input_parts]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    bits = exact.bucket_bits(int(offsets[-1]), EXACT_BUCKET_DOCS)
    plan = _Plan(ctx.out_dir / SKETCH_DIR, list(ctx.input_parts), offsets, seed, bits)
    plan.work.mkdir(parents=True, exist_ok=True)
    fn = functools.partial(_sketch_part, cfg=cfg, seed=seed, work_dir=str(plan.work), bits=bits)
    items = [(i, p, int(offsets[i])) for i, p in enumerate(plan.parts)]
    results = ctx.executor.map(fn, items, desc="dedup: hash")
    for i, res in enumerate(results):
        if res["num_docs"] != counts[i]:
            raise DataError(str(plan.parts[i]), "row count changed while reading")
    return plan, sum(r["num_empty"] for r in results)


# ---------------------------------------------------------------- reduce, in tasks


def _exact(cfg: DedupConfig, ctx: StageContext, plan: _Plan) -> tuple[dict[str, Any], int]:
    """Per-part `dup` files (exact copies); returns stats and the driver bytes held (bloom)."""
    if cfg.exact == "hash_set":
        work, num_parts = str(plan.work), len(plan.parts)
        fn = functools.partial(exact_bucket_task, work_dir=work, num_parts=num_parts)
        ctx.executor.map(fn, list(range(1 << plan.bits)), desc="dedup: exact")
        fn = functools.partial(copy_flags_task, work_dir=work, num_buckets=1 << plan.bits)
        ctx.executor.map(fn, plan.ranges, desc="dedup: flags")
        return {"exact_hash": exact.KEY_DESCRIPTION}, 0
    if cfg.exact == "off":
        return {}, 0
    # bloom: first-seen order is sequential by nature; the filter is the only big thing held
    bf = BloomFilter(*bloom_size(cfg.bloom_expected_docs or max(1, plan.n), cfg.bloom_fp_rate))
    for i, _, _ in plan.ranges:
        files.save(plan.work, "dup", i, bf.add_new(np.array(files.load(plan.work, "keys", i))))
    return exact.bloom_stats(bf, cfg.bloom_fp_rate), bf.words.nbytes


def _near(cfg: DedupConfig, ctx: StageContext, plan: _Plan, num_empty: int) -> dict[str, Any]:
    """Band tasks write candidate pairs, per-part tasks verify them into `near-i` files."""
    bands, rows = cfg.bands_rows()
    stats: dict[str, Any] = {
        **setting(cfg, "bands", value=bands),
        **setting(cfg, "rows", value=rows),
        "s_curve": {f"{s:g}": round(float(s_curve(s, bands, rows)), 4) for s in CURVE_POINTS},
        "docs_without_shingles": num_empty,
    }
    work = str(plan.work)
    mult = np.random.default_rng([plan.seed, 0x6C7368]).integers(
        0, 2**64, size=rows, dtype=np.uint64
    ) | np.uint64(1)
    fn = functools.partial(
        band_file_task, sketch_dir=work, num_parts=len(plan.parts), rows=rows, mult=mult
    )
    ctx.executor.map(fn, list(range(bands)), desc="dedup: bands")
    if cfg.verify == "exact":
        fn = functools.partial(
            candidate_sets_task, work_dir=work, bands=bands, ngram=cfg.ngram, seed=plan.seed
        )
        items = [(i, plan.parts[i], lo, hi) for i, lo, hi in plan.ranges]
        ctx.executor.map(fn, items, desc="dedup: shingles")
    fn = functools.partial(
        verify_task,
        work_dir=work,
        bands=bands,
        offsets=plan.offsets,
        threshold=cfg.threshold,
        method=cfg.verify,
    )
    results = ctx.executor.map(fn, plan.ranges, desc="dedup: verify")
    eligible = 0
    for i, _, _ in plan.ranges:  # one part's flags at a time
        ok = ~files.load(plan.work, "empty", i)
        dup = files.load_or_none(plan.work, "dup", i)
        eligible += int((ok & ~dup).sum() if dup is not None else ok.sum())
    stats.update(setting(cfg, "verify"))
    stats.update(
        {
            "candidate_pairs": sum(r["candidates"] for r in results),
            "verified_pairs": sum(r["verified"] for r in results),
            "band_task_docs": eligible,
        }
    )
    return stats


def _components(cfg: DedupConfig, plan: _Plan) -> tuple[np.ndarray, np.ndarray, int]:
    """Join the verified pairs into components over their documents only; write `nodes`
    int64 [3, m] (document, label = smallest member, 1 if kept). Returns the components'
    labels and sizes (near members only) and the driver bytes this held at its peak."""
    edges = np.concatenate(
        [np.zeros((2, 0), np.int64)]
        + [np.array(files.load(plan.work, "near", i)) for i, _, _ in plan.ranges],
        axis=1,
    )
    nodes, labels = edge_components(edges)
    num_edges, m = edges.shape[1], len(nodes)
    del edges
    if cfg.keep == "first":
        winner = nodes == labels  # the smallest member: the first seen
    else:  # the best score among the members (none is an exact copy), ties to the first seen
        score = np.zeros(m, np.float64)
        for i, lo, hi in plan.ranges:
            r0, r1 = np.searchsorted(nodes, [lo, hi])
            score[r0:r1] = np.asarray(files.load(plan.work, "score", i))[nodes[r0:r1] - lo]
        order = np.lexsort((nodes, -score, labels))
        head = np.ones(m, bool)
        head[1:] = labels[order][1:] != labels[order][:-1]
        winner = np.zeros(m, bool)
        winner[order[head]] = True
    files.save(plan.work, "nodes", None, np.stack([nodes, labels, winner.astype(np.int64)]))
    ids, sizes = np.unique(labels, return_counts=True)
    peak = max(EDGE_BYTES * num_edges + 32 * m, NODE_BYTES * m)
    return ids, sizes.astype(np.int64), peak


def _clusters(
    cfg: DedupConfig, ctx: StageContext, plan: _Plan, ids: np.ndarray, sizes: np.ndarray
) -> tuple[dict[str, int], int, int, np.ndarray, np.ndarray]:
    """Exact copies joined to their clusters (tasks per bucket); returns the size histogram,
    the numbers of clusters and of their documents, and the largest clusters (ids, sizes)."""
    top = max(cfg.num_examples, 1)
    counts = np.zeros(len(cl.SIZE_BUCKETS), np.int64)
    num, docs, top_ids, top_sizes = 0, 0, [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    if cfg.exact == "hash_set":
        fn = functools.partial(resolve_task, work_dir=str(plan.work), top=top)
        for r in ctx.executor.map(fn, list(range(1 << plan.bits)), desc="dedup: labels"):
            np.add.at(sizes, np.searchsorted(ids, r["near_labels"]), r["near_counts"])
            counts += r["size_counts"]
            num, docs = num + r["clusters"], docs + r["docs"]
            top_ids.append(r["top_ids"])
            top_sizes.append(r["top_sizes"])
    near_top = cl.top_clusters(ids, sizes, top)
    best = cl.top_clusters(
        np.concatenate([near_top[0], *top_ids]), np.concatenate([near_top[1], *top_sizes]), top
    )
    hist = cl.size_labels(counts + cl.size_counts(sizes))
    return hist, num + len(ids), docs + int(sizes.sum()), best[0], best[1]


# ---------------------------------------------------------------- map 2: write


def _part_decisions(
    work: str, index: int, lo: int, hi: int, num_buckets: int
) -> tuple[np.ndarray, np.ndarray]:
    """Part `index`'s decision uint8 [n] and cluster int64 [n] (-1: in none) from its slices of
    the work files: exact copies (`dup`), their labels (`labels-b`), near components (`nodes`)."""
    decision = np.full(hi - lo, cl.KEEP, np.uint8)
    cluster = np.full(hi - lo, -1, np.int64)
    dup = files.load_or_none(work, "dup", index)
    if dup is not None:
        decision[np.asarray(dup)] = cl.EXACT_DUP
    for b in range(num_buckets):
        doc, label, _ = files.range_rows(files.load(work, "labels", b), lo, hi)
        cluster[doc - lo] = label
    nodes = files.load_or_none(work, "nodes")
    if nodes is not None:
        doc, label, winner = files.range_rows(nodes, lo, hi)
        cluster[doc - lo] = label
        decision[doc[winner == 0] - lo] = cl.NEAR_DUP
    return decision, cluster


def _apply_part(
    item: tuple[int, Path, int, int],
    work_dir: str,
    out_dir: Path,
    num_buckets: int,
    examples: tuple[int, ...],
) -> dict[str, Any]:
    index, path, lo, hi = item
    decision, cluster = _part_decisions(work_dir, index, lo, hi, num_buckets)
    table = read_table(path)
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
    show = [
        r
        for c in examples
        for members in [np.flatnonzero(cluster == c)]
        for r in np.concatenate(
            [members[keep[members]], members[~keep[members]][: EXAMPLE_DOCS - 1]]
        ).tolist()
    ]
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
    return {"outputs": outputs, "counts": counts, "examples": rows}


def _example_rows(results: list[dict[str, Any]]) -> list[dict]:
    """Each example cluster's kept document and its first EXAMPLE_DOCS - 1 others (by index)
    among the candidates every part sent."""
    by: dict[int, list[dict]] = {}
    for row in (e for r in results for e in r["examples"]):
        by.setdefault(row["cluster"], []).append(row)
    out = []
    for rows in by.values():
        out += [r for r in rows if r["reason"] == "kept"]
        out += sorted((r for r in rows if r["reason"] != "kept"), key=lambda r: r["index"])[
            : EXAMPLE_DOCS - 1
        ]
    return out


def run(cfg: DedupConfig, ctx: StageContext) -> StageResult:
    if not ctx.input_parts:
        raise DataError(str(ctx.run_dir), "dedup needs an upstream stage with document parts")
    seed = ctx.seed if cfg.seed is None else cfg.seed
    plan, num_empty = _sketch(cfg, ctx, seed)
    n = plan.n
    stats: dict[str, Any] = {**setting(cfg, "exact", "exact_method"), **setting(cfg, "near")}
    exact_stats, bloom_bytes = _exact(cfg, ctx, plan)
    stats.update(exact_stats)
    if "bloom_fp_target" in exact_stats:  # the core echoes the rate it was given
        stats["bloom_fp_target_key"] = recipe_key(cfg, "bloom_fp_rate")
    ids, sizes, cc_bytes, nodes, pairs = np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0, 0
    if cfg.near:
        for name in ("threshold", "num_perm", "ngram"):
            stats.update(setting(cfg, name))
        stats.update(setting(cfg, "seed", "minhash_seed", value=seed))
        stats.update(_near(cfg, ctx, plan, num_empty))
        ids, sizes, cc_bytes = _components(cfg, plan)
        pairs, nodes = stats["verified_pairs"], int(sizes.sum())
    hist, num, docs, top_ids, top_sizes = _clusters(cfg, ctx, plan, ids, sizes)
    num_buckets = (1 << plan.bits) if cfg.exact == "hash_set" else 0
    fn = functools.partial(
        _apply_part,
        work_dir=str(plan.work),
        out_dir=ctx.out_dir,
        num_buckets=num_buckets,
        examples=tuple(top_ids[: cfg.num_examples].tolist()),
    )
    items = [(i, plan.parts[i], lo, hi) for i, lo, hi in plan.ranges]
    results = ctx.executor.map(fn, items, desc="dedup: write")
    shutil.rmtree(plan.work, ignore_errors=True)  # work files: not stage outputs
    stats.update(setting(cfg, "keep", "keep_in_cluster"))
    stats.update(cl.summary_stats(hist, num, docs, top_ids, top_sizes, _example_rows(results)))
    # driver: per-part numbers, the near components, the Bloom filter; nothing per document
    part_bytes = PART_BYTES * (len(plan.parts) + (1 << plan.bits))
    stats["state_bytes_per_doc_peak"] = round((part_bytes + bloom_bytes + cc_bytes) / max(n, 1), 1)
    budget = part_bytes + bloom_bytes + NODE_BYTES * nodes + EDGE_BYTES * pairs
    stats["state_bytes_per_doc_budget"] = round(budget / max(n, 1), 1)
    outputs = [o for r in results for o in r["outputs"]]
    return StageResult(outputs=outputs, stats=stats, counts=[r["counts"] for r in results])


STAGE = Stage("dedup", DedupConfig, run, version="1", needs=("download",))
