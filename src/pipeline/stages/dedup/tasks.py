"""Executor tasks of dedup's partitioned reduce: exact copies per key bucket, per-part copy
flags, and the cluster labels of exact copies once near-duplicate components are known.

Each task reads and writes files in the stage's work folder (`pipeline.stages.dedup.files`) and
returns a few numbers, so the driver never holds an array with one entry per document. Worker
memory: one bucket's keys (~`bucket_docs` x 24 bytes plus the sort's temporaries) or one part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.dedup import measure
from pipeline.dedup.cluster import size_counts, top_clusters
from pipeline.dedup.exact import bucket_copies
from pipeline.dedup.lsh import band_edges, sig_name, unique_columns
from pipeline.stages.dedup import files


@dataclass(frozen=True, slots=True)
class RowRange:
    """Global rows [lo, hi) of part (or node range) `index`: one task's slice."""

    index: int
    lo: int
    hi: int


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


def copy_flags_task(item: RowRange, work_dir: str, num_buckets: int) -> int:
    """Part `index` (global rows [lo, hi)): bool `dup-i`, its rows that are exact copies (read
    from every bucket's `copies` by range); returns how many."""
    index, lo, hi = item.index, item.lo, item.hi
    dup = np.zeros(hi - lo, bool)
    for b in range(num_buckets):
        dup[files.range_rows(files.load(work_dir, "copies", b), lo, hi)[0] - lo] = True
    files.save(work_dir, "dup", index, dup)
    return int(dup.sum())


def near_labels(work_dir: str, offsets: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, ...]:
    """For global documents `query` [q]: (in a near component bool [q], its label int64 [q]),
    from the `cc-i` file of each one's part."""
    found, label = np.zeros(len(query), bool), np.zeros(len(query), np.int64)
    part_of = np.searchsorted(offsets, query, side="right") - 1
    for j in np.unique(part_of).tolist():
        cc = files.load_or_none(work_dir, "cc", j)
        if cc is not None:
            sel = part_of == j
            found[sel], label[sel] = files.lookup(cc[0], cc[1], query[sel])
    return found, label


def resolve_task(bucket: int, work_dir: str, offsets: np.ndarray, top: int) -> dict[str, Any]:
    """Cluster labels for one bucket's exact copies and first occurrences, given the near
    components (`cc-i` files: node, label; absent without near dedup).

    A copy's label is its first occurrence's: the first's near component label, or the first
    itself (its cluster is its copies). Writes `labels-b` int64 [3, m] (document, label, is a
    copy) for the copies and the firsts outside near components, by document, and `add-b`
    int64 [2, k] (near label, copies of its members) by label. Returns the summary of the
    exact-only clusters: size-bucket counts, number, documents, the `top` largest.
    """
    copies = np.array(files.load(work_dir, "copies", bucket))
    firsts = np.array(files.load(work_dir, "firsts", bucket))
    in_near, first_label = near_labels(work_dir, offsets, firsts[0])
    copy_near, copy_label = near_labels(work_dir, offsets, copies[1])
    alone = ~in_near
    doc = np.concatenate([copies[0], firsts[0][alone]])
    lab = np.concatenate([np.where(copy_near, copy_label, copies[1]), firsts[0][alone]])
    is_copy = np.concatenate([np.ones(copies.shape[1], np.int64), np.zeros(alone.sum(), np.int64)])
    order = np.argsort(doc, kind="stable")
    files.save(work_dir, "labels", bucket, np.stack([doc, lab, is_copy])[:, order])
    near_ids, inverse = np.unique(first_label[in_near], return_inverse=True)
    near_add = np.zeros(len(near_ids), np.int64)
    np.add.at(near_add, inverse, firsts[1][in_near])
    files.save(work_dir, "add", bucket, np.stack([near_ids, near_add]))
    ids, sizes = firsts[0][alone], firsts[1][alone] + 1
    out = _summary(ids, sizes, top)
    out["kept"] = out["top_ids"].tolist()  # an exact-only cluster keeps its first occurrence
    out["others"] = [np.zeros(0, np.int64)] * len(out["kept"])  # its copies: by label, later
    return out


def _summary(ids: np.ndarray, sizes: np.ndarray, top: int) -> dict[str, Any]:
    top_ids, top_sizes = top_clusters(ids, sizes, top)
    return {
        "size_counts": size_counts(sizes),
        "clusters": len(ids),
        "docs": int(sizes.sum()),
        "top_ids": top_ids,
        "top_sizes": top_sizes,
    }


def cluster_task(
    item: RowRange,
    work_dir: str,
    offsets: np.ndarray,
    num_buckets: int,
    by_score: bool,
    top: int,
    per: int,
    seed: int = 0,
    sample: int = 0,
) -> dict[str, Any]:
    """Near components whose label is in [lo, hi): members from every part's `bylabel`,
    copies from every bucket's `add`; the kept member (the best `score`, ties to the first
    seen; the first seen without scores) to `win-q`. Returns the clusters' summary and, for
    its `top` largest, the kept member and the first `per - 1` others (example candidates);
    with `sample` > 0, its `sample` near-dropped members of smallest seeded key (`merges`:
    the in-run measurement's precision draw, docs/dedup.md)."""
    q, lo, hi = item.index, item.lo, item.hi
    num_parts = len(offsets) - 1
    got = [files.range_rows(files.load(work_dir, "bylabel", i), lo, hi) for i in range(num_parts)]
    label, node = np.concatenate([np.zeros((2, 0), np.int64), *got], axis=1)
    ids, sizes = np.unique(label, return_counts=True)
    for b in range(num_buckets):
        add = files.range_rows(files.load(work_dir, "add", b), lo, hi)
        np.add.at(sizes, np.searchsorted(ids, add[0]), add[1])
    if by_score:
        score = np.zeros(len(node), np.float64)
        part_of = np.searchsorted(offsets, node, side="right") - 1
        for j in np.unique(part_of).tolist():
            sel = part_of == j
            score[sel] = np.asarray(files.load(work_dir, "score", j))[node[sel] - offsets[j]]
        order = np.lexsort((node, -score, label))
        head = np.ones(len(order), bool)
        head[1:] = label[order][1:] != label[order][:-1]
        winners = np.sort(node[order[head]])
    else:
        winners = ids  # the label is the smallest member: the first seen
    files.save(work_dir, "win", q, winners[None, :])
    out = _summary(ids, sizes.astype(np.int64), top)
    kept, others = [], []
    for c in out["top_ids"].tolist():
        members = np.sort(node[label == c])
        win = members[np.isin(members, winners)]
        kept.append(int(win[0]))
        others.append(members[members != win[0]][: per - 1])
    out["kept"], out["others"] = kept, others
    if sample:
        t0 = time.process_time()
        lost = ~np.isin(node, winners)
        keys, dropped, clusters = measure.bottom_k(
            measure.sample_keys(node[lost], seed, 1), sample, node[lost], label[lost]
        )
        out["merges"] = {"keys": keys, "dropped": dropped, "clusters": clusters}
        out["merges"]["seconds"] = time.process_time() - t0
    return out


def example_copies_task(bucket: int, work_dir: str, labels: tuple[int, ...], per: int) -> list:
    """For each cluster in `labels`: its first `per - 1` exact copies in this bucket (by index),
    int64 arrays from `labels-b`."""
    doc, label, is_copy = np.array(files.load(work_dir, "labels", bucket))
    return [doc[(label == c) & (is_copy == 1)][: per - 1] for c in labels]


def band_bucket_task(group: int, sketch_dir: str, offsets: np.ndarray) -> int:
    """Executor task for one (band, key bucket) `group`: read its band keys from every part's
    `bkeys` file, drop the parts' exact copies (`dup`), and write the star pairs of equal keys
    as global indices: `band-<group>` int64 [2, E] (lo < hi, unique, sorted) and
    `bandhi-<group>` int64 [1, H] (the distinct `hi`, sorted), so a part's documents are found
    by range. Returns E.

    Equal keys share a bucket, and rows come in global order, so the pairs are those of the
    whole band. Memory ~40 bytes per key of the group (about `bucket_docs`), whatever the
    corpus size; the driver sends a number and gets a count back.
    """
    keys, cands = [], []
    for i in range(len(offsets) - 1):
        bounds = files.load(sketch_dir, "bkeybounds", i)
        got = np.array(files.load(sketch_dir, "bkeys", i)[:, bounds[group] : bounds[group + 1]])
        dup = files.load_or_none(sketch_dir, "dup", i)
        if dup is not None and got.shape[1]:
            got = got[:, ~np.asarray(dup)[got[1].astype(np.int64) - offsets[i]]]
        keys.append(got[0])
        cands.append(got[1].astype(np.int64))
    key = np.concatenate([np.zeros(0, np.uint64), *keys])
    cand = np.concatenate([np.zeros(0, np.int64), *cands])
    edges = cand[band_edges(key)]
    pairs = np.stack([edges.min(axis=1), edges.max(axis=1)]) if len(edges) else np.zeros((2, 0))
    pairs = unique_columns(pairs.astype(np.int64))
    files.save(sketch_dir, "band", group, pairs)
    files.save(sketch_dir, "bandhi", group, np.unique(pairs[1])[None, :])
    return pairs.shape[1]


def candidate_signatures(sketch_dir: Path, offsets: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """uint32 [len(docs), num_perm]: full signatures of the given (sorted) global documents,
    read from the part files; O(candidates) memory."""
    part_of = np.searchsorted(offsets, docs, side="right") - 1
    out = None
    for i in np.unique(part_of).tolist():
        sig_t = np.load(Path(sketch_dir) / sig_name(i), mmap_mode="r", allow_pickle=False)
        if out is None:
            out = np.empty((len(docs), sig_t.shape[0]), np.uint32)
        sel = np.flatnonzero(part_of == i)
        out[sel] = np.asarray(sig_t[:, docs[sel] - offsets[i]]).T
    return out if out is not None else np.zeros((0, 0), np.uint32)
