"""The dedup stage's work files (in its temp folder) and range reads from sorted ones.

Every per-document array lives in a file written by the task that made it: per part (scores,
no-shingle and exact-copy flags, signatures), per exact-key bucket (copies and first
occurrences), per LSH band (candidate pairs), per part again for verified pairs. Files that are
read by document range are sorted by global index in their first row ([k, E] layout: row 0 is
contiguous), so a task reads only the slice of its part with two binary searches on a memmap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.io import save_npy


def path(work_dir: str | Path, kind: str, index: int | None = None) -> Path:
    """`work_dir/kind-00003.npy` (or `work_dir/kind.npy` without an index)."""
    name = kind if index is None else f"{kind}-{index:05d}"
    return Path(work_dir) / f"{name}.npy"


def save(work_dir: str | Path, kind: str, index: int | None, arr: np.ndarray) -> None:
    save_npy(path(work_dir, kind, index), np.ascontiguousarray(arr))


def load(work_dir: str | Path, kind: str, index: int | None = None) -> np.ndarray:
    """Memory-mapped, read-only: only the pages a task touches are read."""
    return np.load(path(work_dir, kind, index), mmap_mode="r", allow_pickle=False)


def load_or_none(work_dir: str | Path, kind: str, index: int | None = None) -> np.ndarray | None:
    p = path(work_dir, kind, index)
    return np.load(p, mmap_mode="r", allow_pickle=False) if p.exists() else None


def range_rows(arr: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Columns of `arr` [k, E] (sorted by row 0) whose row 0 lies in [lo, hi), as an in-memory
    int64 [k, e] copy; O(log E) pages touched besides the slice itself."""
    r0, r1 = np.searchsorted(arr[0], [lo, hi])
    return np.array(arr[:, r0:r1], np.int64)


def lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, ...]:
    """For sorted unique `keys` [m] (memmap is fine) and `query` [q]: (found bool [q], the
    value at each found key int64 [q], 0 where not found)."""
    if len(keys) == 0 or len(query) == 0:
        return np.zeros(len(query), bool), np.zeros(len(query), np.int64)
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    found = np.asarray(keys[pos]) == query
    return found, np.where(found, np.asarray(values[pos]), 0).astype(np.int64)
