"""shard: packed sequences -> seeded subsample -> eval split (pack order) + shuffled train shards.

Writes `train/shard_NNNNNN.npz` (uncompressed: input_ids, segment_ids [n, seq_len]) with
`train/metadata.json`, and the same under `eval/`. Selection uses np.random.default_rng(recipe
seed), the train permutation recipe seed + 1 (DESIGN.md "Seeds"). metadata.json: `seed` is the
recipe's seed (what a trainer expects), `permutation_seed` and `subsample_seed` the derived ones.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config import RunConfig, setting
from pipeline.parts import group_parts as io_group_parts
from pipeline.parts import read_table
from pipeline.shards import (
    FIELDS,
    FORMAT_VERSION,
    METADATA_NAME,
    shard_entry,
    shard_name,
    shard_sizes,
    write_metadata,
)
from pipeline.shuffle import ShuffleStats
from pipeline.stage import Stage, StageContext, StageResult
from pipeline.stages.download.mix import MIX_FILE
from pipeline.stages.shard.bounded import (
    SELECT_DIR,
    gather_shard,
    part_source_counts,
    recorded,
    run_bounded,
)
from pipeline.stages.shard.config import ShardConfig
from pipeline.text_files import read_json_file

# ---------------------------------------------------------------- pure core


def target_counts(
    available: dict[str, int],
    n_target: int,
    weights: dict[str, float] | None,
    shortfall: str = "spread",
) -> dict[str, int]:
    """Sequences to keep per source. Without weights: proportional to what is available. With
    weights: share w_s / Σw of n_target; a source that has too few gives all it has and either
    its shortfall is spread over the others by weight (`spread`, water-filling: the total holds,
    the shares move) or every source is cut to the same scale (`shrink`: the total is the largest
    one at which each source has its share, min_s avail_s Σw / w_s, so filtering that thinned
    one source does not change the mix). Largest-remainder rounding.
    """
    names = sorted(available)
    avail = np.array([available[s] for s in names], np.float64)
    if weights is None:
        w = avail.copy()
    else:
        w = np.array([max(weights.get(s, 0.0), 0.0) for s in names], np.float64)
    total = min(n_target, int(avail[w > 0].sum()))
    if shortfall == "shrink" and weights is not None and (w > 0).any():
        pos = w > 0
        # floor, with a tolerance for float error: never above what the scarcest source allows
        total = min(total, int(np.floor(np.min(avail[pos] * w[pos].sum() / w[pos]) + 1e-9)))
    ideal = np.zeros(len(names))
    free = w > 0
    while free.any():  # each round caps at least one source or finishes
        share = np.where(free, w, 0.0) / w[free].sum()
        ideal = np.where(free, (total - ideal[~free].sum()) * share, ideal)
        over = free & (ideal > avail)
        if not over.any():
            break
        ideal[over] = avail[over]
        free &= ~over
    counts = np.minimum(np.floor(ideal + 1e-9), avail).astype(np.int64)
    for i in np.argsort(-(ideal - counts), kind="stable"):  # the rest, largest remainder first
        if counts.sum() >= total:
            break
        if w[i] > 0 and counts[i] < avail[i]:
            counts[i] += 1
    return {s: int(c) for s, c in zip(names, counts, strict=True)}


def select(sources: np.ndarray, counts: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    """Sorted global indices: counts[s] sequences of source s, uniformly without replacement."""
    picked = []
    for name in sorted(counts):
        idx = np.flatnonzero(sources == name)
        picked.append(np.sort(rng.choice(idx, counts[name], replace=False)))
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, np.int64)


def split_eval(
    selected: np.ndarray, eval_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train, eval) both sorted; eval is a random eval_fraction of `selected` (>= 1 if > 0)."""
    n_eval = int(round(len(selected) * eval_fraction))
    if eval_fraction > 0 and len(selected) >= 2:
        n_eval = max(1, n_eval)
    n_eval = min(n_eval, max(len(selected) - 1, 0))
    mask = np.zeros(len(selected), bool)
    mask[rng.choice(len(selected), n_eval, replace=False)] = True
    return selected[~mask], selected[mask]


# ---------------------------------------------------------------- I/O


def group_parts(paths: list[Path]) -> list[dict[str, Path]]:
    """pack's parts -> [{input_ids, segment_ids, seqs}] in part order."""
    kinds = {"input_ids": "input_ids.npy", "segment_ids": "segment_ids.npy", "seqs": "seqs.parquet"}
    return io_group_parts(paths, kinds, "pack")


@dataclass(frozen=True, slots=True)
class ShardJob:
    """Shard `index`: output row k is row `rows[k]` of pack part `part[k]`."""

    index: int
    part: np.ndarray
    rows: np.ndarray


def write_shard(job: ShardJob, parts: list[dict[str, str]], out_dir: str) -> dict[str, Any]:
    """Gather one shard: output row k is row `rows[k]` of pack part `part[k]`. A job carries only
    its own rows (16 B per sequence), never the global index."""
    j, part, rows = job.index, job.part, job.rows
    path = Path(out_dir) / shard_name(j)
    return recorded(path, gather_shard(part, rows, parts, path))


def _write_split(
    ctx: StageContext,
    sub: str,
    order: np.ndarray,
    cfg: ShardConfig,
    parts: list[dict[str, str]],
    part_of: np.ndarray,
    row_of: np.ndarray,
) -> list[tuple[str, int, str]]:
    (ctx.out_dir / sub).mkdir(parents=True, exist_ok=True)
    sizes = shard_sizes(len(order), cfg.shard_size)
    bounds = np.cumsum([0, *sizes])
    chunks = [order[bounds[j] : bounds[j + 1]] for j in range(len(sizes))]
    jobs = [ShardJob(j, part_of[idx], row_of[idx]) for j, idx in enumerate(chunks)]
    fn = partial(write_shard, parts=parts, out_dir=str(ctx.out_dir / sub))
    return [r["shard"] for r in ctx.executor.map(fn, jobs, desc=f"shard {sub}")]


# ---------------------------------------------------------------- run


def target_total(cfg: ShardConfig, n: int) -> int:
    """Sequences to keep of n: all, round(n * fraction), or min(num_samples, n)."""
    if cfg.num_samples is not None:
        return min(cfg.num_samples, n)
    if cfg.fraction is not None:
        return int(round(n * cfg.fraction))
    return n


def _read_inputs(ctx: StageContext):
    """pack's meta.json, parts, the sorted source names, and per sequence: source code (index
    into the names), part index, row inside the part. Integer codes, not a Python string per
    sequence: 12 bytes per sequence in the driver instead of ~170."""
    pack = ctx.inputs["pack"]
    pack_meta = read_json_file(pack.file("meta.json"), "pack meta.json")
    parts = group_parts(pack.parts)
    # Arrow string columns (offsets + bytes) while the codes are built, then dropped
    columns = [read_table(p["seqs"], columns=["source"]).column("source") for p in parts]
    # pyarrow imports pandas (~0.5 s of serial driver CPU) in pa.array of a list and in
    # to_numpy: the names stay Arrow (UTF-8 byte order is sorted()'s code point order) and
    # the codes are read from the index arrays' buffers
    chunks = [ch for c in columns for ch in c.chunks]
    distinct = pc.unique(pa.chunked_array(chunks, pa.string()))
    value_set = distinct.take(pc.array_sort_indices(distinct))
    names = value_set.to_pylist()
    codes = np.concatenate(
        [_int32_values(ch) for c in columns for ch in pc.index_in(c, value_set=value_set).chunks]
        or [np.zeros(0, np.int32)]
    )
    sizes = [len(c) for c in columns]
    del columns
    part_of = np.repeat(np.arange(len(parts), dtype=np.int32), sizes)
    row_of = np.concatenate([np.arange(n, dtype=np.int32) for n in sizes] or [part_of])
    return pack_meta, parts, names, codes, part_of, row_of


def _int32_values(arr: pa.Array) -> np.ndarray:
    """The values of an int32 Arrow array (index_in's codes)."""
    if arr.null_count:  # no source: never written by pack; converted as before
        return arr.to_numpy(zero_copy_only=False).astype(np.int32)
    return np.frombuffer(arr.buffers()[1], np.int32)[arr.offset : arr.offset + len(arr)].copy()


def _part_counts(ctx: StageContext) -> tuple[list[str], np.ndarray]:
    """Sorted source names and [parts, sources] sequence counts, from per-part tasks."""
    parts = group_parts(ctx.inputs["pack"].parts)
    found = ctx.executor.map(
        part_source_counts, [str(p["seqs"]) for p in parts], desc="shard sources"
    )
    names = sorted({s for f in found for s in f})
    table = np.array([[f.get(s, 0) for s in names] for f in found], np.int64)
    return names, table.reshape(len(parts), len(names))


def run(cfg: ShardConfig, ctx: StageContext) -> StageResult:
    pack_meta = read_json_file(ctx.inputs["pack"].file("meta.json"), "pack meta.json")
    names, per_part = _part_counts(ctx)
    n = int(per_part.sum())
    n_target = target_total(cfg, n)
    available = {s: int(c) for s, c in zip(names, per_part.sum(axis=0), strict=True)}
    counts = target_counts(available, n_target, cfg.source_weights, cfg.source_shortfall)
    if n > cfg.exact_max_sequences:
        return _run_bounded(cfg, ctx, pack_meta, names, per_part, counts)
    pack_meta, parts, names, codes, part_of, row_of = _read_inputs(ctx)
    rng = np.random.default_rng(ctx.seed)
    # codes follow the sorted names, so select draws in the same order as over the names
    by_code = {names.index(s): k for s, k in counts.items()}
    train, evals = split_eval(select(codes, by_code, rng), cfg.eval_fraction, rng)
    perm_seed = ctx.seed + 1
    train_order = train[np.random.default_rng(perm_seed).permutation(len(train))]
    str_parts = [{k: str(v) for k, v in p.items()} for p in parts]
    outputs, stats = [], {}
    for sub, order, shuffled in (("train", train_order, True), ("eval", evals, False)):
        written = _write_split(ctx, sub, order, cfg, str_parts, part_of, row_of)
        per_source = _per_source(names, codes[order])
        meta = _metadata(
            pack_meta, cfg, written, shuffled, perm_seed, ctx.seed, per_source, _read_mix(ctx)
        )
        write_metadata(ctx.out_dir / sub, meta)
        outputs += [f"{sub}/{w[0]}" for w in written] + [f"{sub}/{METADATA_NAME}"]
        stats[f"sequences_{sub}"] = len(order)
        stats[f"num_shards_{sub}"] = len(written)
        stats[f"shard_sizes_{sub}"] = [w[1] for w in written]  # sequences per shard, in order
    shuffle = _shuffle_stats(train, train_order, part_of, len(parts), cfg.shard_size)
    stats.update(_common_stats(cfg, ctx, n, len(train), len(evals), pack_meta, counts, shuffle))
    stats["shuffle_method"] = "exact"
    return StageResult(outputs=outputs, stats=stats)


def _common_stats(cfg, ctx, n, n_train, n_eval, pack_meta, counts, shuffle) -> dict[str, Any]:
    perm_seed = ctx.seed + 1
    return {
        "sequences_in": n,
        "sequences_selected": n_train + n_eval,
        "sequences_not_selected": n - n_train - n_eval,
        "tokens_train": int(pack_meta["seq_len"]) * n_train,
        "sequences_per_source": counts,
        **setting(cfg, "shard_size"),
        **setting(cfg, "eval_fraction"),
        **setting(cfg, "source_shortfall"),
        **setting(RunConfig, "seed", "subsample_seed", value=ctx.seed),
        **setting(RunConfig, "seed", "permutation_seed", value=perm_seed),
        **{f"shuffle_{k}": v for k, v in shuffle.items()},
    }


def _run_bounded(
    cfg: ShardConfig,
    ctx: StageContext,
    pack_meta: dict[str, Any],
    names: list[str],
    per_part: np.ndarray,
    counts: dict[str, int],
) -> StageResult:
    """Above exact_max_sequences: pipeline.stages.shard.bounded (no per-sequence driver
    state)."""
    parts = [{k: str(v) for k, v in p.items()} for p in group_parts(ctx.inputs["pack"].parts)]
    res = run_bounded(ctx, parts, names, per_part, counts, cfg.eval_fraction, cfg.shard_size)
    shutil.rmtree(ctx.out_dir / SELECT_DIR, ignore_errors=True)
    perm_seed = ctx.seed + 1
    outputs, stats, sizes = [], {}, {}
    for sub, shuffled in (("train", True), ("eval", False)):
        written, src = res[sub]
        per_source = {s: int(c) for s, c in zip(names, src, strict=True) if c}
        meta = _metadata(
            pack_meta, cfg, written, shuffled, perm_seed, ctx.seed, per_source, _read_mix(ctx)
        )
        write_metadata(ctx.out_dir / sub, meta)
        outputs += [f"{sub}/{w[0]}" for w in written] + [f"{sub}/{METADATA_NAME}"]
        sizes[sub] = sum(w[1] for w in written)
        stats[f"sequences_{sub}"] = sizes[sub]
        stats[f"num_shards_{sub}"] = len(written)
        stats[f"shard_sizes_{sub}"] = [w[1] for w in written]
    n = int(per_part.sum())
    common = _common_stats(
        cfg, ctx, n, sizes["train"], sizes["eval"], pack_meta, counts, res["shuffle"]
    )
    stats.update(common)
    stats["shuffle_method"] = "feistel"
    return StageResult(outputs=outputs, stats=stats)


def _shuffle_stats(
    train: np.ndarray, train_order: np.ndarray, part_of: np.ndarray, num_parts: int, shard_size: int
) -> dict[str, float]:
    """How shuffled the train order is, shard by shard, with pack parts as source shards."""
    rank = np.empty(int(train.max()) + 1 if len(train) else 0, np.int64)
    rank[train] = np.arange(len(train))  # original position among the train sequences
    q = ShuffleStats(np.bincount(part_of[train], minlength=num_parts))
    for a in range(0, len(train_order), shard_size):
        chunk = train_order[a : a + shard_size]
        q.add(part_of[chunk], rank[chunk])
    return q.result()


def _per_source(names: list[str], codes: np.ndarray) -> dict[str, int]:
    """Sequences per source name, only the names present."""
    counts = np.bincount(codes, minlength=len(names))
    return {s: int(counts[i]) for i, s in enumerate(names) if counts[i]}


def _metadata(
    pack_meta: dict[str, Any],
    cfg: ShardConfig,
    written: list[tuple[str, int, str]],
    shuffled: bool,
    perm_seed: int,
    subsample_seed: int,
    per_source: dict[str, int],
    mix: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """metadata.json of one split; `mix`: download.sources as realised (download's mix.json)."""
    return {
        "num_samples": sum(per_source.values()),
        "seq_len": pack_meta["seq_len"],
        "dtype": pack_meta["dtype"],
        "fields": list(FIELDS),
        "field_dtypes": {
            "input_ids": pack_meta["dtype"],
            "segment_ids": pack_meta["segment_dtype"],
        },
        "shard_size": cfg.shard_size,
        "num_shards": len(written),
        "shard_sizes": [w[1] for w in written],
        "pre_shuffled": shuffled,
        "seed": subsample_seed,  # the recipe's seed
        "permutation_seed": perm_seed if shuffled else None,  # train order: recipe seed + 1
        "subsample_seed": subsample_seed,
        "tokenizer_sha256": pack_meta.get("tokenizer_sha256"),
        "vocab_size": pack_meta.get("vocab_size"),
        "eos_id": pack_meta.get("eos_id"),
        "pad_id": pack_meta.get("pad_id"),
        "packing": pack_meta.get("strategy"),
        "shards": [shard_entry(*w) for w in written],
        "samples_per_source": dict(sorted(per_source.items())),
        **({"mix": mix} if mix else {}),
        "version": FORMAT_VERSION,
    }


def _read_mix(ctx: StageContext) -> dict[str, Any] | None:
    """download's mix.json (a run with download.sources), else None."""
    download = ctx.inputs.get("download")
    if download is None or MIX_FILE not in download.files:
        return None
    return read_json_file(download.file(MIX_FILE), f"download {MIX_FILE}")


STAGE = Stage(
    "shard",
    ShardConfig,
    run,
    version="1",
    needs=("pack",),
    uses=("download",),  # mix.json: the mix recorded in metadata.json
    seed_scope="recipe",
)
