"""Exact order statistics over values that stay in the parts: the driver never holds them.

A value is mapped to an unsigned 64-bit key that sorts like the value (`sort_key`); the
value at a rank (ties broken by global position: parts in order, rows in order) is found by
rounds of per-part histograms over the keys' next `bits` bits, narrowing to one bin each
round, until the candidates left are few enough (`gather`) to be returned and sorted. The
driver holds O(parts x queries x 2^bits) counts per round and at most `gather` keys: no term
grows with the number of values. The result equals a global sort's (tests compare them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BITS = 8  # bits resolved per histogram round: 256 counts per part and query
GATHER = 1 << 16  # candidates this few are returned as keys and sorted in the driver
_TOP = np.uint64(1 << 63)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


def sort_key(values: np.ndarray, descending: bool = False) -> np.ndarray:
    """uint64 keys whose order is the values' order (numpy's: NaN last, -0.0 == 0.0), or
    the reverse order with NaN still last (`descending`)."""
    x = np.asarray(values, np.float64) + 0.0  # -0.0 + 0.0 is +0.0: one key for both zeros
    u = x.view(np.uint64)
    key = np.where(u & _TOP, ~u, u | _TOP)
    if descending:
        key = ~key
    return np.where(np.isnan(x), _ALL, key)


def key_value(key: int, descending: bool = False) -> float:
    """The float64 of a `sort_key` key (not NaN); -0.0 comes back as 0.0."""
    k = np.uint64(key)
    if descending:
        k = ~k
    u = k ^ _TOP if k & _TOP else ~k
    return float(np.array([u], np.uint64).view(np.float64)[0])


@dataclass
class Query:
    """One rank to find: `rank` (0-based, ascending keys) among the keys of set `group`."""

    group: Any
    rank: int


@dataclass
class Selected:
    key: int  # the key at the rank
    below: np.ndarray  # int64 [parts]: keys < key in each part
    equal: np.ndarray  # int64 [parts]: keys == key in each part

    def locate(self, rank: int) -> tuple[int, int]:
        """(part, n): the rank-th key overall is the n-th (0-based) key == self.key of part."""
        n = rank - int(self.below.sum())
        cum = np.cumsum(self.equal)
        part = int(np.searchsorted(cum, n, side="right"))
        return part, n - int(cum[part - 1] if part else 0)


def part_answer(keys: np.ndarray, request: tuple) -> Any:
    """A part's answer to one request: ("hist", shift, prefix) -> counts [2^BITS] of bits
    [shift - BITS, shift) among keys whose bits from `shift` up equal prefix; ("gather",
    shift, prefix) -> those keys; ("count", key) -> (keys < key, keys == key)."""
    if request[0] == "count":
        k = np.uint64(request[1])
        return int((keys < k).sum()), int((keys == k).sum())
    kind, shift, prefix = request
    if shift < 64:
        keys = keys[(keys >> np.uint64(shift)) == np.uint64(prefix)]
    if kind == "gather":
        return keys
    low = np.uint64(shift - BITS)
    bins = ((keys >> low) & np.uint64((1 << BITS) - 1)).astype(np.int64)
    return np.bincount(bins, minlength=1 << BITS)


def answer_all(keys_of: Callable[[Any], np.ndarray], requests: dict) -> dict:
    """Task side: {query index: answer} for one part; `keys_of(group)` gives its keys."""
    cache: dict = {}
    out = {}
    for q, (group, request) in requests.items():
        if group not in cache:
            cache[group] = keys_of(group)
        out[q] = part_answer(cache[group], request)
    return out


def select(
    run_round: Callable[[dict], list[dict]],
    queries: Sequence[Query],
    sizes: dict,
    gather: int | None = None,
) -> list[Selected]:
    """Exact key at each query's rank. `run_round({q: (group, request)})` runs one map over
    the parts and returns each part's `answer_all`; `sizes[group]` = how many keys the group
    holds (every rank must be < it); `gather` defaults to GATHER."""
    gather = GATHER if gather is None else gather
    state = {}  # q -> [shift, prefix, rank within the candidates, candidates]
    for q, query in enumerate(queries):
        n = int(sizes[query.group])
        if not 0 <= query.rank < n:
            raise ValueError(f"rank {query.rank} outside [0, {n})")
        state[q] = [64, 0, query.rank, n]
    found: dict[int, int] = {}
    while state:
        for q in [q for q, st in state.items() if st[0] == 0]:  # every bit fixed: the key
            found[q] = state.pop(q)[1]
        requests, asked = {}, {}
        for q, (shift, prefix, _, cands) in state.items():
            kind = "gather" if cands <= gather else "hist"
            requests[q] = (queries[q].group, (kind, shift, prefix))
            asked.setdefault(requests[q], len(asked))  # queries in one bin share a request
        unique = {u: r for r, u in asked.items()}
        answers = run_round(unique) if unique else []
        gathered: dict[int, np.ndarray] = {}
        for q, (_, request) in requests.items():
            u = asked[requests[q]]
            shift, prefix, left, _ = state[q]
            if request[0] == "gather":
                if u not in gathered:
                    gathered[u] = np.sort(np.concatenate([a[u] for a in answers]))
                found[q] = int(gathered[u][left])
                del state[q]
                continue
            counts = np.sum([a[u] for a in answers], axis=0)
            cum = np.cumsum(counts)
            b = int(np.searchsorted(cum, left, side="right"))
            below = int(cum[b - 1]) if b else 0
            state[q] = [shift - BITS, (prefix << BITS) | b, left - below, int(counts[b])]
    requests = {q: (queries[q].group, ("count", found[q])) for q in range(len(queries))}
    answers = run_round(requests) if requests else []
    out = []
    for q in range(len(queries)):
        below = np.array([a[q][0] for a in answers], np.int64)
        equal = np.array([a[q][1] for a in answers], np.int64)
        out.append(Selected(found[q], below, equal))
    return out
