"""dedup: drop exact duplicates (xxh3-128 of whitespace-normalised text, hash set or Bloom filter)
and near duplicates (MinHash of word n-grams, LSH bands, verified Jaccard, union-find clusters).

Map over parts to compact arrays (hash keys, signatures, lengths), reduce once in this process
(band tasks give edges, only edges meet), then map again to write kept and rejected parts.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from pipeline.config import SEED_LIMIT, bounded
from pipeline.dedup import cluster as cl
from pipeline.dedup.bloom import BloomFilter, bloom_size
from pipeline.dedup.lsh import band_task, optimal_bands, s_curve
from pipeline.dedup.minhash import exact_jaccard, minhash_texts, shingle_sets
from pipeline.dedup.unionfind import components
from pipeline.errors import DataError, RecipeError
from pipeline.io import part_name, read_table, text_bytes, write_rejected, write_table
from pipeline.stage import Stage, StageContext, StageResult

REASONS = {cl.EXACT_DUP: "exact_dup", cl.NEAR_DUP: "near_dup"}
CURVE_POINTS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
EXAMPLE_DOCS = 5  # documents shown per example cluster
EXAMPLE_CHARS = 100
BATCH_CHARS = 1 << 19  # characters hashed per numpy batch at most (besides batch_docs)


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


def exact_keys(texts: list[str]) -> np.ndarray:
    """xxh3-128 of each text with whitespace runs collapsed and ends stripped: uint64 [n, 2]."""
    blob = b"".join(
        xxhash.xxh3_128_digest(" ".join(t.split()).encode("utf-8", "surrogatepass")) for t in texts
    )
    return np.frombuffer(blob, np.uint64).reshape(-1, 2).copy()


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


def _sketch_part(path: Path, cfg: DedupConfig, seed: int) -> dict[str, Any]:
    """Read one part; return its per-document arrays (no text leaves this function)."""
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
    out: dict[str, Any] = {"num_docs": len(texts), "bytes_in": text_bytes(texts)}
    if cfg.keep == "longest":
        out["length"] = np.fromiter(map(len, texts), np.int32, len(texts))
    if cfg.keep == "quality":
        q = table.column("quality").to_numpy(zero_copy_only=False).astype(np.float32)
        out["quality"] = np.where(np.isnan(q), -np.inf, q).astype(np.float32)
    if cfg.exact != "off":
        out["keys"] = exact_keys(texts)
    if cfg.near:
        sigs = [
            minhash_texts(texts[lo:hi], cfg.num_perm, cfg.ngram, seed)
            for lo, hi in _batches(texts, cfg.batch_docs)
        ]
        out["sig"] = np.concatenate(sigs) if sigs else np.zeros((0, cfg.num_perm), np.uint32)
    return out


def _gather(cfg: DedupConfig, ctx: StageContext, seed: int) -> dict[str, Any]:
    """Run map 1 in waves of `workers` parts, copying into preallocated global arrays."""
    counts = [pq.ParquetFile(p).metadata.num_rows for p in ctx.input_parts]
    n = int(sum(counts))
    g: dict[str, Any] = {
        "offsets": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        "bytes_in": 0,
        "n": n,
    }
    if cfg.keep == "longest":
        g["length"] = np.zeros(n, np.int32)
    if cfg.keep == "quality":
        g["quality"] = np.zeros(n, np.float32)
    if cfg.exact != "off":
        g["keys"] = np.zeros((n, 2), np.uint64)
    if cfg.near:
        g["sig"] = np.zeros((n, cfg.num_perm), np.uint32)
    fn = functools.partial(_sketch_part, cfg=cfg, seed=seed)
    wave = max(1, ctx.executor.workers)
    for w in range(0, len(ctx.input_parts), wave):
        results = ctx.executor.map(fn, ctx.input_parts[w : w + wave], desc="dedup: hash")
        for i, res in enumerate(results, start=w):
            lo, hi = g["offsets"][i], g["offsets"][i + 1]
            if res["num_docs"] != hi - lo:
                raise DataError(str(ctx.input_parts[i]), "row count changed while reading")
            g["bytes_in"] += res["bytes_in"]
            for key in ("length", "quality", "keys", "sig"):
                if key in g:
                    g[key][lo:hi] = res[key]
    return g


# ---------------------------------------------------------------- reduce


def _exact(
    cfg: DedupConfig, g: dict[str, Any], stats: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """(is exact dup bool [N], edges int64 [E, 2] dup -> first occurrence; none for bloom)."""
    n = g["n"]
    if cfg.exact == "off":
        return np.zeros(n, bool), np.zeros((0, 2), np.int64)
    keys = g.pop("keys")
    stats["exact_hash"] = "xxh3_128 of whitespace-normalised text"
    if cfg.exact == "hash_set":
        # sort temporaries: order 8 + sorted keys 16 + flags 1 + first 8 + result 8 bytes/doc
        g["peak_bytes"] = max(g["peak_bytes"], g["peak_bytes"] + 41 * n)
        first = cl.exact_first(keys)
        dup = first != np.arange(n)
        edges = np.stack([np.flatnonzero(dup), first[dup]], axis=1)
        return dup, edges
    expected = cfg.bloom_expected_docs or max(1, n)
    bits, k = bloom_size(expected, cfg.bloom_fp_rate)
    bloom = BloomFilter(bits, k)
    dup = np.zeros(n, bool)
    offsets = g["offsets"]
    for i in range(len(offsets) - 1):  # in part order: the first occurrence is kept
        lo, hi = offsets[i], offsets[i + 1]
        dup[lo:hi] = bloom.add_new(keys[lo:hi])
    g["peak_bytes"] += bloom.words.nbytes  # held beside signatures and keys during this pass
    stats.update(
        {
            "bloom_bits": bits,
            "bloom_bytes": bloom.words.nbytes,
            "bloom_hashes": k,
            "bloom_fp_target": cfg.bloom_fp_rate,
            "bloom_fp_expected": float(f"{bloom.fp_expected():.3g}"),
            "bloom_fp_estimate": float(f"{bloom.fp_estimate():.3g}"),
        }
    )
    return dup, np.zeros((0, 2), np.int64)


def _near(
    cfg: DedupConfig, ctx: StageContext, g: dict[str, Any], exact: np.ndarray, stats: dict[str, Any]
) -> np.ndarray:
    """Verified near-duplicate edges int64 [E, 2] (global indices) via LSH band tasks."""
    sig, n = g["sig"], g["n"]
    bands, rows = cfg.bands_rows()
    empty = cl.no_shingles(sig)  # no shingle: never a near-dup
    stats.update(
        {
            "bands": bands,
            "rows": rows,
            "s_curve": {f"{s:g}": round(float(s_curve(s, bands, rows)), 4) for s in CURVE_POINTS},
            "docs_without_shingles": int(empty.sum()),
        }
    )
    eligible = ~exact & ~empty
    cand = None if eligible.all() else np.flatnonzero(eligible).astype(np.int32)
    num_cand = n if cand is None else len(cand)
    mult = np.random.default_rng([g["seed"], 0x6C7368]).integers(
        0, 2**64, size=rows, dtype=np.uint64
    ) | np.uint64(1)
    group = min(2, max(1, ctx.executor.workers))  # bands in flight: 8 bytes/doc each
    edge_lists = []
    for keys in cl.band_key_groups(sig, cand, bands, rows, mult, group):
        for e in ctx.executor.map(band_task, keys, desc="dedup: bands"):
            edge_lists.append(e if cand is None else cand[e].astype(np.int64))
    pairs = cl.unique_pairs(edge_lists, n)
    if cfg.verify == "exact":
        sets = _candidate_sets(cfg, ctx, g, np.unique(pairs))
        ok = exact_jaccard(sets, pairs) >= cfg.threshold - 1e-12
    else:
        ok = cl.verify(sig, pairs, cfg.threshold)
    stats.update(
        {"verify": cfg.verify, "candidate_pairs": len(pairs), "verified_pairs": int(ok.sum())}
    )
    base = 4 * cfg.num_perm + 4 * ("length" in g or "quality" in g) + 1
    g["peak_bytes"] = max(g["peak_bytes"], n * base + num_cand * 4 + num_cand * (8 * group + 17))
    return pairs[ok]


def _sets_part(item: tuple[Path, np.ndarray], ngram: int, seed: int) -> list[np.ndarray]:
    path, rows = item
    texts = read_table(path, columns=["text"]).column("text").take(pa.array(rows)).to_pylist()
    return [s for lo, hi in _batches(texts, 250) for s in shingle_sets(texts[lo:hi], ngram, seed)]


def _candidate_sets(
    cfg: DedupConfig, ctx: StageContext, g: dict[str, Any], docs: np.ndarray
) -> dict[int, np.ndarray]:
    """Shingle sets of the documents in candidate pairs only (re-read from their parts)."""
    offsets = g["offsets"]
    part_of = np.searchsorted(offsets, docs, side="right") - 1
    items, owners = [], []
    for i in np.unique(part_of).tolist():
        mine = docs[part_of == i]
        items.append((ctx.input_parts[i], mine - offsets[i]))
        owners.append(mine)
    fn = functools.partial(_sets_part, ngram=cfg.ngram, seed=g["seed"])
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
    outputs = [part_name(index)]
    write_table(out_dir / outputs[0], kept)
    if not keep.all():
        reasons = [[REASONS[int(d)]] for d in decision[~keep]]
        rej = table.filter(pa.array(~keep))
        cluster_col = pa.array(cluster[~keep], pa.int64())
        outputs.append(write_rejected(out_dir, index, rej, reasons, cluster=cluster_col))
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
    return {
        "outputs": outputs,
        "bytes_out": text_bytes(kept.column("text").to_pylist()),
        "examples": examples,
    }


def _examples(
    labels: np.ndarray, decision: np.ndarray, ids: np.ndarray, sizes: np.ndarray, num: int
) -> np.ndarray:
    """bool [N]: members shown for the `num` largest clusters (the kept one + first others)."""
    show = np.zeros(len(labels), bool)
    for c in ids[np.lexsort((ids, -sizes))][:num].tolist():
        members = np.flatnonzero(labels == c)
        kept = members[decision[members] == cl.KEEP]
        show[np.concatenate([kept, members[decision[members] != cl.KEEP][: EXAMPLE_DOCS - 1]])] = 1
    return show


def _cluster_stats(
    labels: np.ndarray, decision: np.ndarray, rows: list[dict], stats: dict[str, Any]
) -> None:
    hist, ids, sizes = cl.size_histogram(labels)
    largest = int(np.argmax(sizes)) if len(sizes) else -1
    stats.update(
        {
            "clusters": len(ids),
            "docs_in_clusters": int(sizes.sum()),
            "cluster_size_histogram": hist,
            "largest_cluster_size": int(sizes[largest]) if len(sizes) else 0,
            "largest_cluster_id": int(ids[largest]) if len(sizes) else -1,
        }
    )
    groups: dict[int, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["reason"] != "kept", r["index"])):
        groups.setdefault(row.pop("cluster"), []).append(row)
    size_of = dict(zip(ids.tolist(), sizes.tolist(), strict=True))
    stats["example_clusters"] = [
        {
            "cluster": c,
            "size": size_of[c],
            "docs": [{k: d[k] for k in ("id", "reason", "text")} for d in docs],
        }
        for c, docs in sorted(groups.items(), key=lambda kv: (-size_of[kv[0]], kv[0]))
    ]


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
    g = _gather(cfg, ctx, seed)
    g["seed"], n = seed, g["n"]
    g["peak_bytes"] = sum(
        a.nbytes for k, a in g.items() if k in ("length", "quality", "keys", "sig")
    )
    stats: dict[str, Any] = {"exact_method": cfg.exact, "near": cfg.near}
    exact, edges = _exact(cfg, g, stats)
    if cfg.near:
        stats.update(
            {
                "threshold": cfg.threshold,
                "num_perm": cfg.num_perm,
                "ngram": cfg.ngram,
                "minhash_seed": seed,
            }
        )
        edges = np.concatenate([edges, _near(cfg, ctx, g, exact, stats)])
        g.pop("sig")
    labels = components(n, edges)
    score = g.get("length", g.get("quality"))
    decision = cl.choose_keepers(labels, exact, score)
    in_cluster = np.bincount(labels, minlength=n)[labels] > 1
    cluster = np.where(in_cluster, labels, -1)  # bloom exact dups have no known first copy
    hist_ids = cl.size_histogram(labels)
    show = _examples(labels, decision, hist_ids[1], hist_ids[2], cfg.num_examples)
    results = _write(ctx, g["offsets"], decision, cluster, show)
    dropped = {f"dropped_{r}": int((decision == code).sum()) for code, r in REASONS.items()}
    out = {
        "docs_in": n,
        "docs_out": int((decision == cl.KEEP).sum()),
        **dropped,
        "bytes_in": g["bytes_in"],
        "bytes_out": sum(r["bytes_out"] for r in results),
    }
    out.update(stats)
    _cluster_stats(labels, decision, [e for r in results for e in r["examples"]], out)
    out["state_bytes_per_doc_peak"] = round(g["peak_bytes"] / max(n, 1), 1)
    out["state_bytes_per_doc_budget"] = 4 * cfg.num_perm + 64
    return StageResult(outputs=[o for r in results for o in r["outputs"]], stats=out)


STAGE = Stage("dedup", DedupConfig, run, version="1", needs=("download",))
