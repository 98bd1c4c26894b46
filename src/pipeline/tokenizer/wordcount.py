"""Piece counts for BPE training, counted by chunk.

The pieces of a text are the pieces of its COARSE chunks (pretokenize.py: the chunk identity,
tested), so pieces are counted by counting chunks first: a group of texts becomes one array of
code points, chunk boundaries come from vector.chunk_starts (what `encode_batch` uses), and
the chunks, as spans of the group's UTF-8 bytes, form one Arrow binary array whose
`value_counts` (a hash table in C, exact: it compares bytes) counts them. Only the distinct
chunks become Python strings, and only they are split into pieces (batch.split_chunks: most
need no regex).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from itertools import chain, compress

import numpy as np
import pyarrow as pa
import regex

from pipeline.tokenizer.batch import split_chunks
from pipeline.tokenizer.pretokenize import CHUNKABLE, compile_pattern
from pipeline.tokenizer.vector import chunk_starts, code_points

GROUP_CHARS = 1 << 20  # texts are cut into chunks in groups of about this many characters
# the compiled forms of the patterns whose pieces never cross a COARSE chunk
_CHUNKABLE = {compile_pattern(p).pattern for p in CHUNKABLE}


def count_words(
    texts: Iterable[str], pattern: regex.Pattern, splitter: regex.Pattern | None
) -> Counter[str]:
    """How often each piece occurs in `texts`, special tokens excluded (they are never merged):
    `Counter(p for t in texts for seg in t without specials for p in pattern.findall(seg))`."""
    segments = _segments(texts, splitter)
    if pattern.pattern not in _CHUNKABLE:
        return plain_counts(segments, pattern)
    arrays: list[pa.Array] = []
    group: list[str] = []
    size = 0
    for seg in chain(segments, [""]):  # "" flushes the last group
        if seg:
            group.append(seg)
            size += len(seg)
        if group and (size >= GROUP_CHARS or not seg):
            arrays.append(_chunk_array(group))
            group, size = [], 0
    if not arrays:
        return Counter()
    counted = pa.chunked_array(arrays, pa.binary()).value_counts()
    names = [c.decode("utf-8", "surrogatepass") for c in counted.field("values").to_pylist()]
    return _pieces(names, counted.field("counts").to_pylist(), pattern.findall)


def plain_counts(segments: Iterable[str], pattern: regex.Pattern) -> Counter[str]:
    """The same counts, one regex `findall` per segment (any pattern)."""
    counts: Counter[str] = Counter()
    findall = pattern.findall
    for seg in segments:
        counts.update(findall(seg))
    return counts


def _segments(texts: Iterable[str], splitter: regex.Pattern | None) -> Iterable[str]:
    """The non-empty stretches of text between special tokens."""
    for text in texts:
        if not text:
            continue
        if splitter is None or splitter.search(text) is None:
            yield text
            continue
        for i, seg in enumerate(splitter.split(text)):
            if i % 2 == 0 and seg:
                yield seg


def _chunk_array(group: list[str]) -> pa.Array:
    """The COARSE chunks of `group` (non-empty texts, none shared by two texts) as an Arrow
    binary array over the group's UTF-8 bytes (lone surrogates: their 3-byte form)."""
    text = "".join(group)
    data = text.encode("utf-8", "surrogatepass")
    cp = code_points(text)
    sizes = np.fromiter(map(len, group), np.int64, len(group))
    doc_end = np.cumsum(sizes)
    starts = chunk_starts(cp, doc_end - sizes, doc_end)
    width = (cp >= 0x80).astype(np.int64)  # UTF-8 bytes of each code point, minus one
    width += cp >= 0x800
    width += cp >= 0x10000
    at = np.zeros(len(cp) + 1, np.int64)  # byte offset of each code point
    np.cumsum(width + 1, out=at[1:])
    offsets = np.append(at[starts], len(data))
    kind = pa.binary() if len(data) < (1 << 31) else pa.large_binary()
    offsets = offsets.astype(np.int32 if kind == pa.binary() else np.int64)
    return pa.Array.from_buffers(
        kind, len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def _pieces(chunks: list[str], num: list[int], findall: Callable[[str], list[str]]) -> Counter[str]:
    """Piece counts from distinct chunks and their counts: each chunk's pieces, times its count.
    The (piece, count) rows are summed by an Arrow group-by (a hash table in C)."""
    order, single, pieces = split_chunks(chunks, findall)
    n = np.array(num, np.int64)[order]
    end = np.fromiter(map("\n".__eq__, pieces), bool, len(pieces))  # each multi chunk's end
    chunk = len(single) + np.cumsum(end) - end  # the chunk each piece belongs to
    keep = ~end
    names = single + list(compress(pieces, keep.tolist()))
    weights = np.concatenate([n[: len(single)], n[chunk[keep]]])
    try:
        table = pa.table({"piece": pa.array(names, pa.string()), "n": weights})
    except (UnicodeEncodeError, pa.ArrowException):  # lone surrogates: not UTF-8
        counts: Counter[str] = Counter()
        for piece, k in zip(names, weights.tolist(), strict=True):
            counts[piece] += k
        return counts
    summed = table.group_by("piece").aggregate([("n", "sum")])
    return Counter(
        dict(
            zip(summed.column("piece").to_pylist(), summed.column("n_sum").to_pylist(), strict=True)
        )
    )
