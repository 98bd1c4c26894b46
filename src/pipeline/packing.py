"""Pure packing algorithms on document lengths: naive, concat and best-fit-decreasing (BFD).

Each returns a `Packing`: documents cut into items (pieces), each item placed at an offset in a
sequence ("bin") of `seq_len` tokens. Nothing here reads or writes tokens; `gather` does that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Packing:
    """Items sorted by (bin, pos); all arrays int64 of shape [num_items] unless noted."""

    item_doc: np.ndarray  # index of the item's document in the input `lengths`
    item_offset: np.ndarray  # token offset of the item inside its document
    item_len: np.ndarray  # tokens in the item (1..seq_len)
    item_bin: np.ndarray  # sequence the item lands in
    item_pos: np.ndarray  # token offset of the item inside its sequence
    item_seg: np.ndarray  # 1-based rank of the item inside its sequence (its segment id)
    num_bins: int

    @property
    def num_tokens(self) -> int:
        return int(self.item_len.sum())

    def docs_split(self) -> int:
        """Documents spread over more than one item (each cut is a truncation for training)."""
        return (
            int((np.bincount(self.item_doc).astype(np.int64) > 1).sum())
            if len(self.item_doc)
            else 0
        )


def _excl_cumsum(x: np.ndarray) -> np.ndarray:
    out = np.zeros(len(x), np.int64)
    np.cumsum(x[:-1], out=out[1:])
    return out


def lower_bound(lengths: np.ndarray, seq_len: int) -> int:
    """ceil(total tokens / seq_len): no packing can use fewer sequences."""
    return -(-int(np.asarray(lengths, np.int64).sum()) // seq_len)


def chunk(lengths: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut each document into seq_len chunks plus a remainder -> (doc, offset, length) per chunk.

    A 5000-token document at seq_len 2048 gives chunks of 2048, 2048 and 904 tokens. Chunks come
    in document order; empty documents give none.
    """
    lengths = np.asarray(lengths, np.int64)
    if len(lengths) and 0 < lengths.min() and lengths.max() <= seq_len:  # common fast path
        return np.arange(len(lengths), dtype=np.int64), np.zeros(len(lengths), np.int64), lengths
    nchunks = np.maximum(-(-lengths // seq_len), 0)
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), nchunks)
    k = np.arange(len(doc), dtype=np.int64) - np.repeat(_excl_cumsum(nchunks), nchunks)
    offset = k * seq_len
    return doc, offset, np.minimum(seq_len, lengths[doc] - offset)


def decreasing_order(sizes: np.ndarray, capacity: int) -> np.ndarray:
    """Stable argsort by size, largest first; a radix sort when sizes fit 16 bits (3-4x faster)."""
    sizes = np.asarray(sizes, np.int64)
    if capacity < 1 << 16:
        return np.argsort((capacity - sizes).astype(np.uint16), kind="stable")
    return np.argsort(-sizes, kind="stable")


def _finish(doc, offset, length, bins, num_bins, order=None, starts=None) -> Packing:
    """Put items in `order` (None: already sorted by bin), derive positions and segment ids."""
    if order is not None:
        doc, offset, length, bins = doc[order], offset[order], length[order], bins[order]
    if starts is None:
        starts = np.searchsorted(bins, np.arange(num_bins))  # first item of each bin
    csum = np.cumsum(length) - length
    pos = csum - csum[starts][bins]
    seg = np.arange(len(bins), dtype=np.int64) - starts[bins] + 1
    return Packing(doc, offset, length, bins, pos, seg, int(num_bins))


def pack_naive(lengths: np.ndarray, seq_len: int) -> Packing:
    """One document per sequence, padded; a document longer than seq_len fills several."""
    doc, offset, length = chunk(lengths, seq_len)
    bins = np.arange(len(doc), dtype=np.int64)
    return _finish(doc, offset, length, bins, len(doc))


def pack_concat(lengths: np.ndarray, seq_len: int, order: np.ndarray | None = None) -> Packing:
    """Documents joined in `order` (default: as given) and cut every seq_len tokens."""
    lengths = np.asarray(lengths, np.int64)
    order = np.arange(len(lengths)) if order is None else np.asarray(order, np.int64)
    lens = lengths[order]
    start = _excl_cumsum(lens)
    end = start + lens
    keep = lens > 0
    order, start, end = order[keep], start[keep], end[keep]
    first = start // seq_len
    npieces = (end - 1) // seq_len - first + 1
    idx = np.repeat(np.arange(len(order)), npieces)
    bins = np.repeat(first, npieces) + (
        np.arange(len(idx)) - np.repeat(_excl_cumsum(npieces), npieces)
    )
    lo = np.maximum(start[idx], bins * seq_len)
    hi = np.minimum(end[idx], (bins + 1) * seq_len)
    num_bins = int(-(-int(end[-1]) // seq_len)) if len(end) else 0
    return _finish(order[idx], lo - start[idx], hi - lo, bins, num_bins)


def concat_docs_split(lengths: np.ndarray, seq_len: int, order: np.ndarray | None = None) -> int:
    """How many documents concat would cut at a sequence boundary (no items materialised)."""
    lens = np.asarray(lengths, np.int64)
    lens = lens if order is None else lens[np.asarray(order)]
    lens = lens[lens > 0]
    start = _excl_cumsum(lens)
    return int(((start + lens - 1) // seq_len != start // seq_len).sum())


class _Buckets:
    """Open bins grouped by remaining capacity: a stack of bin-id arrays per capacity."""

    def __init__(self, capacity: int):
        self.count = np.zeros(capacity + 1, np.int64)
        self.stacks: list[list[np.ndarray]] = [[] for _ in range(capacity + 1)]

    def smallest_at_least(self, size: int) -> int:
        """Smallest remaining capacity >= size held by some open bin, or -1."""
        hit = np.flatnonzero(self.count[size:])
        return int(hit[0]) + size if len(hit) else -1

    def push(self, cap: int, ids: np.ndarray) -> None:
        if cap > 0 and len(ids):  # a full bin (cap 0) can take nothing more: forget it
            self.stacks[cap].append(ids)
            self.count[cap] += len(ids)

    def pop(self, cap: int, m: int) -> np.ndarray:
        stack, got = self.stacks[cap], []
        need = m
        while need:
            top = stack[-1]
            take = min(need, len(top))
            got.append(top[len(top) - take :])
            if take == len(top):
                stack.pop()
            else:
                stack[-1] = top[: len(top) - take]
            need -= take
        self.count[cap] -= m
        return got[0] if len(got) == 1 else np.concatenate(got)


def bfd_bins(sizes: np.ndarray, capacity: int) -> tuple[np.ndarray, int, np.ndarray]:
    """Best-Fit Decreasing: each item, largest first, goes to the open bin with the least room
    that still fits it. Returns (bin of each item, number of bins, slot of each item: 0-based
    rank of its placement inside its bin), all int64.

    Exact BFD, vectorised over runs of equal size: bins with equal remaining capacity are
    interchangeable, and once an item of size s lands in the tightest bin (room c), that bin
    (room c - s) stays the tightest fit for the next item of size s until its room drops below s.
    So a run of k items of size s fills whole bins q = c // s items at a time: O(n log n) for the
    sort plus a few numpy calls per (distinct size, capacity visited).
    """
    sizes = np.asarray(sizes, np.int64)
    if len(sizes) and (sizes.min() < 1 or sizes.max() > capacity):
        raise ValueError(f"item sizes must be in [1, {capacity}]")
    if not len(sizes):
        return np.zeros(0, np.int64), 0, np.zeros(0, np.int64)
    order = decreasing_order(sizes, capacity)
    sorted_sizes = sizes[order]
    out = np.empty(len(sizes), np.int64)
    slot = np.empty(len(sizes), np.int64)
    nitems = np.zeros(len(sizes), np.int64)  # items placed so far per bin (<= n bins)
    buckets = _Buckets(capacity)
    next_id = 0
    bounds = np.flatnonzero(np.diff(sorted_sizes)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(sizes)], strict=True):
        s, items, done = int(sorted_sizes[lo]), order[lo:hi], 0
        while done < len(items):
            k = len(items) - done
            c = buckets.smallest_at_least(s)
            if c < 0:  # nothing open fits: open ceil(k / q) new bins, q items each
                q = capacity // s
                nb = -(-k // q)
                ids = np.arange(next_id, next_id + nb, dtype=np.int64)
                next_id += nb
                out[items[done:]] = np.repeat(ids, q)[:k]
                slot[items[done:]] = np.arange(k) % q
                r = k - (nb - 1) * q
                nitems[ids] = q
                nitems[ids[-1]] = r
                buckets.push(capacity - q * s, ids[:-1])
                buckets.push(capacity - r * s, ids[-1:])
                break
            q, avail = c // s, int(buckets.count[c])
            m = min(avail, k // q)
            if m:
                ids = buckets.pop(c, m)
                sel = items[done : done + m * q]
                out[sel] = np.repeat(ids, q)
                slot[sel] = np.repeat(nitems[ids], q) + np.arange(m * q) % q
                nitems[ids] += q
                buckets.push(c - q * s, ids)
                done += m * q
            r = len(items) - done
            if r and m < avail:  # fewer than q items left: they share one more bin
                ids = buckets.pop(c, 1)
                out[items[done:]] = ids[0]
                slot[items[done:]] = nitems[ids[0]] + np.arange(r)
                nitems[ids[0]] += r
                buckets.push(c - r * s, ids)
                done += r
    return out, next_id, slot


def pack_bfd(lengths: np.ndarray, seq_len: int) -> Packing:
    """Chunk documents longer than seq_len (the only cut), then Best-Fit-Decreasing the chunks.

    Inside a sequence items keep BFD placement order (longest first); bins are numbered in the
    order BFD opened them.
    """
    doc, offset, length = chunk(lengths, seq_len)
    bins, num_bins, slot = bfd_bins(length, seq_len)
    starts = _excl_cumsum(np.bincount(bins, minlength=num_bins))
    order = np.empty(len(bins), np.int64)
    order[starts[bins] + slot] = np.arange(len(bins))  # by bin, then placement: a counting sort
    return _finish(doc, offset, length, bins, num_bins, order, starts)
