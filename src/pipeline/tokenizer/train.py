"""BPE training: merges from word counts with incremental pair counts and a lazy max-heap.

Input is a {piece: count} mapping (see wordcount.count_words), so the cost of a merge is the
number of *distinct* words holding the pair, never a pass over the corpus. Ties: the higher
count wins, then the lexicographically smaller pair of byte strings (left token first), so the
result depends only on the counts, not on dict or worker order.

The words live end to end in numpy arrays (a symbol per position, linked to its neighbours by
`nxt`/`prv`; merged-away positions are unlinked), with, for each token, the positions where it
may still stand (checked when read, so a stale position costs nothing but a gather). A merge
finds the pair's positions from the shorter of its two tokens' lists, rewrites them, and
computes the exact change of every pair count around them in a few array operations; only the
pairs whose counts changed are touched in Python (the count dict and the heap). The changes
are summed by sorting when few, by `bincount` over (group, symbol) bins when many (a merge's
changes are four groups of pairs, each with one fixed side). Only pairs near the top count sit
in the heap: the rare ones (most new pairs) wait as bare keys until the top comes down to them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pipeline.tokenizer.pretokenize import chunk_piece

Pair = tuple[int, int]
_LOW32 = (1 << 32) - 1
Changes = tuple[list[int], list[int]]  # pair keys and their count changes
_NONE: tuple[Changes, Changes] = (([], []), ([], []))
_FLOOR_SHIFT = 8  # pairs below the top pair's count / 2**8 wait outside the heap at first
_FLOOR_STEP = 2  # and the floor falls by 2**2 each time the heap's top gets under it
_BIN_MIN = 4096  # from this many pair changes a merge sums them by bincount, not argsort


@dataclass
class TrainResult:
    merges: list[Pair]  # in rank order; merge r creates token id 256 + r
    vocab: list[bytes]  # id -> bytes for the 256 byte tokens and every merge
    stop_reason: str  # "vocab_size" | "min_frequency" | "no_pairs" (corpus too small)
    num_words: int  # distinct pieces trained on (after chunking)


def words_from_counts(
    counts: Mapping[str, int], max_word_bytes: int
) -> tuple[list[bytes], list[int], int]:
    """Each piece's UTF-8 bytes (longer ones cut into `max_word_bytes` chunks) with its count,
    and the number of distinct byte strings among them. Single-byte words are dropped: they
    hold no pair. Chunks of different pieces may repeat: pair counts just add up."""
    raws: list[bytes] = []
    ns: list[int] = []
    chunked = False
    for piece, n in counts.items():
        raw = piece.encode("utf-8", "surrogatepass")
        if len(raw) <= max_word_bytes:
            if len(raw) > 1:
                raws.append(raw)
                ns.append(n)
            continue
        chunked = True
        for chunk in chunk_piece(raw, max_word_bytes):
            if len(chunk) > 1:
                raws.append(chunk)
                ns.append(n)
    # distinct str pieces have distinct bytes; only chunks can repeat
    return raws, ns, len(set(raws)) if chunked else len(raws)


class _Words:
    """All words end to end: sym[p] is the token at position p, nxt/prv link the live positions
    of a word; END (= the number of positions) is a sentinel with symbol -1 that ends every
    word on both sides. A merged-away position gets symbol -2 and is never linked again."""

    def __init__(self, raws: list[bytes], ns: list[int]):
        lens = np.fromiter(map(len, raws), np.int64, len(raws))
        n = int(lens.sum())
        self.end = end = n
        idx = np.int64 if n >= (1 << 31) - 2 else np.int32
        self.sym = np.empty(n + 1, np.int32)
        self.sym[:n] = np.frombuffer(b"".join(raws), np.uint8)
        self.sym[n] = -1
        last = np.cumsum(lens) - 1
        self.nxt = np.arange(1, n + 2, dtype=idx)
        self.nxt[last] = end
        self.prv = np.arange(-1, n, dtype=idx)
        self.prv[last[:-1] + 1] = end
        if n:
            self.prv[0] = end
        self.count = np.zeros(n + 1, np.int64)  # the count of the word holding each position
        self.count[:n] = np.repeat(np.array(ns, np.int64), lens)
        # the symbols are bytes here: a stable sort of uint8 is a radix sort (~4x an int32's)
        order = np.argsort(self.sym[:n].astype(np.uint8), kind="stable").astype(idx)
        per = np.bincount(self.sym[:n], minlength=256)
        cut = np.cumsum(per)
        self.where: dict[int, np.ndarray] = {
            t: order[cut[t] - per[t] : cut[t]] for t in np.flatnonzero(per).tolist()
        }

    def initial_counts(self) -> dict[int, int]:
        """Every pair's count: the symbols are bytes, so a pair is a bin of 256 * 256."""
        starts = np.flatnonzero(self.nxt[: self.end] != self.end)
        pair = self.sym[starts] * 256 + self.sym[self.nxt[starts]]
        sums = np.bincount(pair, self.count[starts], minlength=256 * 256)  # exact below 2**53
        at = np.flatnonzero(sums)
        keys = (at >> 8) << 32 | (at & 255)
        return dict(zip(keys.tolist(), sums[at].astype(np.int64).tolist(), strict=True))

    def merge(self, a: int, b: int, new: int) -> tuple[Changes, Changes]:
        """Replace every (a, b), left to right in each word, by `new`; returns the change of
        each pair count other than (a, b)'s, which drops to zero, as (keys, deltas) lists, zeros
        left out: first the pairs that lose (none holds `new`), then those that gain (all hold
        `new`, so none existed before: a pair's count only falls once it exists)."""
        sym, nxt, prv, end = self.sym, self.nxt, self.prv, self.end
        pa, pb = self.where.get(a), self.where.get(b)
        if pa is None or pb is None:
            return _NONE
        if len(pa) <= len(pb):
            pa = self.where[a] = pa[sym[pa] == a]
            at = pa[sym[nxt[pa]] == b]
        else:
            pb = self.where[b] = pb[sym[pb] == b]
            left = prv[pb]
            at = left[sym[left] == a]
        if a == b and len(at) > 1:  # runs "a a a": take every other pair, from the left
            chained = np.zeros(len(at), bool)
            chained[1:] = nxt[at[:-1]] == at[1:]
            if chained.any():
                i = np.arange(len(at))
                run = np.maximum.accumulate(np.where(chained, 0, i))
                at = at[(i - run) % 2 == 0]
        if not len(at):
            return _NONE
        right = nxt[at]  # the b of each merge: unlinked below
        after = nxt[right]
        before = prv[at]
        count = self.count[at]
        # Around each merge (before, a) and (b, after) go, (before', new) and (new, after)
        # come. In "a b a b" the after of one merge is the next merge's a: its (b, a) is that
        # merge's (before, a) too, and its (new, new) that merge's (before', new), so pairs
        # on the after side are counted only when `after` is not merged itself.
        has_before = before != end
        s_after = sym[after]  # -1 at the end of a word
        sb = sym[before[has_before]].astype(np.int64)
        cb = count[has_before]
        sym[at] = new  # `new` is fresh: from here sym[p] == new exactly where p is in `at`
        has_after = (s_after >= 0) & (sym[after] != new)
        sa, ca = s_after[has_after].astype(np.int64), count[has_after]
        sym[right] = -2
        nxt[at] = after
        prv[after] = at  # prv[end] gets junk, never read
        nb = sym[prv[at[has_before]]].astype(np.int64)  # `new` where the merge before is chained
        self.where[new] = at
        weights = np.concatenate([-cb, -ca, cb, ca])
        if len(weights) < _BIN_MIN:
            keys = np.concatenate([sb << 32 | a, (b << 32) | sa, nb << 32 | new, (new << 32) | sa])
            return _summed(keys, weights)
        # the four groups in bins of `new + 1` symbols each: group g's pair has the fixed
        # symbol left[g] or right[g] (the other is -1) and the bin's symbol on the other side
        # (float64 sums: exact below 2**53). Two groups never hold the same pair but (b, a),
        # in groups 0 and 1: folded into group 0.
        size = new + 1
        x = np.concatenate([sb, sa + size, nb + 2 * size, sa + 3 * size])
        sums = np.bincount(x, weights, minlength=4 * size)
        sums[b] += sums[size + a]
        sums[size + a] = 0
        return _binned(sums, size, np.array([-1, b, -1, new]), np.array([a, -1, new, -1]))


def _binned(
    sums: np.ndarray, size: int, left: np.ndarray, right: np.ndarray
) -> tuple[Changes, Changes]:
    """`_summed`'s result from `sums`, the sums of bins g * size + s: bin g * size + s is group
    g's pair (left[g], s) where left[g] >= 0, else (s, right[g])."""
    at = np.flatnonzero(sums)
    g, s = np.divmod(at, size)
    lo, ro = left[g], right[g]
    keys = np.where(lo < 0, s, lo) << 32 | np.where(ro < 0, s, ro)
    return _signed(keys, sums[at].astype(np.int64))


def _signed(keys: np.ndarray, sums: np.ndarray) -> tuple[Changes, Changes]:
    """(keys, sums) of the negative sums, then of the positive ones, as lists."""
    up = sums > 0
    down = ~up
    return (
        (keys[down].tolist(), sums[down].tolist()),
        (keys[up].tolist(), sums[up].tolist()),
    )


def _summed(keys: np.ndarray, weights: np.ndarray) -> tuple[Changes, Changes]:
    """The sum of the weights of each key, zero sums left out, split by sign (`_signed`)."""
    if not len(keys):
        return _NONE
    order = np.argsort(keys, kind="stable")
    keys, weights = keys[order], weights[order]
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    sums = np.add.reduceat(weights, first)
    live = sums != 0
    return _signed(keys[first][live], sums[live])


def train_bpe(
    counts: Mapping[str, int], num_merges: int, min_frequency: int = 2, max_word_bytes: int = 256
) -> TrainResult:
    """Learn up to `num_merges` merges from piece counts; stops early if pairs run out."""
    raws, ns, num_words = words_from_counts(counts, max_word_bytes)
    vocab = [bytes([i]) for i in range(256)]
    words = _Words(raws, ns)
    pair_counts = words.initial_counts()
    # Max-heap via negated counts; stale entries are refreshed when popped (lazy deletion). A
    # key left << 32 | right orders as (left, right) does, so ties end as they did with tuples.
    # Pairs below `floor` wait as bare keys in `low` instead (most pairs are rare and never
    # reach the top); when the heap's top falls below `floor`, it drops and they are pushed.
    # Pairs below min_frequency are never merged: they are dropped. Invariant: every live pair
    # of count >= min_frequency has a heap entry whose count >= its true count, or has a key in
    # `low` and a true count < floor (counts only fall once a pair exists).
    lowest = max(min_frequency, 1)
    floor = max(lowest, max(pair_counts.values(), default=0) >> _FLOOR_SHIFT)
    heap: list[tuple[int, bytes, bytes, int]] = []
    low: list[int] = []
    for k, c in pair_counts.items():
        if c >= floor:
            heap.append((-c, vocab[k >> 32], vocab[k & _LOW32], k))
        elif c >= lowest:
            low.append(k)
    heapq.heapify(heap)
    merges: list[Pair] = []
    stop = "vocab_size"
    pop, push = heapq.heappop, heapq.heappush
    get = pair_counts.get
    while len(merges) < num_merges:
        if low and (not heap or -heap[0][0] < floor):
            floor = max(lowest, floor >> _FLOOR_STEP)
            waiting, low = low, []
            for k in waiting:
                c = get(k, 0)
                if c >= floor:
                    push(heap, (-c, vocab[k >> 32], vocab[k & _LOW32], k))
                elif c >= lowest:
                    low.append(k)
            continue
        if not heap:  # pairs left, if any, are all below min_frequency
            stop = "min_frequency" if pair_counts else "no_pairs"
            break
        negc, _, _, key = pop(heap)
        cur = get(key, 0)
        if -negc != cur:
            if cur >= floor:
                push(heap, (-cur, vocab[key >> 32], vocab[key & _LOW32], key))
            elif cur >= lowest:
                low.append(key)
            continue
        a, b = key >> 32, key & _LOW32
        new = len(vocab)
        vocab.append(vocab[a] + vocab[b])
        merges.append((a, b))
        (lose, delta), (gain, start) = words.merge(a, b, new)
        for k, d in zip(lose, delta, strict=True):
            cnt = get(k, 0) + d
            if cnt > 0:
                pair_counts[k] = cnt
            else:
                pair_counts.pop(k, None)
        pair_counts.update(zip(gain, start, strict=True))  # new pairs: none is there yet
        for k, cnt in zip(gain, start, strict=True):
            if cnt >= floor:
                push(heap, (-cnt, vocab[k >> 32], vocab[k & _LOW32], k))
            elif cnt >= lowest:
                low.append(k)
        pair_counts.pop(key, None)
    return TrainResult(merges, vocab, stop, num_words)
