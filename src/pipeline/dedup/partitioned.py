"""Executor tasks of dedup's partitioned reduce: exact copies per key bucket, per-part copy
flags, and the cluster labels of exact copies once near-duplicate components are known.

Each task reads and writes files in the stage's work folder (`pipeline.dedup.files`) and
returns a few numbers, so the driver never holds an array with one entry per document. Worker
memory: one bucket's keys (~`bucket_docs` x 24 bytes plus the sort's temporaries) or one part.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.dedup import files
from pipeline.dedup.cluster import size_counts, top_clusters
from pipeline.dedup.exact import bucket_copies


def exact_bucket_task(bucket: int, work_dir: str, num_parts: int) -> int:
    """Copies among the keys of one bucket, from every part's `keys` file: writes `copies-b`
    (copy, first) and `firsts-b` (first, number of copies); returns the number of copies."""
    blocks = []
    for i in range(num_parts):
        bounds = files.load(work_dir, "keybounds", i)
        lo, hi = int(bounds[bucket]), int(bounds[bucket + 1])
        blocks.append(np.array(files.load(work_dir, "keys", i)[:, lo:hi]))
    rows = np.concatenate(blocks, axis=1) if blocks else np.zeros((3, 0), np.uint64)
    del blocks
    copies, firsts = bucket_copies(rows)
    files.save(work_dir, "copies", bucket, copies)
    files.save(work_dir, "firsts", bucket, firsts)
    return copies.shape[1]


def copy_flags_task(item: tuple[int, int, int], work_dir: str, num_buckets: int) -> int:
    """Part `index` (global rows [lo, hi)): bool `dup-i`, its rows that are exact copies (read
    from every bucket's `copies` by range); returns how many."""
    index, lo, hi = item
    dup = np.zeros(hi - lo, bool)
    for b in range(num_buckets):
        dup[files.range_rows(files.load(work_dir, "copies", b), lo, hi)[0] - lo] = True
    files.save(work_dir, "dup", index, dup)
    return int(dup.sum())


def resolve_task(bucket: int, work_dir: str, top: int) -> dict[str, Any]:
    """Cluster labels for one bucket's exact copies and first occurrences, given the near
    components (`nodes`: node, label, winner; absent without near dedup).

    A copy's label is its first occurrence's: the first's near component label, or the first
    itself (its cluster is its copies). Writes `labels-b` int64 [3, m] (document, label, is a
    copy) for the copies and the firsts outside near components, by document. Returns the
    copies to add to near components (labels, counts) and the summary of the exact-only
    clusters: size-bucket counts, number, documents, the `top` largest.
    """
    copies = np.array(files.load(work_dir, "copies", bucket))
    firsts = np.array(files.load(work_dir, "firsts", bucket))
    nodes = files.load_or_none(work_dir, "nodes")
    node, label = (nodes[0], nodes[1]) if nodes is not None else (np.zeros(0), np.zeros(0))
    in_near, first_label = files.lookup(node, label, firsts[0])
    copy_near, copy_label = files.lookup(node, label, copies[1])
    alone = ~in_near
    doc = np.concatenate([copies[0], firsts[0][alone]])
    lab = np.concatenate([np.where(copy_near, copy_label, copies[1]), firsts[0][alone]])
    is_copy = np.concatenate([np.ones(copies.shape[1], np.int64), np.zeros(alone.sum(), np.int64)])
    order = np.argsort(doc, kind="stable")
    files.save(work_dir, "labels", bucket, np.stack([doc, lab, is_copy])[:, order])
    near_labels, inverse = np.unique(first_label[in_near], return_inverse=True)
    near_counts = np.bincount(inverse, weights=firsts[1][in_near], minlength=len(near_labels))
    ids, sizes = firsts[0][alone], firsts[1][alone] + 1
    top_ids, top_sizes = top_clusters(ids, sizes, top)
    return {
        "near_labels": near_labels.astype(np.int64),
        "near_counts": near_counts.astype(np.int64),
        "size_counts": size_counts(sizes),
        "clusters": len(ids),
        "docs": int(sizes.sum()),
        "top_ids": top_ids,
        "top_sizes": top_sizes,
    }
