"""Byte-level BPE: 256 byte tokens, ranked merges, special tokens; encode and decode.

Encoding cuts out special tokens, splits the rest and looks chunks and pieces up in caches; a
miss runs BPE on the UTF-8 bytes, lowest-rank pair first, leftmost on ties (as HF and tiktoken).
`encode_batch` does the same for many texts at once, mostly in numpy (vector.py, batch.py).
Lone surrogates travel as their 3 `surrogatepass` bytes, so decode(encode(x)) == x for any str.
"""

from __future__ import annotations

import gc
import heapq
import os
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat

import numpy as np

from pipeline.tokenizer.batch import SHORT_PIECE, PairRanks, ids_of_chunks
from pipeline.tokenizer.pretokenize import (
    CHUNKABLE,
    COARSE,
    SPLIT_PATTERN,
    TAIL,
    compile_pattern,
    special_splitter,
)
from pipeline.tokenizer.vector import ChunkStore, HashMismatch, encode_plain

EOS = "<|endoftext|>"
PAD = "<|pad|>"
# The clean stage's PII placeholders: one token each, never split or merged.
PII_PLACEHOLDERS = ("<|email|>", "<|url|>", "<|ip|>", "<|phone|>", "<|key|>")
DEFAULT_SPECIALS = (EOS, PAD, *PII_PLACEHOLDERS)
MAX_CACHE_ENTRIES = 1 << 19  # per cache; ~135 B an entry (measured): ~70 MB at most
MAX_CACHED_PIECE = 256  # characters; longer pieces are rare and would bloat the cache
_INF = 1 << 62  # rank of a pair that is not a merge
BATCH_CHARS = 1 << 20  # encode_batch works on groups of texts of about this many characters
MIN_VECTOR = 512  # fewer new pieces than this in a group: the one-piece loop is faster


def _bpe_short(ids: list[int], ranks: dict[tuple[int, int], int], merged: list[int]) -> list[int]:
    """Merge the lowest-rank pair, leftmost first, until none is left; O(n) per merge.

    `rs[i]` is the rank of (ids[i], ids[i+1]), plus one unmergeable slot at the end so that
    `rs` is never empty; a merge only changes its two neighbours' ranks.
    """
    get = ranks.get
    rs = list(map(get, zip(ids, ids[1:], strict=False), repeat(_INF)))  # no Python loop
    rs.append(_INF)
    n = len(ids)
    while (r := min(rs)) != _INF:
        i = rs.index(r)
        ids[i] = t = merged[r]
        del ids[i + 1], rs[i]
        n -= 1
        if i + 1 < n:
            rs[i] = get((t, ids[i + 1]), _INF)
        if i:
            rs[i - 1] = get((ids[i - 1], t), _INF)
    return ids


def _bpe_long(ids: list[int], ranks: dict[tuple[int, int], int], merged: list[int]) -> list[int]:
    """Same result as _bpe_short in O(n log n): a heap of (rank, position) over a linked list."""
    n = len(ids)
    if n < 2:
        return ids
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap = [(r, i) for i in range(n - 1) if (r := ranks.get((ids[i], ids[i + 1]))) is not None]
    heapq.heapify(heap)
    while heap:
        r, i = heapq.heappop(heap)
        j = nxt[i] if ids[i] >= 0 else -1
        if j < 0 or ranks.get((ids[i], ids[j])) != r:
            continue  # stale: one side was merged away since this entry was pushed
        ids[i] = merged[r]
        ids[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            if (r2 := ranks.get((ids[i], ids[k]))) is not None:
                heapq.heappush(heap, (r2, i))
        p = prv[i]
        if p >= 0 and (r2 := ranks.get((ids[p], ids[i]))) is not None:
            heapq.heappush(heap, (r2, p))
    return [t for t in ids if t >= 0]


class _Cache(dict):
    """text -> token ids; a miss calls `fn` and stores (dict.__getitem__ stays in C on hits)."""

    def __init__(self, fn: Callable[[str], tuple[int, ...]]):
        super().__init__()
        self.fn = fn

    def __missing__(self, piece: str) -> tuple[int, ...]:
        ids = self.fn(piece)
        if len(piece) <= MAX_CACHED_PIECE:
            if len(self) >= MAX_CACHE_ENTRIES:
                self.clear()
            self[piece] = ids
        return ids


class _ChunkCache(dict):
    """chunk -> ids. A miss is resolved in this one frame (no nested cache or method calls) and
    its common shapes skip the regex: together ~9% off a cold pass (measured)."""

    def __init__(self, tok: Tokenizer):
        super().__init__()
        self.tok, self.pieces, self.findall = tok, tok._cache, tok._pat.findall

    def __missing__(self, chunk: str) -> tuple[int, ...]:
        pieces = self.pieces
        word = chunk[1:] if chunk[0] == " " else chunk
        if word.isalpha():  # one ` ?\p{L}+` piece (isalpha implies \p{L}: tested), no regex
            ids = pieces.get(chunk)
            if ids is None:
                tok = self.tok
                raw = chunk.encode("utf-8", "surrogatepass")
                ids = list(raw) if tok._identity else [tok.byte_ids[b] for b in raw]
                fn = _bpe_short if len(ids) <= SHORT_PIECE else _bpe_long
                ids = tuple(fn(ids, tok.ranks, tok.merged_ids))
                if len(chunk) <= MAX_CACHED_PIECE:
                    if len(pieces) >= MAX_CACHE_ENTRIES:
                        pieces.clear()
                    pieces[chunk] = ids
        elif (head := chunk.rstrip(TAIL)) != chunk and (
            head[1:] if head[:1] == " " else head
        ).isalpha():  # "[ ]word" + a run of TAIL: the two pieces, no regex
            ids = pieces[head] + pieces[chunk[len(head) :]]
        else:
            ids = tuple(chain.from_iterable(map(pieces.__getitem__, self.findall(chunk))))
        if len(chunk) <= MAX_CACHED_PIECE:
            if len(self) >= MAX_CACHE_ENTRIES:
                self.clear()
            self[chunk] = ids
        return ids


class Tokenizer:
    """Byte-level BPE. `vocab[id]` is the token's bytes; specials follow the merged tokens."""

    def __init__(
        self,
        merges: Sequence[tuple[int, int]],
        specials: Sequence[str] = DEFAULT_SPECIALS,
        pattern: str = SPLIT_PATTERN,
        vocab: Sequence[bytes] | None = None,
        byte_ids: Sequence[int] | None = None,
        merged_ids: Sequence[int] | None = None,
        special_ids: Sequence[int] | None = None,
    ):
        """Our own layout by default: byte b is id b, merge r is id 256 + r, then specials."""
        self.merges = [tuple(m) for m in merges]
        self.pattern = pattern
        self.byte_ids = list(byte_ids) if byte_ids is not None else list(range(256))
        base = 256 + len(self.merges)
        self.merged_ids = list(merged_ids) if merged_ids is not None else list(range(256, base))
        ids = (
            list(special_ids)
            if special_ids is not None
            else list(range(base, base + len(specials)))
        )
        self.specials = dict(zip(specials, ids, strict=False))
        self.ranks = {m: r for r, m in enumerate(self.merges)}
        if vocab is None:
            vocab = [bytes([b]) for b in range(256)]
            for a, b in self.merges:
                vocab.append(vocab[a] + vocab[b])
        self.vocab_size = max([len(vocab) - 1, *ids]) + 1
        self.id_bytes: list[bytes] = list(vocab) + [b""] * (self.vocab_size - len(vocab))
        for s, i in self.specials.items():
            self.id_bytes[i] = s.encode("utf-8")
        self._identity = self.byte_ids == list(range(256))
        self._pat = compile_pattern(pattern)
        self._splitter = special_splitter(self.specials)
        # text without these substrings holds no special token: "<|" alone for the defaults
        prefix = os.path.commonprefix(list(self.specials))
        self._hints = [prefix] if prefix else list(self.specials)
        self._cache = _Cache(self.encode_piece)  # piece -> ids
        self._table: PairRanks | None = None  # built on first use by encode_batch
        self._store = ChunkStore()  # encode_batch's chunk cache (vector.py)
        self._byte_array: np.ndarray | None = None
        # chunk -> ids (a chunk is one or a few pieces, see pretokenize.COARSE)
        self._chunks = _ChunkCache(self) if pattern in CHUNKABLE else None
        self._split, self._lookup = (
            (COARSE.findall, self._chunks.__getitem__)
            if self._chunks is not None
            else (self._pat.findall, self._cache.__getitem__)
        )

    @property
    def eos_id(self) -> int:
        return self.specials[EOS]

    def encode_piece(self, piece: str) -> tuple[int, ...]:
        """BPE on one pre-tokenized piece (no cache)."""
        raw = piece.encode("utf-8", "surrogatepass")
        ids = list(raw) if self._identity else [self.byte_ids[b] for b in raw]
        fn = _bpe_short if len(ids) <= SHORT_PIECE else _bpe_long
        return tuple(fn(ids, self.ranks, self.merged_ids))

    def encode_ordinary(self, text: str) -> list[int]:
        """Ids of `text` with special-token strings treated as plain text."""
        return list(chain.from_iterable(map(self._lookup, self._split(text))))

    def encode(self, text: str) -> list[int]:
        """Ids of `text`; occurrences of special-token strings become their single ids."""
        if self._splitter is None or not any(h in text for h in self._hints):
            return self.encode_ordinary(text)  # substring checks are far cheaper than a regex
        out: list[int] = []
        get, findall = self._lookup, self._split
        for i, seg in enumerate(self._splitter.split(text)):
            if i % 2:
                out.append(self.specials[seg])
            elif seg:
                out.extend(chain.from_iterable(map(get, findall(seg))))
        return out

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """`[encode(t) for t in texts]`, faster: texts are taken in groups of ~BATCH_CHARS;
        a group's chunks are found, hashed and looked up in numpy (vector.py), and the pieces
        no cache holds go through BPE together, vectorised (batch.py), not one by one."""
        if self._chunks is None:
            return [self.encode(t) for t in texts]
        out: list[list[int]] = []
        group: list[str] = []
        size = 0
        was_enabled = gc.isenabled()
        gc.disable()  # the caches gain ~10^5 tuples: collections would walk them again and again
        try:
            for text in texts:
                group.append(text)
                size += len(text)
                if size >= BATCH_CHARS:
                    out.extend(self._encode_mixed(group))
                    group, size = [], 0
            if group:
                out.extend(self._encode_mixed(group))
        finally:
            if was_enabled:
                gc.enable()
        return out

    def _encode_mixed(self, texts: list[str]) -> list[list[int]]:
        """Texts without special tokens the numpy way (vector.py), the others (and very long
        ones) through the chunk dictionary (_encode_group)."""
        hints, splitter = self._hints, self._splitter
        special = [  # and texts over BATCH_CHARS: numpy arrays of 8 bytes per character
            i
            for i, t in enumerate(texts)
            if len(t) > BATCH_CHARS or (splitter is not None and any(h in t for h in hints))
        ]
        if not special:
            return self._encode_plain_or_dict(texts)
        plain = sorted(set(range(len(texts))).difference(special))
        out: list[list[int]] = [[] for _ in texts]
        for rows, ids in (
            (plain, self._encode_plain_or_dict([texts[i] for i in plain])),
            (special, self._encode_group([texts[i] for i in special])),
        ):
            for i, doc in zip(rows, ids, strict=True):
                out[i] = doc
        return out

    def _encode_plain_or_dict(self, texts: list[str]) -> list[list[int]]:
        if not texts:
            return []
        if len(self._store) > MAX_CACHE_ENTRIES:
            self._store.clear()
        try:
            return encode_plain(texts, self._store, self._new_chunk_ids)
        except HashMismatch:  # two chunks share a 64-bit hash: never seen, but stay exact
            self._store.clear()
            return self._encode_group(texts)

    def _new_chunk_ids(self, new: list[str]) -> tuple[np.ndarray, ...]:
        """(order, flat, lo, hi) for chunks no cache holds: see batch.ids_of_chunks."""
        if len(new) >= MIN_VECTOR:
            if self._table is None:
                self._table = PairRanks(self.merges, self.merged_ids)
                self._byte_array = np.array(self.byte_ids, np.int64)
            return ids_of_chunks(
                new, self._pat.findall, self._table, self._byte_array, self._finish, self._chunk_ids
            )
        tuples = list(map(self._chunk_ids, new))
        hi = np.cumsum(np.fromiter(map(len, tuples), np.int64, len(new)))
        flat = np.fromiter(chain.from_iterable(tuples), np.int64, int(hi[-1]) if len(hi) else 0)
        return np.arange(len(new)), flat, hi - np.diff(hi, prepend=0), hi

    def _encode_group(self, texts: list[str]) -> list[list[int]]:
        """Texts through the chunk dictionary (the path of texts with special tokens, of very
        long ones, and the fallback of the numpy path)."""
        cache = self._chunks
        assert cache is not None
        split, splitter, hints, look = self._split, self._splitter, self._hints, cache.get
        out: list[list[int]] = []
        # texts with chunks not in the cache: (index, chunks, whether special ids are among them)
        pending: list[tuple[int, list[str | int], bool]] = []
        seen: set[str] = set()  # the chunks of pending texts
        for text in texts:
            if splitter is None or not any(h in text for h in hints):
                items: list[str | int] = split(text)
            else:  # chunks with special-token ids (ints) between them
                items = []
                for i, seg in enumerate(splitter.split(text)):
                    if i % 2:
                        items.append(self.specials[seg])
                    elif seg:
                        items.extend(split(seg))
                if not all(type(x) is str for x in items):
                    pending.append((len(out), items, True))
                    seen.update(x for x in items if type(x) is str)
                    out.append([])
                    continue
            try:  # a chunk not in the cache gives None, which chain cannot iterate
                out.append(list(chain.from_iterable(map(look, items))))
            except TypeError:
                pending.append((len(out), items, False))
                seen.update(items)
                out.append([])
        missing = seen.difference(cache)
        if missing:
            if len(cache) + len(missing) > MAX_CACHE_ENTRIES:
                cache.clear()
                missing = seen
            self._fill_chunks(missing)
        get = cache.__getitem__  # a chunk left out of the cache (too long) is made again
        for i, items, special in pending:
            if special:
                out[i] = [t for x in items for t in ((x,) if type(x) is int else get(x))]
            else:
                out[i] = list(chain.from_iterable(map(get, items)))
        return out

    def _fill_chunks(self, missing: set[str]) -> None:
        """Put the ids of `missing` chunks in the chunk dictionary (see batch.ids_of_chunks)."""
        todo = list(missing)
        if max(map(len, todo)) > MAX_CACHED_PIECE:  # not cached: made when looked up
            todo = [c for c in todo if len(c) <= MAX_CACHED_PIECE]
        if len(todo) < MIN_VECTOR:
            self._chunks.update(zip(todo, map(self._chunk_ids, todo), strict=True))
            return
        order, flat, lo, hi = self._new_chunk_ids(todo)
        spans = map(slice, lo.tolist(), hi.tolist())
        ids = tuple(flat.tolist())
        names = map(todo.__getitem__, order.tolist())
        self._chunks.update(zip(names, map(ids.__getitem__, spans), strict=True))

    def _finish(self, ids: list[int]) -> list[int]:
        return _bpe_short(ids, self.ranks, self.merged_ids)

    def _chunk_ids(self, chunk: str) -> tuple[int, ...]:
        return tuple(chain.from_iterable(map(self._cache.__getitem__, self._pat.findall(chunk))))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return b"".join(map(self.id_bytes.__getitem__, ids))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`. Byte runs that are not UTF-8 (an arbitrary id cut) become U+FFFD."""
        raw = self.decode_bytes(ids)
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace")
