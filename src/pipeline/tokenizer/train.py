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
pairs whose counts changed are touched in Python (the count dict and the heap).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pipeline.tokenizer.pretokenize import chunk_piece

Pair = tuple[int, int]
_LOW32 = (1 << 32) - 1


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
        self.mark = np.zeros(n + 1, bool)  # scratch, all False between merges
        order = np.argsort(self.sym[:n], kind="stable").astype(idx)
        per = np.bincount(self.sym[:n], minlength=256)
        cut = np.cumsum(per)
        self.where: dict[int, np.ndarray] = {
            t: order[cut[t] - per[t] : cut[t]] for t in np.flatnonzero(per).tolist()
        }

    def initial_counts(self) -> dict[int, int]:
        starts = np.flatnonzero(self.nxt[: self.end] != self.end)
        keys = (self.sym[starts].astype(np.int64) << 32) | self.sym[self.nxt[starts]]
        return _summed(keys, self.count[starts])

    def merge(self, a: int, b: int, new: int) -> dict[int, int]:
        """Replace every (a, b), left to right in each word, by `new`; returns the change of
        each pair count other than (a, b)'s, which drops to zero (key -> delta, zeros left
        out)."""
        sym, nxt, prv, end = self.sym, self.nxt, self.prv, self.end
        pa, pb = self.where.get(a), self.where.get(b)
        if pa is None or pb is None:
            return {}
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
            return {}
        right = nxt[at]  # the b of each merge: unlinked below
        after = nxt[right]
        before = prv[at]
        count = self.count[at]
        # Around each merge (before, a) and (b, after) go, (before', new) and (new, after)
        # come. In "a b a b" the after of one merge is the next merge's a: its (b, a) is that
        # merge's (before, a) too, and its (new, new) that merge's (before', new), so pairs
        # on the after side are counted only when `after` is not merged itself.
        has_before = before != end
        mark = self.mark
        mark[at] = True
        has_after = (after != end) & ~mark[after]
        mark[at] = False
        sb, sa = sym[before[has_before]].astype(np.int64), sym[after[has_after]].astype(np.int64)
        cb, ca = count[has_before], count[has_after]
        sym[at] = new
        sym[right] = -2
        nxt[at] = after
        prv[after] = at  # prv[end] gets junk, never read
        nb = sym[prv[at[has_before]]].astype(np.int64)  # `new` where the merge before is chained
        keys = np.concatenate([sb << 32 | a, (b << 32) | sa, nb << 32 | new, (new << 32) | sa])
        self.where[new] = at
        return _summed(keys, np.concatenate([-cb, -ca, cb, ca]))


def _summed(keys: np.ndarray, weights: np.ndarray) -> dict[int, int]:
    """{key: sum of its weights} over equal keys, zero sums left out."""
    if not len(keys):
        return {}
    order = np.argsort(keys, kind="stable")
    keys, weights = keys[order], weights[order]
    first = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    sums = np.add.reduceat(weights, first)
    live = sums != 0
    return dict(zip(keys[first][live].tolist(), sums[live].tolist(), strict=True))


def train_bpe(
    counts: Mapping[str, int], num_merges: int, min_frequency: int = 2, max_word_bytes: int = 256
) -> TrainResult:
    """Learn up to `num_merges` merges from piece counts; stops early if pairs run out."""
    raws, ns, num_words = words_from_counts(counts, max_word_bytes)
    vocab = [bytes([i]) for i in range(256)]
    words = _Words(raws, ns)
    pair_counts = words.initial_counts()
    # max-heap via negated counts; stale entries are refreshed when popped (lazy deletion).
    # Invariant: every live pair has an entry whose count >= its true count. A key
    # left << 32 | right orders as (left, right) does, so ties end as they did with tuples.
    heap = [(-c, vocab[k >> 32], vocab[k & _LOW32], k) for k, c in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    stop = "vocab_size"
    pop, push = heapq.heappop, heapq.heappush
    get = pair_counts.get
    while len(merges) < num_merges:
        if not heap:
            stop = "no_pairs"
            break
        negc, _, _, key = pop(heap)
        cur = get(key, 0)
        if -negc != cur:
            if cur > 0:
                push(heap, (-cur, vocab[key >> 32], vocab[key & _LOW32], key))
            continue
        if cur < min_frequency:
            stop = "min_frequency"
            break
        a, b = key >> 32, key & _LOW32
        new = len(vocab)
        vocab.append(vocab[a] + vocab[b])
        merges.append((a, b))
        for k, d in words.merge(a, b, new).items():
            cnt = get(k, 0) + d
            if cnt <= 0:
                pair_counts.pop(k, None)
                continue
            pair_counts[k] = cnt
            if d > 0:
                push(heap, (-cnt, vocab[k >> 32], vocab[k & _LOW32], k))
        pair_counts.pop(key, None)
    return TrainResult(merges, vocab, stop, num_words)
