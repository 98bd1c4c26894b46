"""BPE training: merges from word counts with incremental pair counts and a lazy max-heap.

Input is a {piece: count} mapping (see pretokenize.count_words), so the cost of a merge is the
number of *distinct* words holding the pair, never a pass over the corpus. Ties: the higher
count wins, then the lexicographically smaller pair of byte strings (left token first), so the
result depends only on the counts, not on dict or worker order.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.tokenizer.pretokenize import chunk_piece

Pair = tuple[int, int]


@dataclass
class TrainResult:
    merges: list[Pair]  # in rank order; merge r creates token id 256 + r
    vocab: list[bytes]  # id -> bytes for the 256 byte tokens and every merge
    stop_reason: str  # "vocab_size" | "min_frequency" | "no_pairs" (corpus too small)
    num_words: int  # distinct pieces trained on (after chunking)


def words_from_counts(
    counts: Mapping[str, int], max_word_bytes: int
) -> tuple[list[list[int]], list[int]]:
    """Distinct byte sequences (as int lists) and their counts; longer pieces are chunked.

    Single-byte words are dropped: they hold no pair. Sorted, so the order is canonical.
    """
    merged: dict[bytes, int] = defaultdict(int)
    for piece, n in counts.items():
        raw = piece.encode("utf-8", "surrogatepass")
        if len(raw) <= max_word_bytes:
            merged[raw] += n
        else:
            for chunk in chunk_piece(raw, max_word_bytes):
                merged[chunk] += n
    keys = sorted(k for k in merged if len(k) > 1)
    return [list(k) for k in keys], [merged[k] for k in keys]


def _initial_pairs(
    words: list[list[int]], counts: list[int]
) -> tuple[dict[Pair, int], dict[Pair, set[int]]]:
    pair_counts: dict[Pair, int] = defaultdict(int)
    where: dict[Pair, set[int]] = defaultdict(set)
    for wi, w in enumerate(words):
        c = counts[wi]
        for p in zip(w, w[1:], strict=False):
            pair_counts[p] += c
            where[p].add(wi)
    return pair_counts, where


def _merge_word(
    w: list[int], a: int, b: int, new: int, c: int, delta: dict[Pair, int], added: list[Pair]
) -> list[int] | None:
    """`w` with every left-to-right (a, b) replaced by `new`, or None if it holds no (a, b).

    Adds the pair-count changes (times the word's count c) to `delta`: around each merge the
    pairs (left, a) and (b, right) disappear and (left, new), (new, right) appear (the latter
    also go to `added`). Chained merges ("a b a b") correct themselves: the second merge's left
    is `new`, which undoes the (new, a) the first one added.
    """
    n = len(w)
    if n == 2:  # common: the whole word is the pair, no neighbours
        return [new] if w[0] == a and w[1] == b else None
    left_a = w.count(a)  # occurrences of a not yet looked at: index() below never raises
    out: list[int] = []
    i = 0
    found = False
    index = w.index
    while left_a:
        j = index(a, i)
        left_a -= 1
        if j + 1 < n and w[j + 1] == b:
            if a == b:
                left_a -= 1  # the b just consumed was an a too
            out.extend(w[i:j])
            if out:
                left = out[-1]
                delta[(left, a)] -= c
                delta[(left, new)] += c
                added.append((left, new))
            if j + 2 < n:
                right = w[j + 2]
                delta[(b, right)] -= c
                delta[(new, right)] += c
                added.append((new, right))
            out.append(new)
            i = j + 2
            found = True
        else:
            out.extend(w[i : j + 1])
            i = j + 1
    if not found:
        return None
    out.extend(w[i:])
    return out


def train_bpe(
    counts: Mapping[str, int], num_merges: int, min_frequency: int = 2, max_word_bytes: int = 256
) -> TrainResult:
    """Learn up to `num_merges` merges from piece counts; stops early if pairs run out."""
    words, wcounts = words_from_counts(counts, max_word_bytes)
    vocab = [bytes([i]) for i in range(256)]
    pair_counts, where = _initial_pairs(words, wcounts)
    # max-heap via negated counts; stale entries are refreshed when popped (lazy deletion).
    # Invariant: every live pair has an entry whose count >= its true count.
    heap = [(-c, vocab[a], vocab[b], a, b) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    stop = "vocab_size"
    while len(merges) < num_merges:
        if not heap:
            stop = "no_pairs"
            break
        negc, _, _, a, b = heapq.heappop(heap)
        cur = pair_counts.get((a, b), 0)
        if -negc != cur:
            if cur > 0:
                heapq.heappush(heap, (-cur, vocab[a], vocab[b], a, b))
            continue
        if cur < min_frequency:
            stop = "min_frequency"
            break
        new = len(vocab)
        vocab.append(vocab[a] + vocab[b])
        merges.append((a, b))
        _apply_merge(a, b, new, words, wcounts, pair_counts, where, heap, vocab)
    return TrainResult(merges, vocab, stop, len(words))


def _apply_merge(
    a: int,
    b: int,
    new: int,
    words: list[list[int]],
    wcounts: list[int],
    pair_counts: dict[Pair, int],
    where: dict[Pair, set[int]],
    heap: list,
    vocab: list[bytes],
) -> None:
    delta: dict[Pair, int] = defaultdict(int)
    added: list[Pair] = []
    for wi in where.pop((a, b), ()):  # order is irrelevant: deltas add up
        # None: a stale index, an earlier merge already consumed the pair in this word
        merged = _merge_word(words[wi], a, b, new, wcounts[wi], delta, added)
        if merged is not None:
            words[wi] = merged
            for p in added:
                where[p].add(wi)
        added.clear()
    pair_counts.pop((a, b), None)
    push = heapq.heappush
    for p, d in delta.items():
        if d == 0 or p == (a, b):
            continue
        cnt = pair_counts.get(p, 0) + d
        if cnt <= 0:
            pair_counts.pop(p, None)
            continue
        pair_counts[p] = cnt
        if d > 0:
            push(heap, (-cnt, vocab[p[0]], vocab[p[1]], p[0], p[1]))
