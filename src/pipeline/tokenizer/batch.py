"""BPE on many pieces at once with numpy: the cold-cache path of `Tokenizer.encode_batch`.

All pieces' byte ids lie in one flat array. Each round, every unfinished piece merges its
lowest-rank pair (leftmost on ties) -- exactly what the one-piece loop in `bpe.py` does next --
so the ids are the same; only the order of work differs. A round costs a few numpy passes over
the unfinished pieces, and a piece leaves the arrays when it has no mergeable pair, so the work
is ~ sum(piece length x merges) in C instead of ~1 us of Python per merge.

Pair ranks come from an open-addressing hash table (numpy arrays, linear probing, load <= 1/4):
two or three vectorised gathers a lookup, ~4x faster than `searchsorted` on the sorted keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from operator import and_, getitem, ne, or_

import numpy as np

from pipeline.hashing import GOLDEN64
from pipeline.tokenizer.pretokenize import TAIL

NO_RANK = (1 << 31) - 1  # rank of a pair that is not a merge (above every real rank)
_NO_KEY = NO_RANK << 32
_LOW32 = (1 << 32) - 1
FEW = 256  # fewer unfinished pieces than this: the rest are finished in Python
# bytes; a shorter piece takes the O(n^2) list loop (one at a time) or bpe_many's rounds
# (which would be O(n^2) for long ones too), a longer one the heap path
SHORT_PIECE = 64


class PairRanks:
    """(left id, right id) -> merge rank, looked up for whole arrays of pairs at once."""

    def __init__(self, merges: Sequence[tuple[int, int]], merged_ids: Sequence[int]):
        ids = [i for m in merges for i in m]
        self.width = max([255, *ids, *merged_ids]) + 1  # key = left * width + right
        bits = max(4, (4 * max(len(merges), 1) - 1).bit_length())
        self.shift = np.uint64(64 - bits)
        size = 1 << bits
        self.mask = size - 1
        self.keys = np.full(size, -1, np.int64)
        self.ranks = np.full(size, NO_RANK, np.int64)
        pairs = np.array(merges, np.int64).reshape(-1, 2)
        want = pairs[:, 0] * self.width + pairs[:, 1]
        slots = self._home(want).tolist()
        keys, ranks, mask = self.keys, self.ranks, self.mask
        for r, (k, s) in enumerate(zip(want.tolist(), slots, strict=True)):
            while keys[s] != -1:
                s = (s + 1) & mask
            keys[s], ranks[s] = k, r
        self.merged = np.array(merged_ids, np.int64)
        self._byte_pairs: np.ndarray | None = None  # for the one byte_ids a tokenizer has

    def _home(self, key: np.ndarray) -> np.ndarray:
        h = key.view(np.uint64) * GOLDEN64
        h >>= self.shift
        return h.view(np.int64)

    def lookup(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """Rank of each (left[i], right[i]), NO_RANK where the pair is not a merge."""
        key = left.astype(np.int64)
        key *= self.width
        key += right
        slot = self._home(key)
        found = self.keys[slot]
        out = self.ranks[slot]  # NO_RANK in empty slots: right for hits and for misses
        clash = (found != key) & (found != -1)  # another key sits there: probe further
        if clash.any():
            at = np.flatnonzero(clash)
            key, slot = key[at], slot[at]
            while len(at):
                slot = (slot + 1) & self.mask
                found = self.keys[slot]
                out[at] = self.ranks[slot]
                more = (found != key) & (found != -1)
                at, key, slot = at[more], key[more], slot[more]
        return out

    def byte_pair_ranks(self, byte_ids: np.ndarray) -> np.ndarray:
        """Ranks of all 256 x 256 byte pairs, indexed by first byte * 256 + second byte."""
        if self._byte_pairs is None:
            ids = byte_ids.astype(np.int64)
            self._byte_pairs = self.lookup(np.repeat(ids, 256), np.tile(ids, 256))
        return self._byte_pairs


def bpe_many(
    raws: Sequence[bytes],
    table: PairRanks,
    byte_ids: np.ndarray,
    finish: Callable[[list[int]], list[int]],
) -> tuple[np.ndarray, np.ndarray]:
    """BPE of every piece in `raws` (UTF-8 bytes, each non-empty): (ids, counts), the ids of
    all pieces one after another in input order, and how many belong to each piece.

    `finish(ids)` completes the merges of one piece from any intermediate state; it takes
    over when fewer than FEW pieces are left, where a numpy round would cost more than the
    Python loop (the last of ~50 rounds handle a handful of long pieces)."""
    cnt = np.fromiter(map(len, raws), np.int64, len(raws))
    return bpe_flat(np.frombuffer(b"".join(raws), np.uint8), cnt, table, byte_ids, finish)


def bpe_flat(
    data: np.ndarray,
    cnt: np.ndarray,
    table: PairRanks,
    byte_ids: np.ndarray,
    finish: Callable[[list[int]], list[int]],
) -> tuple[np.ndarray, np.ndarray]:
    """bpe_many of pieces given as their UTF-8 bytes end to end (`data`, uint8) and each one's
    length in bytes (`cnt`, all > 0)."""
    n = len(cnt)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    raw = data.astype(np.int64)
    tok = byte_ids[raw].astype(np.int32)
    # key[j] = rank of the pair (tok[j], tok[j + 1]) << 32, NO_KEY at the end of a piece
    key = np.full(len(tok), _NO_KEY, np.int64)
    key[:-1] = table.byte_pair_ranks(byte_ids)[(raw[:-1] << 8) | raw[1:]] << 32
    key[np.cumsum(cnt) - 1] = _NO_KEY
    piece = np.arange(n)  # which input each unfinished piece is
    pos = np.arange(len(tok), dtype=np.int64)
    finished: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (pieces, counts, ids)
    while len(cnt):
        ends = np.cumsum(cnt)
        starts = ends - cnt
        if len(cnt) < FEW:
            flat = tok.tolist()
            done_ids = [
                finish(flat[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
            ]
            sizes = np.fromiter(map(len, done_ids), np.int64, len(done_ids))
            finished.append((piece, sizes, np.fromiter(chain.from_iterable(done_ids), np.int64)))
            break
        # min over each piece of (rank, position): the lowest rank, leftmost, in one pass
        best = np.minimum.reduceat(key | pos[: len(tok)], starts)
        done = best >= _NO_KEY
        if not done.any():
            keep = np.ones(len(tok), bool)
        else:  # finished pieces leave the arrays
            live = ~done
            keep = np.repeat(live, cnt)
            finished.append((piece[done], cnt[done], tok[~keep]))
            best, cnt, piece, starts, ends = (
                best[live],
                cnt[live],
                piece[live],
                starts[live],
                ends[live],
            )
            if not len(cnt):
                break
        at = best & _LOW32
        tok[at] = table.merged[best >> 32]
        keep[at + 1] = False
        key[at] = _NO_KEY
        inner = at[at + 2 < ends]  # a token follows the merged pair in its piece
        if len(inner):
            key[inner] = table.lookup(tok[inner], tok[inner + 2]) << 32
        before = at[at > starts] - 1  # a token precedes it
        if len(before):
            key[before] = table.lookup(tok[before], tok[before + 1]) << 32
        cnt = cnt - 1
        tok, key = tok[keep], key[keep]
    # put the pieces back in input order
    which = np.concatenate([f[0] for f in finished])
    sizes = np.concatenate([f[1] for f in finished])
    ids = np.concatenate([f[2] for f in finished])
    counts = np.zeros(n, np.int64)
    counts[which] = sizes
    offset = np.cumsum(counts) - counts  # where each piece's ids go
    shift = offset[which] - (np.cumsum(sizes) - sizes)  # destination - source, per piece
    flat = np.empty(len(ids), np.int64)
    flat[np.arange(len(ids)) + np.repeat(shift, sizes)] = ids
    return flat, counts


def split_chunks(
    todo: list[str], findall: Callable[[str], list[str]]
) -> tuple[np.ndarray, list[str], list[str]]:
    """The pieces of many chunks: (order, single, pieces). Chunks todo[order[:len(single)]]
    are one piece each (`single`); the others follow in order, each one's pieces in `pieces`
    followed by a "\n".

    A chunk that is `[ ]letters`, or whitespace (see COARSE), is one piece; `[ ]letters` +
    TAIL punctuation is two. The others (no whitespace inside) are joined with "\n" and split
    by one regex call: "\n" is a piece of its own next to any non-whitespace, and the pattern
    has no look-behind, so each chunk splits as it would alone (tested).
    """
    n = len(todo)
    # one leading space at most in a non-whitespace chunk; "".isalpha() is False
    words = map(str.isalpha, map(str.lstrip, todo, repeat(" ")))
    one = np.fromiter(map(or_, words, map(str.isspace, todo)), bool, n)
    single = list(compress(todo, one.tolist()))
    multi = list(compress(todo, (~one).tolist()))
    heads = list(map(str.rstrip, multi, repeat(TAIL)))
    alpha = map(str.isalpha, map(str.lstrip, heads, repeat(" ")))
    two = np.fromiter(map(and_, map(ne, heads, multi), alpha), bool, len(multi))
    heads = list(compress(heads, two.tolist()))
    pairs = list(compress(multi, two.tolist()))
    tails = map(getitem, pairs, map(slice, map(len, heads), repeat(None)))
    rest = list(compress(multi, (~two).tolist()))
    index = np.arange(n)
    order = np.concatenate([index[one], index[~one][two], index[~one][~two]])
    pieces = list(chain.from_iterable(zip(heads, tails, repeat("\n"), strict=False)))
    if rest:
        pieces += findall("\n".join(rest) + "\n")
    return order, single, pieces


def gather_runs(values: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """values[offsets[0]:offsets[0]+lengths[0]], then the next run, ... as one array."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return values[np.arange(total) + np.repeat(offsets - (ends - lengths), lengths)]
