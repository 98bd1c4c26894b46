"""Batch encoding: `encode_batch` of many texts at once, mostly in numpy.

Texts are taken in groups of ~BATCH_CHARS; a group's chunks are found, hashed and looked up in
numpy (vector.py), and the pieces no cache holds go through BPE together, vectorised (batch.py).
A text over BATCH_CHARS is cut into segments where non-whitespace meets whitespace (no piece
crosses such a point). Texts with special tokens, very long ones that cannot be cut and hash
collisions take the tokenizer's chunk dictionary instead. The encoder's own caches (the chunk
store, the pair-rank table) live here; the model and the one-text caches live in the Tokenizer
it serves, which hands them over as `TokenizerParts` (public fields only: the encoder never
reaches into the Tokenizer).
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from pipeline.tokenizer.batch import PairRanks
from pipeline.tokenizer.pretokenize import DIGIT_RUN, WHITESPACE
from pipeline.tokenizer.vector import ChunkStore, HashMismatch, chunk_ids, code_points, encode_plain

MAX_CACHE_ENTRIES = 1 << 19  # per cache; ~135 B an entry (measured): ~70 MB at most
MAX_CACHED_PIECE = 256  # characters; longer pieces are rare and would bloat the cache
BATCH_CHARS = 1 << 20  # encode_batch works on groups of texts of about this many characters
# where a long text may be cut: between a non-whitespace and a whitespace character
_CUT = re.compile(rf"[^{WHITESPACE}](?=[{WHITESPACE}])")
MIN_VECTOR = 512  # fewer new pieces than this in a group: the one-piece loop is faster


@dataclass(frozen=True)
class TokenizerParts:
    """What the batch encoder reads of its Tokenizer (bpe.py), and nothing else."""

    encode: Callable[[str], list[int]]  # one text: the path without a chunk dictionary
    chunks: dict[str, tuple[int, ...]] | None  # chunk -> ids, filled on a miss; None: no chunks
    split: Callable[[str], list[str]]  # text -> chunks
    splitter: re.Pattern | None  # cuts out special-token strings; None: no specials
    hints: list[str]  # text without these substrings holds no special token
    specials: dict[str, int]  # special-token string -> id
    findall: Callable[[str], list[str]]  # chunk -> pieces (the model's pattern)
    pattern: str  # the model's split pattern (one of pretokenize.CHUNKABLE when chunks is set)
    chunk_ids: Callable[[str], tuple[int, ...]]  # ids of one chunk, through the piece cache
    finish: Callable[[list[int]], list[int]]  # BPE merges of a short id list
    merges: Sequence[tuple[int, int]]
    merged_ids: Sequence[int]
    byte_ids: Sequence[int]


class BatchEncoder:
    """`encode_batch` for one Tokenizer (which must split text into COARSE chunks)."""

    def __init__(self, tok: TokenizerParts):
        self.tok = tok
        self._table: PairRanks | None = None  # built on first use
        self._store = ChunkStore()  # chunk hash -> ids (vector.py)
        self._byte_array: np.ndarray | None = None
        self._id_objects: np.ndarray | None = None  # id -> the Python int (dtype object)

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """`[encode(t) for t in texts]`, faster: texts are taken in groups of ~BATCH_CHARS;
        a group's chunks are found, hashed and looked up in numpy (vector.py), and the pieces
        no cache holds go through BPE together, vectorised (batch.py), not one by one."""
        if self.tok.chunks is None:
            return [self.tok.encode(t) for t in texts]
        ids, counts = self.encode_batch_flat(texts)
        return _lists(self._objects()[ids], counts)

    def encode_batch_flat(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """encode_batch's ids as numpy, no Python int per id: (ids int64, counts int64), the
        ids of every text one after another and how many belong to each text. A text over
        BATCH_CHARS is cut into segments (_cut), encoded as texts and counted as one again."""
        if self.tok.chunks is None:
            return _flat([self.tok.encode(t) for t in texts])
        done: list[tuple[np.ndarray, np.ndarray]] = []  # (ids, counts) of each group
        segments_of: list[int] = []  # segments of each text
        group: list[str] = []
        size = 0
        was_enabled = gc.isenabled()
        gc.disable()  # the caches gain ~10^5 tuples: collections would walk them again and again
        try:
            for text in texts:
                segments = self._cut(text) if len(text) > BATCH_CHARS else (text,)
                segments_of.append(len(segments))
                for seg in segments:
                    group.append(seg)
                    size += len(seg)
                    if size >= BATCH_CHARS:
                        done.append(self._encode_mixed(group))
                        group, size = [], 0
            if group:
                done.append(self._encode_mixed(group))
        finally:
            if was_enabled:
                gc.enable()
        if not done:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        ids = np.concatenate([d[0] for d in done])
        counts = np.concatenate([d[1] for d in done])
        if len(counts) > len(segments_of):  # some texts were cut: their segments summed
            counts = np.add.reduceat(counts, np.cumsum(segments_of) - segments_of)
        return ids, counts

    def _objects(self) -> np.ndarray:
        """id -> the Python int, as an object array: a gather of references is ~2x faster than
        making an int for each id with tolist."""
        if self._id_objects is None:
            size = max([*self.tok.merged_ids, *self.tok.byte_ids, *self.tok.specials.values()])
            self._id_objects = np.array(list(range(size + 1)), dtype=object)
        return self._id_objects

    def _cut(self, text: str) -> Sequence[str]:
        """A text without special tokens in segments of about BATCH_CHARS / 2 or more, cut
        where non-whitespace meets whitespace: no chunk or piece crosses such a point (the
        pattern has no look-behind and a whitespace run starts a chunk), so the segments'
        ids, one after another, are the text's. Texts with special tokens stay whole."""
        if self.tok.splitter is not None and any(h in text for h in self.tok.hints):
            return (text,)
        segments, at = [], 0
        while len(text) - at > BATCH_CHARS:
            m = _CUT.search(text, at + BATCH_CHARS // 2)
            if m is None:
                break
            segments.append(text[at : m.end()])
            at = m.end()
        segments.append(text[at:])
        return segments

    def _encode_mixed(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, counts) of texts: those without special tokens the numpy way (vector.py), the
        others (and very long ones) through the chunk dictionary (_encode_group)."""
        hints, splitter = self.tok.hints, self.tok.splitter
        special = [  # and texts over BATCH_CHARS: numpy arrays of 8 bytes per character
            i
            for i, t in enumerate(texts)
            if len(t) > BATCH_CHARS or (splitter is not None and any(h in t for h in hints))
        ]
        if not special:
            return self._encode_plain_or_dict(texts)
        plain = sorted(set(range(len(texts))).difference(special))
        out: list[list[int] | np.ndarray] = [[] for _ in texts]
        if plain:
            ids, counts = self._encode_plain_or_dict([texts[i] for i in plain])
            for i, doc in zip(plain, np.split(ids, np.cumsum(counts)[:-1]), strict=True):
                out[i] = doc
        for i, doc in zip(special, self._encode_group([texts[i] for i in special]), strict=True):
            out[i] = doc
        return _flat(out)

    def _encode_plain_or_dict(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if not texts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(self._store) > MAX_CACHE_ENTRIES:
            self._store.clear()
        try:
            return encode_plain(texts, self._store, self._new_chunk_ids)
        except HashMismatch:  # two chunks share a 64-bit hash: never seen, but stay exact
            self._store.clear()
            return _flat(self._encode_group(texts))

    def _new_chunk_ids(self, cp: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(flat, counts): the ids of chunks no cache holds, given end to end as code points
        (see vector.chunk_ids)."""
        if len(size) >= MIN_VECTOR:
            if self._table is None:
                self._table = PairRanks(self.tok.merges, self.tok.merged_ids)
                self._byte_array = np.array(self.tok.byte_ids, np.int64)
            return chunk_ids(
                cp,
                size,
                self._table,
                self._byte_array,
                self.tok.finish,
                self.tok.chunk_ids,
                DIGIT_RUN[self.tok.pattern],
            )
        text = cp.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
        ends = np.cumsum(size).tolist()
        spans = map(slice, [0, *ends[:-1]], ends)
        tuples = list(map(self.tok.chunk_ids, map(text.__getitem__, spans)))
        counts = np.fromiter(map(len, tuples), np.int64, len(tuples))
        return np.fromiter(chain.from_iterable(tuples), np.int64, int(counts.sum())), counts

    def _encode_group(self, texts: list[str]) -> list[list[int]]:
        """Texts through the chunk dictionary (the path of texts with special tokens, of very
        long ones, and the fallback of the numpy path)."""
        tok, cache = self.tok, self.tok.chunks
        assert cache is not None
        split, splitter, hints, look = tok.split, tok.splitter, tok.hints, cache.get
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
                        items.append(tok.specials[seg])
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
        """Put the ids of `missing` chunks in the chunk dictionary (see vector.chunk_ids)."""
        todo = list(missing)
        if max(map(len, todo)) > MAX_CACHED_PIECE:  # not cached: made when looked up
            todo = [c for c in todo if len(c) <= MAX_CACHED_PIECE]
        if len(todo) >= MIN_VECTOR:
            size = np.fromiter(map(len, todo), np.int64, len(todo))
            try:
                flat, counts = self._new_chunk_ids(code_points("".join(todo)), size)
            except HashMismatch:  # two pieces share a 64-bit hash: made one by one instead
                pass
            else:
                spans = map(
                    slice, (np.cumsum(counts) - counts).tolist(), np.cumsum(counts).tolist()
                )
                ids = tuple(flat.tolist())
                self.tok.chunks.update(zip(todo, map(ids.__getitem__, spans), strict=True))
                return
        self.tok.chunks.update(zip(todo, map(self.tok.chunk_ids, todo), strict=True))


def _flat(docs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, counts) of id lists."""
    counts = np.fromiter(map(len, docs), np.int64, len(docs))
    return np.fromiter(chain.from_iterable(docs), np.int64, int(counts.sum())), counts


def _lists(ids: np.ndarray, counts: np.ndarray) -> list[list[int]]:
    """The id lists of (ids, counts); `ids` an object array of Python ints."""
    cut = np.cumsum(counts).tolist()
    return [ids[a:b].tolist() for a, b in zip([0, *cut[:-1]], cut, strict=True)]
