"""Executor tasks that verify LSH candidate pairs, one part at a time, from the band files.

`candidate_sets_task` (verify: exact) computes the shingle sets of a part's documents that are
in any candidate pair and writes them to the work folder; `verify_task` takes the pairs whose
lower index is in its part, reads the sets (or, verify: estimate, the signatures) of both ends
from the parts' files and writes the pairs that pass. Each task holds one part's pairs and
their documents' sets; the driver holds none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.dedup.cluster import verify as verify_signatures
from pipeline.dedup.lsh import unique_columns
from pipeline.dedup.minhash import exact_jaccard, shingle_sets
from pipeline.parts import read_table
from pipeline.stages.dedup import files
from pipeline.stages.dedup.tasks import candidate_signatures

SET_BATCH_DOCS = 250  # documents per shingle_sets call: temporaries stay cache-sized


def part_pairs(work_dir: str, groups: int, lo: int, hi: int) -> np.ndarray:
    """int64 [2, E]: the distinct candidate pairs of every band file (`groups` of them: bands x
    key buckets) whose lower index is in [lo, hi), sorted."""
    got = [files.range_rows(files.load(work_dir, "band", b), lo, hi) for b in range(groups)]
    return unique_columns(np.concatenate(got, axis=1)) if got else np.zeros((2, 0), np.int64)


def part_candidates(work_dir: str, groups: int, lo: int, hi: int) -> np.ndarray:
    """int64 [c]: sorted documents of [lo, hi) at either end of any candidate pair."""
    got = [np.zeros(0, np.int64)]
    for b in range(groups):
        got.append(files.range_rows(files.load(work_dir, "band", b), lo, hi)[0])
        got.append(files.range_rows(files.load(work_dir, "bandhi", b), lo, hi)[0])
    return np.unique(np.concatenate(got))


def candidate_sets_task(
    item: tuple[int, Path, int, int], work_dir: str, groups: int, ngram: int, seed: int
) -> int:
    """Write part `index`'s candidate documents (`cand-i`), their shingle sets concatenated
    (`sets-i`, uint64) and offsets into them (`setoff-i`, int64 [c + 1]); returns c."""
    index, path, lo, hi = item
    docs = part_candidates(work_dir, groups, lo, hi)
    texts = read_table(path, columns=["text"]).column("text").take(pa.array(docs - lo))
    texts = texts.to_pylist()
    sets = [
        s
        for b in range(0, len(texts), SET_BATCH_DOCS)
        for s in shingle_sets(texts[b : b + SET_BATCH_DOCS], ngram, seed)
    ]
    sizes = np.fromiter(map(len, sets), np.int64, len(sets))
    files.save(work_dir, "cand", index, docs)
    files.save(work_dir, "setoff", index, np.concatenate([[0], np.cumsum(sizes)]))
    files.save(work_dir, "sets", index, np.concatenate(sets) if sets else np.zeros(0, np.uint64))
    return len(docs)


def _read_sets(work_dir: str, offsets: np.ndarray, docs: np.ndarray) -> dict[int, np.ndarray]:
    """Shingle sets of sorted global `docs`, from their parts' `sets` files."""
    part_of = np.searchsorted(offsets, docs, side="right") - 1
    out: dict[int, np.ndarray] = {}
    for j in np.unique(part_of).tolist():
        mine = docs[part_of == j]
        cand, setoff = files.load(work_dir, "cand", j), files.load(work_dir, "setoff", j)
        sets = files.load(work_dir, "sets", j)
        pos = np.searchsorted(cand, mine)
        starts, ends = np.asarray(setoff[pos]), np.asarray(setoff[pos + 1])
        for d, s, e in zip(mine.tolist(), starts.tolist(), ends.tolist(), strict=True):
            out[d] = np.array(sets[s:e])
    return out


def verify_task(
    item: tuple[int, int, int],
    work_dir: str,
    groups: int,
    offsets: np.ndarray,
    threshold: float,
    method: str,
) -> dict[str, Any]:
    """Verify part `index`'s candidate pairs (lower index in [lo, hi)); write the ones at or
    above `threshold` as `near-i` int64 [2, V]. Returns the numbers of candidates and verified."""
    index, lo, hi = item
    pairs = part_pairs(work_dir, groups, lo, hi)
    docs = np.unique(pairs)
    if method == "exact":
        ok = exact_jaccard(_read_sets(work_dir, offsets, docs), pairs.T) >= threshold - 1e-12
    else:
        sig = candidate_signatures(Path(work_dir), offsets, docs)
        ok = verify_signatures(sig, np.searchsorted(docs, pairs.T), threshold)
    files.save(work_dir, "near", index, pairs[:, ok])
    return {"candidates": pairs.shape[1], "verified": int(ok.sum())}
