"""dedup's reduce, as maps of executor tasks over work files (pipeline.stages.dedup.files): exact
copies per key bucket, candidate pairs per LSH band, verification per part, components by star
rounds over node ranges, cluster labels and sizes per bucket and per label range.

The driver sends task numbers and ranges and gets counts back, plus the `top` largest clusters
per task; with `exact: bloom` it runs the filter over one part's keys at a time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.config import setting
from pipeline.dedup import cluster as cl
from pipeline.dedup import exact
from pipeline.dedup.bloom import BloomFilter, bloom_size
from pipeline.dedup.lsh import s_curve
from pipeline.stage import StageContext
from pipeline.stages.dedup import files
from pipeline.stages.dedup.components import label_task, scatter_task, star_task
from pipeline.stages.dedup.tasks import (
    RowRange,
    band_bucket_task,
    cluster_task,
    copy_flags_task,
    exact_bucket_task,
    example_copies_task,
    resolve_task,
)
from pipeline.stages.dedup.verify import PartRows, candidate_sets_task, verify_task

if TYPE_CHECKING:
    from pipeline.stages.dedup.config import DedupConfig

CURVE_POINTS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
CC_EDGES_PER_TASK = 1 << 22  # directed edges per component task (a node range): ~100 MB


@dataclass
class Plan:
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
    def ranges(self) -> list[RowRange]:
        """(part, first row, end row) of every part."""
        o = self.offsets.tolist()
        return [RowRange(i, o[i], o[i + 1]) for i in range(len(self.parts))]

    @property
    def part_rows(self) -> list[PartRows]:
        """(part, path, first row, end row) of every part."""
        return [PartRows(r.index, self.parts[r.index], r.lo, r.hi) for r in self.ranges]


def exact_copies(cfg: DedupConfig, ctx: StageContext, plan: Plan) -> tuple[dict[str, Any], int]:
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
    for i in range(len(plan.parts)):
        files.save(plan.work, "dup", i, bf.add_new(np.array(files.load(plan.work, "keys", i))))
    return exact.bloom_stats(bf, cfg.bloom_fp_rate), bf.words.nbytes


def near_pairs(cfg: DedupConfig, ctx: StageContext, plan: Plan, num_empty: int) -> dict[str, Any]:
    """Tasks per (band, key bucket) write candidate pairs, tasks per part verify them into
    `near-i` files."""
    bands, rows = cfg.bands_rows()
    stats: dict[str, Any] = {
        **setting(cfg, "bands", value=bands),
        **setting(cfg, "rows", value=rows),
        "s_curve": {f"{s:g}": round(float(s_curve(s, bands, rows)), 4) for s in CURVE_POINTS},
        "docs_without_shingles": num_empty,
    }
    work, groups = str(plan.work), bands << plan.bits
    fn = functools.partial(band_bucket_task, sketch_dir=work, offsets=plan.offsets)
    ctx.executor.map(fn, list(range(groups)), desc="dedup: bands")
    if cfg.verify == "exact":
        fn = functools.partial(
            candidate_sets_task, work_dir=work, groups=groups, ngram=cfg.ngram, seed=plan.seed
        )
        ctx.executor.map(fn, plan.part_rows, desc="dedup: shingles")
    fn = functools.partial(
        verify_task,
        work_dir=work,
        groups=groups,
        offsets=plan.offsets,
        threshold=cfg.threshold,
        method=cfg.verify,
    )
    results = ctx.executor.map(fn, plan.ranges, desc="dedup: verify")
    eligible = 0
    for i in range(len(plan.parts)):  # one part's flags at a time
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


def components(ctx: StageContext, plan: Plan, verified: int) -> int:
    """Components of the verified pairs by star rounds over node ranges, then per part `cc-i`
    and `bylabel-i` (pipeline.dedup.components). Returns the number of node ranges."""
    work, parts = str(plan.work), len(plan.parts)
    ranges = max(1, min(parts, -(-2 * verified // CC_EDGES_PER_TASK)))
    bounds = (np.arange(ranges + 1) * plan.n) // ranges
    items = [RowRange(q, int(bounds[q]), int(bounds[q + 1])) for q in range(ranges)]
    ctx.executor.map(
        functools.partial(scatter_task, work_dir=work), list(range(parts)), desc="dedup: components"
    )
    step, count, quiet = 0, parts, 0
    while quiet < 2:  # a large-star and a small-star step in a row that changed nothing
        step += 1
        fn = functools.partial(
            star_task, work_dir=work, step=step, count=count, large=step % 2 == 1
        )
        changed = sum(ctx.executor.map(fn, items, desc=f"dedup: components {step}"))
        for j in range(count):  # consumed: the next step reads this step's files
            files.path(work, f"cc{step - 1}", j).unlink(missing_ok=True)
        count, quiet = ranges, quiet + 1 if changed == 0 else 0
    fn = functools.partial(label_task, work_dir=work, step=step, count=count)
    ctx.executor.map(fn, plan.ranges, desc="dedup: labels")
    return ranges


def clusters(
    cfg: DedupConfig, ctx: StageContext, plan: Plan, ranges: int, per: int, sample: int = 0
) -> tuple[dict[str, int], int, int, np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """Exact copies joined to their clusters (tasks per bucket), near components summed and
    their kept member chosen (tasks per label range); returns the size histogram, the numbers
    of clusters and of their documents, the largest clusters (ids, sizes), the documents
    shown for the first `num_examples` of them (the kept one and `per - 1` others, sorted)
    and each near task's draw of `sample` near-dropped documents (the measurement's)."""
    top = max(cfg.num_examples, 1)
    work, offsets = str(plan.work), plan.offsets
    results = []
    num_buckets = (1 << plan.bits) if cfg.exact == "hash_set" else 0
    if num_buckets:
        fn = functools.partial(resolve_task, work_dir=work, offsets=offsets, top=top)
        results += ctx.executor.map(fn, list(range(num_buckets)), desc="dedup: exact clusters")
    if ranges:
        bounds = (np.arange(ranges + 1) * plan.n) // ranges
        fn = functools.partial(
            cluster_task,
            work_dir=work,
            offsets=offsets,
            num_buckets=num_buckets,
            by_score=cfg.keep != "first",
            top=top,
            per=per,
            seed=plan.seed,
            sample=sample,
        )
        items = [RowRange(q, int(bounds[q]), int(bounds[q + 1])) for q in range(ranges)]
        results += ctx.executor.map(fn, items, desc="dedup: near clusters")
    counts = sum((r["size_counts"] for r in results), np.zeros(len(cl.SIZE_BUCKETS), np.int64))
    best = cl.top_clusters(
        np.concatenate([np.zeros(0, np.int64)] + [r["top_ids"] for r in results]),
        np.concatenate([np.zeros(0, np.int64)] + [r["top_sizes"] for r in results]),
        top,
    )
    num = sum(r["clusters"] for r in results)
    docs = sum(r["docs"] for r in results)
    show = _shown(ctx, plan, results, best[0][: cfg.num_examples], num_buckets, per)
    merges = [r["merges"] for r in results if "merges" in r]
    return cl.size_labels(counts), num, docs, best[0], best[1], show, merges


def _shown(
    ctx: StageContext, plan: Plan, results: list, labels: np.ndarray, num_buckets: int, per: int
) -> np.ndarray:
    """Sorted documents shown for the example clusters `labels`: the kept one and the first
    `per - 1` others by index (near members from the cluster tasks, copies from the buckets)."""
    kept: dict[int, int] = {}
    others: dict[int, list[np.ndarray]] = {}
    for r in results:
        for c, k, o in zip(r["top_ids"].tolist(), r["kept"], r["others"], strict=True):
            kept[c] = k
            others.setdefault(c, []).append(o)
    wanted = tuple(labels.tolist())
    if wanted and num_buckets:
        fn = functools.partial(example_copies_task, work_dir=str(plan.work), labels=wanted, per=per)
        for got in ctx.executor.map(fn, list(range(num_buckets)), desc="dedup: examples"):
            for c, docs in zip(wanted, got, strict=True):
                others[c].append(docs)
    shown = [np.zeros(0, np.int64)]
    for c in wanted:
        shown.append(np.array([kept[c]], np.int64))
        shown.append(np.sort(np.concatenate(others[c]))[: per - 1])
    return np.sort(np.concatenate(shown))
