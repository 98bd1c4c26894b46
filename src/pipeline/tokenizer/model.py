"""The BPE model: merges, the id layout (byte ids, merged ids, special ids), each id's bytes, and
BPE of one piece (lowest-rank pair first, leftmost on ties, as HF and tiktoken). Pure data and
functions; caches and batch encoding live in bpe.Tokenizer and encoder.BatchEncoder.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

from pipeline.clean.pii import PLACEHOLDER
from pipeline.tokenizer.batch import SHORT_PIECE
from pipeline.tokenizer.pretokenize import SPLIT_PATTERN

EOS = "<|endoftext|>"
PAD = "<|pad|>"
# The clean stage's PII placeholders (defined in clean.pii): one token each, never split or
# merged. This order fixes their ids (2..6) in every tokenizer trained so far: keep it.
PII_PLACEHOLDERS = tuple(PLACEHOLDER[k] for k in ("email", "url", "ip", "phone", "key"))
DEFAULT_SPECIALS = (EOS, PAD, *PII_PLACEHOLDERS)
_INF = 1 << 62  # rank of a pair that is not a merge


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


@dataclass
class BpeModel:
    """A byte-level BPE vocabulary. `id_bytes[id]` is the token's bytes (specials: their UTF-8);
    merge r joins the pair merges[r] into id merged_ids[r]."""

    merges: list[tuple[int, int]]
    specials: dict[str, int]  # special token -> id
    pattern: str  # the pre-tokenizer's split regex
    byte_ids: list[int]  # id of byte b
    merged_ids: list[int]  # id of merge r
    id_bytes: list[bytes]
    vocab_size: int

    @classmethod
    def build(
        cls,
        merges: Sequence[tuple[int, int]],
        specials: Sequence[str] = DEFAULT_SPECIALS,
        pattern: str = SPLIT_PATTERN,
        vocab: Sequence[bytes] | None = None,
        byte_ids: Sequence[int] | None = None,
        merged_ids: Sequence[int] | None = None,
        special_ids: Sequence[int] | None = None,
    ) -> BpeModel:
        """Our own layout by default: byte b is id b, merge r is id 256 + r, then specials; a
        loaded tokenizer.json passes its own (vocab, byte_ids, merged_ids, special_ids)."""
        merges = [tuple(m) for m in merges]
        byte_ids = list(byte_ids) if byte_ids is not None else list(range(256))
        base = 256 + len(merges)
        merged_ids = list(merged_ids) if merged_ids is not None else list(range(256, base))
        ids = (
            list(special_ids)
            if special_ids is not None
            else list(range(base, base + len(specials)))
        )
        special_map = dict(zip(specials, ids, strict=False))
        if vocab is None:
            vocab = [bytes([b]) for b in range(256)]
            for a, b in merges:
                vocab.append(vocab[a] + vocab[b])
        vocab_size = max([len(vocab) - 1, *ids]) + 1
        id_bytes: list[bytes] = list(vocab) + [b""] * (vocab_size - len(vocab))
        for s, i in special_map.items():
            id_bytes[i] = s.encode("utf-8")
        return cls(merges, special_map, pattern, byte_ids, merged_ids, id_bytes, vocab_size)

    def __post_init__(self) -> None:
        self.ranks = {m: r for r, m in enumerate(self.merges)}  # pair -> merge rank
        self.identity = self.byte_ids == list(range(256))  # byte b is id b: no mapping needed

    @property
    def eos_id(self) -> int:
        return self.specials[EOS]

    def encode_piece(self, piece: str) -> tuple[int, ...]:
        """BPE on one pre-tokenized piece (no cache)."""
        raw = piece.encode("utf-8", "surrogatepass")
        ids = list(raw) if self.identity else [self.byte_ids[b] for b in raw]
        fn = _bpe_short if len(ids) <= SHORT_PIECE else _bpe_long
        return tuple(fn(ids, self.ranks, self.merged_ids))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return b"".join(map(self.id_bytes.__getitem__, ids))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`. Byte runs that are not UTF-8 (an arbitrary id cut) become U+FFFD."""
        raw = self.decode_bytes(ids)
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace")
