"""encode_batch without a Python object per chunk: a group of texts becomes one array of code
points, and chunk boundaries, chunk hashes, cache lookups and the output ids are all numpy.
The chunks the cache lacks stay code points too: `chunk_ids` splits them into pieces
(pieces.piece_starts), turns the distinct pieces into UTF-8 and merges them all at once
(batch.bpe_flat, the vectorised BPE), with no Python string per chunk or piece.

Chunks are exactly pretokenize.COARSE's: whitespace runs split as the GPT-2 rules split them,
and each run of non-whitespace with the one plain space before it (see `chunk_starts`; a
Hypothesis test compares the two on random Unicode). A chunk is known by a 64-bit polynomial
hash of its code points; every lookup is then verified against the chunk's stored code points,
so a hash collision cannot change an id: the group falls back to the dictionary path instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from itertools import chain

import numpy as np

from pipeline.hashing import GOLDEN64, span_hashes
from pipeline.tokenizer.batch import SHORT_PIECE, PairRanks, bpe_flat, gather_runs
from pipeline.tokenizer.pieces import piece_starts
from pipeline.tokenizer.pretokenize import WHITESPACE

_WS = np.zeros(0x3002, bool)  # WHITESPACE's code points lie below U+3001; [0x3001] stays False
for _part in re.findall(r".-.|.", WHITESPACE):
    _WS[ord(_part[0]) : ord(_part[-1]) + 1] = True


class HashMismatch(Exception):
    """Two different chunks share a 64-bit hash (or a stored chunk does not match)."""


def code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)


def chunk_starts(cp: np.ndarray, doc_start: np.ndarray, doc_end: np.ndarray) -> np.ndarray:
    """Where each COARSE chunk starts; documents (non-empty, back to back) never share one.

    A whitespace run starts a chunk; so does its last character when the run is followed by
    non-whitespace and is longer than one (that last character is either a plain space, which
    starts the next word's chunk, or a chunk of its own); a non-whitespace run starts one unless
    a plain space precedes it (the space started it)."""
    n = len(cp)
    ws = _WS[np.minimum(cp, 0x3001)]
    first = np.zeros(n, bool)
    first[doc_start] = True
    last = np.zeros(n, bool)
    last[doc_end - 1] = True
    run_start = first.copy()
    run_start[1:] |= ws[1:] != ws[:-1]
    before_word = ws & ~last
    before_word[:-1] &= ~ws[1:]  # whitespace followed by non-whitespace, same document
    after_space = np.zeros(n, bool)
    after_space[1:] = cp[:-1] == 32
    after_space &= ~first
    starts = first | (ws & run_start) | (before_word & ~run_start)
    starts |= ~ws & run_start & ~after_space
    return np.flatnonzero(starts)


def chunk_hashes(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hash of each chunk cp[starts[k]:ends[k]] (never 0: 0 marks an empty slot)."""
    h = span_hashes(cp, starts, ends)  # sum of cp[j] * P^(j - start): position-free
    h ^= (ends - starts).astype(np.uint64) * GOLDEN64
    h *= GOLDEN64
    h ^= h >> np.uint64(29)
    h[h == 0] = 1
    return h


class _Grow:
    """A numpy array that grows by doubling."""

    def __init__(self, dtype: type) -> None:
        self.data = np.zeros(1024, dtype)
        self.size = 0

    def extend(self, values: np.ndarray) -> int:
        at = self.size
        need = at + len(values)
        if need > len(self.data):
            grown = np.zeros(max(need, 2 * len(self.data)), self.data.dtype)
            grown[:at] = self.data[:at]
            self.data = grown
        self.data[at:need] = values
        self.size = need
        return at


class ChunkStore:
    """chunk hash -> entry; an entry holds the chunk's ids and code points (for verification).

    Open addressing with linear probing over numpy arrays, load <= 1/4 (lookups of a cold pass
    0.12 s -> 0.09 s against load <= 1/2: fewer probe rounds), doubled when full."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.keys = np.zeros(1 << 16, np.uint64)
        self.vals = np.full(1 << 16, -1, np.int64)
        self.hashes = _Grow(np.uint64)  # per entry, to rehash on growth
        self.tok_off, self.tok_len = _Grow(np.int64), _Grow(np.int64)
        self.cp_off, self.cp_len = _Grow(np.int64), _Grow(np.int64)
        self.tokens, self.cps = _Grow(np.int64), _Grow(np.uint32)

    def __len__(self) -> int:
        return self.hashes.size

    def _home(self, h: np.ndarray) -> np.ndarray:
        bits = len(self.keys).bit_length() - 1
        return ((h * GOLDEN64) >> np.uint64(64 - bits)).astype(np.int64)

    def lookup(self, h: np.ndarray) -> np.ndarray:
        """Entry of each hash, -1 where absent."""
        mask = len(self.keys) - 1
        slot = self._home(h)
        out = np.full(len(h), -1, np.int64)
        todo = np.arange(len(h))
        while len(todo):
            k = self.keys[slot]
            hit = k == h
            out[todo[hit]] = self.vals[slot[hit]]
            more = ~hit & (k != 0)
            todo, h, slot = todo[more], h[more], (slot[more] + 1) & mask
        return out

    def _place(self, h: np.ndarray, entries: np.ndarray) -> None:
        """Insert distinct, absent hashes: rounds in which every claimant of a free slot writes
        its hash there, the one whose hash stayed takes it, and the others probe on."""
        mask = len(self.keys) - 1
        slot = self._home(h)
        todo = np.arange(len(h))
        while len(todo):
            s = slot[todo]
            free = self.keys[s] == 0
            claim, where = todo[free], s[free]
            self.keys[where] = h[claim]  # one write per slot lands (hashes are distinct)
            won = self.keys[where] == h[claim]
            self.vals[where[won]] = entries[claim[won]]
            free[free] = won
            todo = todo[~free]
            slot[todo] = (slot[todo] + 1) & mask

    def add(
        self,
        h: np.ndarray,
        ids: np.ndarray,
        id_len: np.ndarray,
        cps: np.ndarray,
        cp_len: np.ndarray,
    ) -> np.ndarray:
        """New entries (distinct hashes not in the store) with their ids and code points laid
        end to end; returns their entry numbers."""
        first = len(self)
        entries = np.arange(first, first + len(h))
        tok_at, cp_at = self.tokens.extend(ids), self.cps.extend(cps)
        self.tok_off.extend(tok_at + np.cumsum(id_len) - id_len)
        self.tok_len.extend(id_len)
        self.cp_off.extend(cp_at + np.cumsum(cp_len) - cp_len)
        self.cp_len.extend(cp_len)
        self.hashes.extend(h)
        if 4 * len(self) > len(self.keys):
            size = len(self.keys)
            while 4 * len(self) > size:
                size *= 2
            self.keys = np.zeros(size, np.uint64)
            self.vals = np.full(size, -1, np.int64)
            self._place(self.hashes.data[: len(self)], np.arange(len(self)))
        else:
            self._place(h, entries)
        return entries


def utf8(cp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, width): the UTF-8 bytes (uint8) of the code points, surrogates as their 3-byte
    `surrogatepass` form (Python's codecs: ~15x a numpy bit-twiddling), and the byte count of
    each code point."""
    text = cp.astype("<u4", copy=False).tobytes().decode("utf-32-le", "surrogatepass")
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    width = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    return data, width


def chunk_ids(
    cp: np.ndarray,
    size: np.ndarray,
    table: PairRanks,
    byte_ids: np.ndarray,
    finish: Callable[[list[int]], list[int]],
    redo: Callable[[str], Sequence[int]],
    digits: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Ids of distinct COARSE chunks laid end to end in `cp` (chunk k has size[k] > 0 code
    points): (flat, counts), chunk k's ids being the counts[k] after those of the chunks before
    it. No Python string is made: pieces come from pieces.piece_starts, are deduplicated by
    hash (verified: HashMismatch on a collision), turned into UTF-8 and merged by
    batch.bpe_flat. A chunk holding a piece over SHORT_PIECE bytes is made by `redo(chunk)`
    (the O(n log n) path)."""
    n = len(cp)
    cstart = np.cumsum(size) - size
    first = np.zeros(n, bool)
    first[cstart] = True
    ps = piece_starts(cp, first, digits)
    pe = np.empty_like(ps)
    pe[:-1], pe[-1] = ps[1:], n
    plen = pe - ps
    _, rep, inverse = np.unique(chunk_hashes(cp, ps, pe), return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(plen[rep][inverse], plen) or not np.array_equal(
        gather_runs(cp, ps[rep][inverse], plen), cp
    ):
        raise HashMismatch
    data, width = utf8(gather_runs(cp, ps[rep], plen[rep]))
    nbytes = np.add.reduceat(width, np.cumsum(plen[rep]) - plen[rep])  # per distinct piece
    long = nbytes > SHORT_PIECE
    if long.any():  # left out of the BPE arrays; their chunks are made by `redo` below
        data = data[np.repeat(~long, nbytes)]
    ids, counts = bpe_flat(data, nbytes[~long], table, byte_ids, finish)
    per = np.zeros(len(rep), np.int64)
    per[~long] = counts
    occ = per[inverse]  # ids of each piece occurrence, in order
    flat = gather_runs(ids, (np.cumsum(per) - per)[inverse], occ)
    out = np.add.reduceat(occ, np.searchsorted(ps, cstart))
    if long.any():
        again = np.unique(np.searchsorted(cstart, ps[long[inverse]], "right") - 1)
        text = cp.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
        extra = [
            redo(text[a:b])
            for a, b in zip(cstart[again].tolist(), (cstart + size)[again].tolist(), strict=True)
        ]
        more = np.fromiter(map(len, extra), np.int64, len(extra))
        at = np.cumsum(out) - out
        at[again] = len(flat) + np.cumsum(more) - more
        out[again] = more
        flat = gather_runs(
            np.concatenate([flat, np.fromiter(chain.from_iterable(extra), np.int64)]), at, out
        )
    return flat, out


def encode_plain(
    texts: list[str],
    store: ChunkStore,
    new_ids: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """Ids of texts without special tokens: chunks found, hashed, looked up and turned into
    ids in numpy; `new_ids(cp, size)` -> (flat, counts) makes the ids of the chunks the store
    lacks, given end to end as code points (chunk_ids), which are then stored. Returns (ids,
    counts): every text's ids one after another (int64) and how many each text has. Raises
    HashMismatch if a chunk's stored code points differ from the text's (a 64-bit hash
    collision)."""
    sizes = np.fromiter(map(len, texts), np.int64, len(texts))
    live = np.flatnonzero(sizes)
    if not len(live):
        return np.zeros(0, np.int64), np.zeros(len(texts), np.int64)
    cp = code_points("".join(texts))
    doc_end = np.cumsum(sizes)
    doc_start, doc_end = (doc_end - sizes)[live], doc_end[live]
    starts = chunk_starts(cp, doc_start, doc_end)
    ends = np.empty_like(starts)
    ends[:-1], ends[-1] = starts[1:], len(cp)
    size = ends - starts
    h = chunk_hashes(cp, starts, ends)
    entry = store.lookup(h)
    miss = np.flatnonzero(entry < 0)
    if len(miss):
        distinct, first, inverse = np.unique(h[miss], return_index=True, return_inverse=True)
        rep = miss[first]  # one occurrence of each new chunk
        chars = gather_runs(cp, starts[rep], size[rep])
        flat, counts = new_ids(chars, size[rep])
        made = store.add(distinct, flat, counts, chars, size[rep])
        entry[miss] = made[inverse.reshape(-1)]
    # every chunk is checked against the code points stored with its entry
    if not np.array_equal(store.cp_len.data[entry], size) or not np.array_equal(
        gather_runs(store.cps.data, store.cp_off.data[entry], size), cp
    ):
        raise HashMismatch
    count = store.tok_len.data[entry]
    ids = gather_runs(store.tokens.data, store.tok_off.data[entry], count)
    bounds = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(count, out=bounds[1:])
    counts = np.zeros(len(texts), np.int64)
    counts[live] = np.diff(bounds[np.append(np.searchsorted(starts, doc_start), len(starts))])
    return ids, counts
