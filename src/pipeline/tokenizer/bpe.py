"""The Tokenizer: a BpeModel (model.py) with the caches that make encoding fast.

Encoding cuts out special tokens, splits the rest and looks chunks and pieces up in caches; a
miss runs the model's BPE on the UTF-8 bytes. `encode_batch` hands many texts to the batch
encoder (encoder.py), mostly numpy. Lone surrogates travel as their 3 `surrogatepass` bytes, so
decode(encode(x)) == x for any str.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from itertools import chain

import numpy as np

from pipeline.tokenizer.batch import SHORT_PIECE
from pipeline.tokenizer.encoder import (
    MAX_CACHE_ENTRIES,
    MAX_CACHED_PIECE,
    BatchEncoder,
    TokenizerParts,
)
from pipeline.tokenizer.model import (
    DEFAULT_SPECIALS,
    EOS,
    PAD,
    PII_PLACEHOLDERS,
    BpeModel,
    _bpe_long,
    _bpe_short,
)
from pipeline.tokenizer.pretokenize import (
    CHUNKABLE,
    COARSE,
    SPLIT_PATTERN,
    TAIL,
    compile_pattern,
    special_splitter,
)

__all__ = [
    "DEFAULT_SPECIALS",
    "EOS",
    "PAD",
    "PII_PLACEHOLDERS",
    "BpeModel",
    "Tokenizer",
]


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
    """Byte-level BPE encoding and decoding of one BpeModel. `vocab[id]` is the token's bytes;
    specials follow the merged tokens. Model facts (merges, specials, id layout) are read-only
    aliases of `self.model`."""

    def __init__(
        self,
        merges: Sequence[tuple[int, int]],
        specials: Sequence[str] = DEFAULT_SPECIALS,
        pattern: str = SPLIT_PATTERN,
    ):
        """Our own layout (byte b is id b, merge r is id 256 + r, then specials); a tokenizer.json
        with its own layout comes in through `Tokenizer.from_model(BpeModel.build(...))`."""
        self._setup(BpeModel.build(merges, specials, pattern))

    @classmethod
    def from_model(cls, model: BpeModel) -> Tokenizer:
        tok = cls.__new__(cls)
        tok._setup(model)
        return tok

    def _setup(self, model: BpeModel) -> None:
        self.model = model
        # plain attributes, not properties: the encode loops read them per piece
        self.merges, self.specials, self.pattern = model.merges, model.specials, model.pattern
        self.byte_ids, self.merged_ids, self.ranks = model.byte_ids, model.merged_ids, model.ranks
        self.id_bytes, self.vocab_size = model.id_bytes, model.vocab_size
        self._identity = model.identity
        self._pat = compile_pattern(model.pattern)
        self._splitter = special_splitter(self.specials)
        # text without these substrings holds no special token: "<|" alone for the defaults
        prefix = os.path.commonprefix(list(self.specials))
        self._hints = [prefix] if prefix else list(self.specials)
        self._cache = _Cache(model.encode_piece)  # piece -> ids
        # chunk -> ids (a chunk is one or a few pieces, see pretokenize.COARSE)
        self._chunks = _ChunkCache(self) if model.pattern in CHUNKABLE else None
        self._split, self._lookup = (
            (COARSE.findall, self._chunks.__getitem__)
            if self._chunks is not None
            else (self._pat.findall, self._cache.__getitem__)
        )
        parts = TokenizerParts(
            encode=self.encode,
            chunks=self._chunks,
            split=self._split,
            splitter=self._splitter,
            hints=self._hints,
            specials=self.specials,
            findall=self._pat.findall,
            pattern=model.pattern,
            chunk_ids=self._chunk_ids,
            finish=self._finish,
            merges=self.merges,
            merged_ids=self.merged_ids,
            byte_ids=self.byte_ids,
        )
        self._batch = BatchEncoder(parts)  # encode_batch's own caches

    @property
    def eos_id(self) -> int:
        return self.model.eos_id

    def encode_piece(self, piece: str) -> tuple[int, ...]:
        """BPE on one pre-tokenized piece (no cache)."""
        return self.model.encode_piece(piece)

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
        """`[encode(t) for t in texts]`, faster: see encoder.BatchEncoder."""
        return self._batch.encode_batch(texts)

    def encode_batch_flat(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """encode_batch as numpy, no Python int per id: (ids, counts), int64, the ids of all
        texts one after another and how many belong to each."""
        return self._batch.encode_batch_flat(texts)

    def _finish(self, ids: list[int]) -> list[int]:
        return _bpe_short(ids, self.ranks, self.merged_ids)

    def _chunk_ids(self, chunk: str) -> tuple[int, ...]:
        return tuple(chain.from_iterable(map(self._cache.__getitem__, self._pat.findall(chunk))))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return self.model.decode_bytes(ids)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`. Byte runs that are not UTF-8 (an arbitrary id cut) become U+FFFD."""
        return self.model.decode(ids)
