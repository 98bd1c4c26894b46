"""dedup: drop exact duplicates (xxh3-128 of whitespace-normalised text, hash set or Bloom filter)
and near duplicates (MinHash of word n-grams, LSH bands, verified Jaccard, union-find clusters).

Map over parts to compact arrays (hash keys, lengths) gathered into a DedupState, and signature
files (one per part, in the stage's temp folder, band-major so a band is one contiguous read);
one task per LSH band reads its band from every part's file and returns its edges, so
signatures never reach the driver; the driver reduces edges and keys once, then a second map
writes kept and rejected parts. The algorithms live in pipeline.dedup; this module is the shell.
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
from pipeline.dedup import exact
from pipeline.dedup.lsh import (
    band_file_task,
    candidate_signatures,
    optimal_bands,
    s_curve,
    sig_name,
)
from pipeline.dedup.minhash import exact_jaccard, minhash_texts, shingle_sets
from pipeline.dedup.unionfind import components
from pipeline.errors import DataError, RecipeError
from pipeline.io import read_table, save_npy, write_kept_and_rejected
from pipeline.stage import Stage, StageContext, StageResult

REASONS = {cl.EXACT_DUP: "exact_dup", cl.NEAR_DUP: "near_dup"}
CURVE_POINTS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
EXAMPLE_DOCS = 5  # documents shown per example cluster
EXAMPLE_CHARS = 100
BATCH_CHARS = 1 << 19  # characters hashed per numpy batch at most (besides batch_docs)
SKETCH_DIR = ".sketch"  # per-part signature files inside the stage's temp folder
# driver bytes per document at most: keys 16 + score 4 + flags 3 + the exact sort's 41
# (order 8, sorted column 8, flags 1, first 8, result 8, run ids 8), whatever num_perm is
STATE_BUDGET = 64


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


# ---------------------------------------------------------------- map 1: per-part arrays


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
    item: tuple[int, Path], cfg: DedupConfig, seed: int, sketch_dir: str
) -> dict[str, Any]:
    """Read one part; return its small per-document arrays and write its MinHash signatures,
    transposed (uint32 [num_perm, n]: a band's rows are contiguous), to `sketch_dir`. No text
    and no signature leaves this function."""
    index, path = item
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
    out: dict[str, Any] = {"num_docs": len(texts)}
    if cfg.keep == "longest":
        out["length"] = np.fromiter(map(len, texts), np.int32, len(texts))
    if cfg.keep == "quality":
        q = table.column("quality").to_numpy(zero_copy_only=False).astype(np.float32)
        out["quality"] = np.where(np.isnan(q), -np.inf, q).astype(np.float32)
    if cfg.exact != "off":
        out["keys"] = exact.exact_keys(texts)
    if cfg.near:
        sigs = [
            minhash_texts(texts[lo:hi], cfg.num_perm, cfg.ngram, seed)
            for lo, hi in _batches(texts, cfg.batch_docs)
        ]
        sig = np.concatenate(sigs) if sigs else np.zeros((0, cfg.num_perm), np.uint32)
        out["empty"] = cl.no_shingles(sig)
        save_npy(Path(sketch_dir) / sig_name(index), np.ascontiguousarray(sig.T))
    return out


ARRAYS = ("length", "quality", "keys", "empty")  # DedupState's per-document arrays


@dataclass
class DedupState:
    """Per-document arrays of every part in input order (global index = position), the only
    thing the reduce step sees. Absent arrays are None (the config does not need them)."""

    seed: int  # MinHash and LSH seed
    offsets: np.ndarray  # int64 [num_parts + 1]: global row range of each part
    length: np.ndarray | None = None  # int32 [n] characters (keep: longest)
    quality: np.ndarray | None = None  # float32 [n] score, NaN -> -inf (keep: quality)
    keys: np.ndarray | None = None  # uint64 [n, 2] exact keys (exact != off)
    empty: np.ndarray | None = None  # bool [n] no shingle, never a near-dup (near)
    sketch_dir: Path | None = None  # the parts' signature files (near), in the stage temp folder

    @property
    def n(self) -> int:
        return int(self.offsets[-1])

    def array_bytes(self) -> int:
        return sum(a.nbytes for a in (getattr(self, k) for k in ARRAYS) if a is not None)


def _gather(cfg: DedupConfig, ctx: StageContext, seed: int) -> DedupState:
    """Run map 1 in waves of `workers` parts, copying into preallocated global arrays."""
    counts = [pq.ParquetFile(p).metadata.num_rows for p in ctx.input_parts]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n = int(offsets[-1])
    state = DedupState(seed, offsets)
    if cfg.keep == "longest":
        state.length = np.zeros(n, np.int32)
    if cfg.keep == "quality":
        state.quality = np.zeros(n, np.float32)
    if cfg.exact != "off":
        state.keys = np.zeros((n, 2), np.uint64)
    if cfg.near:
        state.empty = np.zeros(n, bool)
    state.sketch_dir = ctx.out_dir / SKETCH_DIR
    state.sketch_dir.mkdir(parents=True, exist_ok=True)
    fn = functools.partial(_sketch_part, cfg=cfg, seed=seed, sketch_dir=str(state.sketch_dir))
    items = list(enumerate(ctx.input_parts))
    wave = max(1, 2 * ctx.executor.workers)  # results held at once: keys of `wave` parts
    for w in range(0, len(items), wave):
        results = ctx.executor.map(fn, items[w : w + wave], desc="dedup: hash")
        for i, res in enumerate(results, start=w):
            lo, hi = offsets[i], offsets[i + 1]
            if res["num_docs"] != hi - lo:
                raise DataError(str(ctx.input_parts[i]), "row count changed while reading")
            for key in ARRAYS:
                if getattr(state, key) is not None:
                    getattr(state, key)[lo:hi] = res[key]
    return state


# ---------------------------------------------------------------- reduce


def _exact(cfg: DedupConfig, state: DedupState) -> exact.ExactDuplicates:
    """Exact copies; the keys are dropped from the state once decided."""
    if cfg.exact == "off":
        return exact.ExactDuplicates(np.zeros(state.n, bool), np.zeros((0, 2), np.int64))
    keys, state.keys = state.keys, None
    if cfg.exact == "hash_set":
        return exact.hash_set(keys)
    return exact.bloom(keys, state.offsets, cfg.bloom_fp_rate, cfg.bloom_expected_docs)


@dataclass
class _NearDuplicates:
    edges: np.ndarray  # int64 [E, 2]: verified near-duplicate pairs (global indices)
    stats: dict[str, Any]
    peak_bytes: int  # estimated peak of this pass, arrays included


def _near(
    cfg: DedupConfig, ctx: StageContext, state: DedupState, is_exact: np.ndarray
) -> _NearDuplicates:
    """Verified near-duplicate edges via one task per LSH band over the signature files."""
    n, empty, sketch = state.n, state.empty, state.sketch_dir
    bands, rows = cfg.bands_rows()
    stats: dict[str, Any] = {
        **setting(cfg, "bands", value=bands),
        **setting(cfg, "rows", value=rows),
        "s_curve": {f"{s:g}": round(float(s_curve(s, bands, rows)), 4) for s in CURVE_POINTS},
        "docs_without_shingles": int(empty.sum()),
    }
    eligible = ~is_exact & ~empty  # no shingle: never a near-dup
    save_npy(sketch / "eligible.npy", eligible)
    mult = np.random.default_rng([state.seed, 0x6C7368]).integers(
        0, 2**64, size=rows, dtype=np.uint64
    ) | np.uint64(1)
    fn = functools.partial(
        band_file_task, sketch_dir=str(sketch), num_parts=len(ctx.input_parts), rows=rows, mult=mult
    )
    edge_lists = ctx.executor.map(fn, list(range(bands)), desc="dedup: bands")
    pairs = cl.unique_pairs(edge_lists, n)
    del edge_lists
    if cfg.verify == "exact":
        sets = _candidate_sets(cfg, ctx, state, np.unique(pairs))
        ok = exact_jaccard(sets, pairs) >= cfg.threshold - 1e-12
    else:
        docs = np.unique(pairs)
        sig = candidate_signatures(sketch, state.offsets, docs)
        ok = cl.verify(sig, np.searchsorted(docs, pairs), cfg.threshold)
    stats.update(setting(cfg, "verify"))
    stats.update(
        {
            "candidate_pairs": len(pairs),
            "verified_pairs": int(ok.sum()),
            "band_task_docs": int(eligible.sum()),
        }
    )
    # driver: exact flags + eligible + empty (3 B) besides the held keys/scores; the candidate
    # index the band tasks need lives in a file; pairs are O(candidates), not per document
    base = (
        16 * (cfg.exact == "hash_set")
        + 4 * (state.length is not None or state.quality is not None)
        + 3
    )
    return _NearDuplicates(pairs[ok], stats, n * base + 16 * len(pairs))


def _sets_part(item: tuple[Path, np.ndarray], ngram: int, seed: int) -> list[np.ndarray]:
    path, rows = item
    texts = read_table(path, columns=["text"]).column("text").take(pa.array(rows)).to_pylist()
    return [s for lo, hi in _batches(texts, 250) for s in shingle_sets(texts[lo:hi], ngram, seed)]


def _candidate_sets(
    cfg: DedupConfig, ctx: StageContext, state: DedupState, docs: np.ndarray
) -> dict[int, np.ndarray]:
    """Shingle sets of the documents in candidate pairs only (re-read from their parts)."""
    offsets = state.offsets
    part_of = np.searchsorted(offsets, docs, side="right") - 1
    items, owners = [], []
    for i in np.unique(part_of).tolist():
        mine = docs[part_of == i]
        items.append((ctx.input_parts[i], mine - offsets[i]))
        owners.append(mine)
    fn = functools.partial(_sets_part, ngram=cfg.ngram, seed=state.seed)
    sets = {}
    for mine, res in zip(owners, ctx.executor.map(fn, items, desc="dedup: verify"), strict=True):
        sets.update(zip(mine.tolist(), res, strict=True))
    return sets


# ---------------------------------------------------------------- map 2: write


def _apply_part(
    item: tuple[int, Path, np.ndarray, np.ndarray, np.ndarray, int], out_dir: Path
) -> dict[str, Any]:
    index, path, decision, cluster, show, offset = item
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
    examples = []
    if show.any():
        rows = np.flatnonzero(show)
        sub = table.take(pa.array(rows)).select(["id", "text"]).to_pylist()
        for r, rec in zip(rows.tolist(), sub, strict=True):
            examples.append(
                {
                    "index": offset + r,
                    "cluster": int(cluster[r]),
                    "id": rec["id"],
                    "reason": REASONS.get(int(decision[r]), "kept"),
                    "text": rec["text"][:EXAMPLE_CHARS],
                }
            )
    return {"outputs": outputs, "counts": counts, "examples": examples}


def _write(
    ctx: StageContext,
    offsets: np.ndarray,
    decision: np.ndarray,
    cluster: np.ndarray,
    show: np.ndarray,
) -> list[dict[str, Any]]:
    """Map 2: each part gets its slice of the global decision and writes kept/rejected parts."""
    items = [
        (
            i,
            p,
            decision[offsets[i] : offsets[i + 1]],
            cluster[offsets[i] : offsets[i + 1]],
            show[offsets[i] : offsets[i + 1]],
            int(offsets[i]),
        )
        for i, p in enumerate(ctx.input_parts)
    ]
    fn = functools.partial(_apply_part, out_dir=ctx.out_dir)
    return ctx.executor.map(fn, items, desc="dedup: write")


def run(cfg: DedupConfig, ctx: StageContext) -> StageResult:
    if not ctx.input_parts:
        raise DataError(str(ctx.run_dir), "dedup needs an upstream stage with document parts")
    seed = ctx.seed if cfg.seed is None else cfg.seed
    state = _gather(cfg, ctx, seed)
    n, peak = state.n, state.array_bytes()
    stats: dict[str, Any] = {**setting(cfg, "exact", "exact_method"), **setting(cfg, "near")}
    ex = _exact(cfg, state)
    stats.update(ex.stats)
    if "bloom_fp_target" in ex.stats:  # the core echoes the rate it was given
        stats["bloom_fp_target_key"] = recipe_key(cfg, "bloom_fp_rate")
    peak += ex.extra_bytes  # sort temporaries or the Bloom filter, beside the keys
    edges, pairs = ex.edges, 0
    if cfg.near:
        for name in ("threshold", "num_perm", "ngram"):
            stats.update(setting(cfg, name))
        stats.update(setting(cfg, "seed", "minhash_seed", value=seed))
        near = _near(cfg, ctx, state, ex.dup)
        stats.update(near.stats)
        peak = max(peak, near.peak_bytes)
        edges = np.concatenate([edges, near.edges])
        pairs = near.stats["candidate_pairs"]
    shutil.rmtree(state.sketch_dir, ignore_errors=True)  # temp signatures: not stage outputs
    labels = components(n, edges)
    score = state.length if state.length is not None else state.quality
    decision = cl.choose_keepers(labels, ex.dup, score)
    in_cluster = np.bincount(labels, minlength=n)[labels] > 1
    cluster = np.where(in_cluster, labels, -1)  # bloom exact dups have no known first copy
    hist, ids, sizes = cl.size_histogram(labels)
    show = cl.example_members(labels, decision, ids, sizes, cfg.num_examples, EXAMPLE_DOCS)
    results = _write(ctx, state.offsets, decision, cluster, show)
    stats.update(setting(cfg, "keep", "keep_in_cluster"))
    stats.update(cl.cluster_stats(hist, ids, sizes, [e for r in results for e in r["examples"]]))
    stats["state_bytes_per_doc_peak"] = round(peak / max(n, 1), 1)
    # + 16 B per candidate pair (held while verifying): O(duplicates), not per document
    stats["state_bytes_per_doc_budget"] = round(STATE_BUDGET + 16 * pairs / max(n, 1), 1)
    outputs = [o for r in results for o in r["outputs"]]
    return StageResult(outputs=outputs, stats=stats, counts=[r["counts"] for r in results])


STAGE = Stage("dedup", DedupConfig, run, version="1", needs=("download",))
