"""LSH banding: choose bands x rows for a Jaccard threshold, and turn band buckets into edges.

The S-curve P(candidate | s) = 1 - (1 - s^r)^b. `optimal_bands` minimises the weighted areas of
false positives (below the threshold) and false negatives (above it), as datasketch and text-dedup
do. `band_edges` is one independent task per band: sort the band keys, link each bucket's members
to its first member (a star), and return the edges.
"""

from __future__ import annotations

import functools

import numpy as np

_GRID = 501  # trapezoid points per interval: areas to ~1e-6, ample for the argmin


def s_curve(s: np.ndarray | float, bands: int, rows: int) -> np.ndarray:
    """Probability that two documents of Jaccard `s` share at least one band."""
    return 1.0 - (1.0 - np.asarray(s, np.float64) ** rows) ** bands


def _area(lo: float, hi: float, fn) -> float:
    if hi <= lo:
        return 0.0
    x = np.linspace(lo, hi, _GRID)
    y = fn(x)
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2)


def fp_fn_areas(threshold: float, bands: int, rows: int) -> tuple[float, float]:
    """(false-positive area on [0, t], false-negative area on [t, 1]) under the S-curve."""
    fp = _area(0.0, threshold, lambda s: s_curve(s, bands, rows))
    fn = _area(threshold, 1.0, lambda s: 1.0 - s_curve(s, bands, rows))
    return fp, fn


@functools.lru_cache(maxsize=64)
def optimal_bands(threshold: float, num_perm: int, fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) with bands*rows <= num_perm minimising (1-w)*FP area + w*FN area.

    All (bands, rows) pairs are scored at once on a trapezoid grid; ties go to the first pair in
    ascending (bands, rows) order, as in datasketch's _optimal_param.
    """
    pairs = np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)])
    bands, rows = pairs[:, :1].astype(np.float64), pairs[:, 1:].astype(np.float64)

    def area(lo: float, hi: float, miss: bool) -> np.ndarray:
        if hi <= lo:
            return np.zeros(len(pairs))
        x = np.linspace(lo, hi, _GRID)[None, :]
        y = 1.0 - (1.0 - x**rows) ** bands
        y = 1.0 - y if miss else y
        return ((y[:, 1:] + y[:, :-1]) * np.diff(x)).sum(axis=1) / 2

    err = (1.0 - fn_weight) * area(0.0, threshold, False) + fn_weight * area(threshold, 1.0, True)
    b, r = pairs[int(np.argmin(err))]
    return int(b), int(r)


def band_keys(
    sig: np.ndarray, rows_idx: np.ndarray | None, cols: range, mult: np.ndarray
) -> np.ndarray:
    """64-bit key per document of the band made of signature columns `cols`: uint64 [n].

    `sig` uint32 [N, num_perm]; `rows_idx` selects documents (None = all). One column at a time,
    so the transient memory is ~20 bytes per document. Equal bands give equal keys; unequal ones
    collide with probability ~2^-64 per pair, and every candidate is verified afterwards anyway.
    """
    n = sig.shape[0] if rows_idx is None else len(rows_idx)
    key = np.zeros(n, np.uint64)
    for k, c in enumerate(cols):  # a band has ~5-25 columns; each step is vectorised over docs
        col = sig[:, c] if rows_idx is None else sig[rows_idx, c]
        key += col.astype(np.uint64) * mult[k]
    key ^= key >> np.uint64(29)
    key *= np.uint64(0xBF58476D1CE4E5B9)
    key ^= key >> np.uint64(32)
    return key


def band_edges(keys: np.ndarray) -> np.ndarray:
    """Star edges within each bucket of equal keys: int64 [E, 2] of (first member, other member).

    Members are row indices into `keys`; a bucket's first member is its lowest index (stable
    sort). Temporaries are ~17 bytes per document plus O(members of buckets of size >= 2).
    """
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    member = np.flatnonzero(sk[1:] == sk[:-1]) + 1  # sorted positions not first in their bucket
    del sk
    if member.size == 0:
        return np.zeros((0, 2), np.int64)
    # runs of consecutive member positions share one head: the position just before the run
    run_start = np.ones(member.size, bool)
    run_start[1:] = member[1:] != member[:-1] + 1
    heads = member[run_start] - 1
    head_of = heads[np.cumsum(run_start) - 1]
    return np.stack([order[head_of], order[member]], axis=1).astype(np.int64)


# ---------------------------------------------------------------- signatures in part files


def sig_name(index: int) -> str:
    """File of part `index`'s signatures, transposed: uint32 [num_perm, docs of the part]."""
    return f"part-{index:05d}.sigT.npy"


def band_mult(seed: int, rows: int) -> np.ndarray:
    """Odd uint64 [rows]: the seeded multipliers that combine a band's rows into its key."""
    rng = np.random.default_rng([seed, 0x6C7368])
    return rng.integers(0, 2**64, size=rows, dtype=np.uint64) | np.uint64(1)


def band_bucket_rows(
    sig: np.ndarray,
    keep: np.ndarray,
    first_index: int,
    bands: int,
    rows: int,
    mult: np.ndarray,
    bits: int,
) -> tuple[np.ndarray, np.ndarray]:
    """One part's band keys for the shuffle by (band, key bucket): (uint64 [2, bands * m]: the
    band key and global index of each `keep` document, grouped by band, then by the key's top
    `bits`, in row order within a group; int64 [bands * 2^bits + 1]: the group offsets).
    `sig` uint32 [n, num_perm], `keep` bool [n]."""
    idx = np.flatnonzero(keep)
    groups = 1 << bits
    out = np.empty((2, bands * len(idx)), np.uint64)
    counts = np.zeros(bands * groups, np.int64)
    for b in range(bands):
        key = band_keys(sig, idx, range(b * rows, (b + 1) * rows), mult)
        bucket = key >> np.uint64(64 - bits) if bits else np.zeros(len(key), np.uint64)
        order = np.argsort(bucket, kind="stable")
        lo = b * len(idx)
        out[0, lo : lo + len(idx)] = key[order]
        out[1, lo : lo + len(idx)] = idx[order].astype(np.uint64) + np.uint64(first_index)
        counts[b * groups : (b + 1) * groups] = np.bincount(
            bucket.astype(np.int64), minlength=groups
        )
    return out, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def unique_columns(pairs: np.ndarray) -> np.ndarray:
    """Distinct columns of int64 [2, E], sorted by (row 0, row 1)."""
    if pairs.shape[1] == 0:
        return pairs
    order = np.lexsort((pairs[1], pairs[0]))
    p = pairs[:, order]
    new = np.ones(p.shape[1], bool)
    new[1:] = (p[0, 1:] != p[0, :-1]) | (p[1, 1:] != p[1, :-1])
    return p[:, new]
