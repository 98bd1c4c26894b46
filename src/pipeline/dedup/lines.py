"""Cross-document line (or paragraph) dedup, as dolma's paragraph dedup and CCNet's line dedup:
a unit seen in at least `min_docs` documents stays only in the first of them, by a seeded order.

Pure functions on in-memory texts and arrays; the stage (pipeline.stages.line_dedup) runs them as
a partitioned hash pass: per part, (unit hash, document key) rows sorted by hash; per hash
partition, the hashes in >= min_docs documents and their first document; per part again, the
units to remove. A unit is a line (split on "\\n") or a paragraph (split on blank lines); its
key is a 64-bit hash of its UTF-8 bytes with surrounding whitespace stripped, computed for all
units of a part at once in numpy (span_hashes: no Python call per line). Lines are split,
stripped and rejoined by Arrow's C++ kernels (arrow_lines, arrow_cut_lines); an input held in
memory is counted in one pass without a sort (dense_ids, unit_removals). Blank units are never
removed.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.permute import mix64, splitmix64

UNITS = ("line", "paragraph")
PARAGRAPH_SEP = re.compile(r"(\n(?:[ \t]*\n)+)")  # a blank line (or several) between paragraphs
PARAGRAPH_SEP_BYTES = re.compile(PARAGRAPH_SEP.pattern.encode())  # the same, on UTF-8 bytes


def split_units(text: str, unit: str) -> list[str]:
    """The pieces of `text`: for lines, the lines; for paragraphs, paragraphs at even and their
    separators at odd positions. `join_units(split_units(t, u), u) == t`."""
    return text.split("\n") if unit == "line" else PARAGRAPH_SEP.split(text)


def join_units(pieces: list[str], unit: str) -> str:
    return "\n".join(pieces) if unit == "line" else "".join(pieces)


def _units(pieces: list[str], unit: str) -> list[str]:
    return pieces if unit == "line" else pieces[0::2]


def unit_hashes(
    data: np.ndarray, offsets: np.ndarray, unit: str, min_chars: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate unit (stripped, at least max(1, min_chars) characters) of the documents
    data[offsets[d]:offsets[d+1]] (UTF-8 uint8, offsets int64 [n+1]: an Arrow string column's
    buffers), in document then unit order: (hash uint64 [m], its index among its document's
    units int32 [m], units per document int64 [n])."""
    return spans_hashes(data, unit_spans(data, offsets, unit), min_chars)


def spans_hashes(
    data: np.ndarray, spans: tuple[np.ndarray, np.ndarray, np.ndarray], min_chars: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """unit_hashes from unit_spans' (start, end, per_doc) of the documents in `data`."""
    start, end, per_doc = spans
    start, end = strip_spans(data, start, end)
    floor = max(1, min_chars)
    ok = end > start if floor == 1 else span_chars(data, start, end) >= floor
    first = np.cumsum(per_doc) - per_doc
    where = (np.arange(len(start)) - np.repeat(first, per_doc)).astype(np.int32)
    doc_of = np.repeat(np.arange(len(per_doc)), per_doc)
    counts = np.bincount(doc_of[ok], minlength=len(per_doc)).astype(np.int64)
    return span_hashes(data, start[ok], end[ok]), where[ok], counts


def utf8_buffers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64 [n+1]) of `texts`, as an Arrow string column holds them."""
    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    return np.frombuffer(b"".join(raw), np.uint8), offsets


def doc_keys(first: int, n: int, seed: int) -> np.ndarray:
    """The seeded order key of global documents first..first+n-1: uint64 [n], distinct (x ->
    mix64(x + s) is a bijection of uint64), so 'the first document' is never a tie."""
    salt = splitmix64(np.array([seed], np.uint64))[0]
    with np.errstate(over="ignore"):
        return mix64(np.arange(first, first + n, dtype=np.uint64) + salt, inplace=True)


def part_rows(hashes: np.ndarray, counts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """One part's (hash, document key) rows, each pair once, sorted by hash: uint64 [2, k]. A
    unit repeated inside one document counts once for that document. (One stable sort by
    hash: units come in document order, so a document's repeats of a hash end up adjacent.)"""
    doc_of = np.repeat(np.arange(len(counts)), counts)
    order = np.argsort(hashes, kind="stable")
    h, d = hashes[order], doc_of[order]
    new = np.ones(len(h), bool)
    new[1:] = (h[1:] != h[:-1]) | (d[1:] != d[:-1])
    return np.stack([h[new], keys[d[new]]]) if len(h) else np.zeros((2, 0), np.uint64)


def partition_bits(num_rows: int, rows_per_partition: int) -> int:
    """log2 of the number of hash partitions: ~`rows_per_partition` rows each, at most 2^12."""
    need = max(1, -(-num_rows // rows_per_partition))
    return min(12, max(0, (need - 1).bit_length()))


def partition_range(p: int, bits: int) -> tuple[int, int]:
    """Hash values [lo, hi) of partition `p` (the top `bits` bits); hi may be 2^64."""
    shift = 64 - bits
    return p << shift, (p + 1) << shift


def slice_partition(rows: np.ndarray, p: int, bits: int) -> np.ndarray:
    """The columns of sorted rows uint64 [2, k] (a memmap is fine) in partition `p`."""
    lo, hi = partition_range(p, bits)
    a = int(np.searchsorted(rows[0], np.uint64(lo)))
    b = rows.shape[1] if hi >= 1 << 64 else int(np.searchsorted(rows[0], np.uint64(hi)))
    return np.array(rows[:, a:b])


def repeated(rows: np.ndarray, min_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """For one partition's rows uint64 [2, k] (from every part; each (hash, key) pair once):
    the hashes in at least `min_docs` documents with their first document's (smallest) key,
    uint64 [2, r] sorted by hash, and their document counts int64 [r]."""
    order = np.argsort(rows[0], kind="stable")  # runs sorted per part: a merge, mostly
    h, k = rows[0][order], rows[1][order]
    new = np.ones(len(h), bool)
    new[1:] = h[1:] != h[:-1]
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(h)))
    keep = counts >= min_docs
    if not keep.any():
        return np.zeros((2, 0), np.uint64), counts[keep]
    first = np.minimum.reduceat(k, starts)
    return np.stack([h[starts[keep]], first[keep]]), counts[keep]


def removable(hashes: np.ndarray, unit_keys: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """bool [m]: which candidate units (hashes uint64 [m], their document's key uint64 [m]) to
    remove: their hash is in `rep` ([2, r]: hash, first key, sorted by hash; a memmap is fine)
    and their document is not that first one."""
    if rep.shape[1] == 0 or len(hashes) == 0:
        return np.zeros(len(hashes), bool)
    pos = np.minimum(np.searchsorted(rep[0], hashes), rep.shape[1] - 1)
    hit = np.asarray(rep[0][pos]) == hashes
    return hit & (np.asarray(rep[1][pos]) != unit_keys)


def dense_ids(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Arrow's hash table over `values` (strings or uint64 hashes; the chunks of a chunked
    array share one dictionary): (each value's id int64 [m], in first-occurrence order, the
    distinct values)."""
    enc = pc.dictionary_encode(values)
    chunks = enc.chunks if isinstance(enc, pa.ChunkedArray) else [enc]
    if not chunks:
        return np.zeros(0, np.int64), pa.array([], values.type)
    ids = [np.asarray(c.indices.to_numpy(zero_copy_only=False), np.int64) for c in chunks]
    return np.concatenate(ids), chunks[0].dictionary


def unit_removals(
    ids: np.ndarray, distinct: int, unit_keys: np.ndarray, doc: np.ndarray, min_docs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """part_rows, repeated and removable in one pass over every candidate unit of an input held
    in memory, without a sort: each unit's key as a dense id (int64 [m], below `distinct`:
    dense_ids), its document's key uint64 [m] and global index int64 [m] (below 2^32).
    Returns which units to remove (bool [m]), the ids in >= `min_docs` documents (int64 [r],
    ascending) and their document counts (int64 [r]). The first and last document per id
    single out the units whose key is in two documents or more; among those only, Arrow's hash
    table finds the distinct (id, document) pairs and a minimum per id the first key."""
    if len(ids) == 0:
        return np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo = np.full(distinct, np.iinfo(np.int64).max, np.int64)
    hi = np.full(distinct, -1, np.int64)
    np.minimum.at(lo, ids, doc)
    np.maximum.at(hi, ids, doc)
    sub = np.flatnonzero((lo != hi)[ids])  # the units whose key is in >= 2 documents (few)
    pairs = pc.unique(_ints(ids[sub] << 32 | doc[sub].astype(np.int64)))
    docs = np.bincount(pairs.to_numpy(zero_copy_only=False) >> 32, minlength=distinct)
    first = np.full(distinct, np.iinfo(np.uint64).max, np.uint64)
    np.minimum.at(first, ids[sub], unit_keys[sub])
    rep = docs >= min_docs
    drop = np.zeros(len(ids), bool)
    drop[sub] = rep[ids[sub]] & (first[ids[sub]] != unit_keys[sub])
    at = np.flatnonzero(rep)
    return drop, at, docs[at].astype(np.int64)


def remove_units(text: str, unit: str, drop: list[int]) -> tuple[str, int]:
    """`text` without its units at indices `drop` (sorted, from unit_hashes); returns the new
    text and the removed units' UTF-8 bytes. Kept paragraphs keep the separator that preceded
    each in the original."""
    pieces = split_units(text, unit)
    if unit == "line":
        nbytes = sum(len(pieces[i].encode("utf-8", "surrogatepass")) for i in drop)
        for i in reversed(drop):
            del pieces[i]
        return "\n".join(pieces), nbytes
    nbytes = sum(len(pieces[2 * i].encode("utf-8", "surrogatepass")) for i in drop)
    gone = set(drop)
    out: list[str] = []
    for i in range(0, len(pieces), 2):
        if i // 2 not in gone:
            if out:
                out.append(pieces[i - 1])
            out.append(pieces[i])
    return "".join(out), nbytes


# ---------------------------------------------------------------- vectorised unit keys

# Python's str.isspace() set: ASCII bytes, and the UTF-8 forms of the others (2 or 3 bytes)
_ASCII_WS = np.zeros(256, bool)
_ASCII_WS[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
_WIDE_WS = [
    chr(c).encode()
    for c in (0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
]
_LEAD = np.zeros(1 << 16, bool)  # (first, second) bytes that may start wide whitespace
_LEAD[[w[0] << 8 | w[1] for w in _WIDE_WS]] = True
_LAST = np.zeros(1 << 16, bool)  # (second last, last) bytes that may end it
_LAST[[w[-2] << 8 | w[-1] for w in _WIDE_WS]] = True
_BASE = 0x9E3779B97F4A7C15 | 1  # odd: invertible mod 2^64
_BASE_INV = pow(_BASE, -1, 1 << 64)
_LEN_MUL = np.uint64(0xD6E8FEB86659FD93)
CHUNK_BYTES = 1 << 22  # text bytes hashed per pass: ~7 uint64 arrays of this length (~230 MB)


def unit_spans(
    data: np.ndarray, offsets: np.ndarray, unit: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte spans of every unit of the documents data[offsets[d]:offsets[d+1]] (UTF-8 uint8,
    offsets int64 [n+1]), unstripped, in document then unit order: (start int64 [u], end int64
    [u], units per document int64 [n]). The same units as split_units."""
    n = len(offsets) - 1
    if unit == "line":
        lo, hi = int(offsets[0]), int(offsets[-1])
        nl = np.flatnonzero(data[lo:hi] == 10).astype(np.int64) + lo
        per_doc = np.diff(np.searchsorted(nl, offsets)) + 1
        # a newline ends a line and starts the next; the document's ends bound the others
        start = np.sort(np.concatenate([offsets[:-1], nl + 1]), kind="stable")
        end = np.sort(np.concatenate([nl, offsets[1:]]), kind="stable")
        return start, end, per_doc.astype(np.int64)
    starts: list[int] = []
    ends: list[int] = []
    per_doc = np.zeros(n, np.int64)
    buf = memoryview(data)  # paragraphs: the separator regex per document, on bytes
    for d, (a, b) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)):
        before, cut = len(starts), a
        for m in PARAGRAPH_SEP_BYTES.finditer(buf, a, b):
            starts.append(cut)
            ends.append(m.start())
            cut = m.end()
        starts.append(cut)
        ends.append(b)
        per_doc[d] = len(starts) - before
    return np.array(starts, np.int64), np.array(ends, np.int64), per_doc


def strip_spans(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple:
    """The spans without their surrounding whitespace, as str.strip() of the decoded text would
    leave them: (start, end) int64 [u], end <= start for a blank unit."""
    start, end = start.copy(), end.copy()
    for s, e, step in ((start, end, 1), (end, start, -1)):
        at = np.flatnonzero(s != e)
        while len(at):  # peel one ASCII whitespace byte per pass off the units that have one
            edge = s[at] if step == 1 else s[at] - 1
            at = at[_ASCII_WS[data[edge]]]  # the edge bytes only, never the whole buffer
            s[at] += step
            at = at[s[at] != e[at]]
    # rare: non-ASCII whitespace (U+00A0, U+3000, ...) at an edge: exact, in Python
    wide = np.flatnonzero(end - start >= 2)  # valid UTF-8: wide whitespace is 2-3 bytes
    wide = wide[_LEAD[_pairs(data, start[wide])] | _LAST[_pairs(data, end[wide] - 2)]]
    for j in wide.tolist():
        raw = data[start[j] : end[j]].tobytes()
        t = raw.decode("utf-8", "surrogatepass")
        left, right = len(t) - len(t.lstrip()), len(t.rstrip())
        if left or right < len(t):
            end[j] = start[j] + len(t[:right].encode("utf-8", "surrogatepass"))
            start[j] += len(t[:left].encode("utf-8", "surrogatepass"))
    return start, end


def _pairs(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The bytes at `at` and `at + 1` as one 16-bit index: int64 [k]."""
    return data[at].astype(np.int64) << 8 | data[at + 1]


def span_chars(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Code points in each span (UTF-8: the bytes that are not continuation bytes): int64 [u]."""
    lead = np.concatenate([[0], np.cumsum((data & 0xC0) != 0x80, dtype=np.int64)])
    return lead[np.maximum(end, start)] - lead[start]


def span_hashes(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A 64-bit key of each span's bytes: uint64 [u]. A polynomial hash of the bytes,
    sum_j b_j * B^j mod 2^64, from prefix sums (B odd, so B^-start undoes a span's offset),
    then mixed with the length; fine for natural text, not a cryptographic or adversary-proof
    key (strings built to collide mod 2^64 exist, e.g. Thue-Morse ones)."""
    out = np.empty(len(start), np.uint64)
    with np.errstate(over="ignore"):
        lo = 0
        while lo < len(start):  # chunks of whole spans, ~CHUNK_BYTES each (bounded memory)
            a = int(start[lo])
            hi = max(lo + 1, int(np.searchsorted(end, a + CHUNK_BYTES, "right")))
            b = max(int(end[lo:hi].max()), a)
            powers, inverse = _powers(b - a)
            prefix = _scratch(b - a + 1)
            prefix[0] = 0
            np.multiply(powers[: b - a], data[a:b], out=prefix[1:])
            np.cumsum(prefix[1:], out=prefix[1:])
            s, e = start[lo:hi] - a, np.maximum(end[lo:hi], start[lo:hi]) - a
            h = (prefix[e] - prefix[s]) * inverse[s] + (e - s).astype(np.uint64) * _LEN_MUL
            out[lo:hi] = mix64(h, inplace=True)
            lo = hi
    return out


_SCRATCH: list[np.ndarray] = []  # one reused uint64 buffer: no fresh pages per part


def _scratch(n: int) -> np.ndarray:
    """A uint64 work buffer of `n` elements (contents undefined), reused between calls of this
    process (at most CHUNK_BYTES + the longest unit)."""
    if not _SCRATCH or len(_SCRATCH[0]) < n:
        _SCRATCH[:] = [np.empty(1 << max(16, n.bit_length()), np.uint64)]
    return _SCRATCH[0][:n]


_POWERS: list[np.ndarray] = []  # [B^i, B^-i] for i < a power of two, grown on demand


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """B^i and B^-i mod 2^64 for i in [0, n], uint64 (at least n + 1 of each, cached)."""
    if not _POWERS or len(_POWERS[0]) <= n:
        size = 1 << max(16, n.bit_length() + 1)
        pair = []
        for base in (_BASE, _BASE_INV):
            arr = np.full(size, base, np.uint64)
            arr[0] = 1
            with np.errstate(over="ignore"):
                np.cumprod(arr, out=arr)
            pair.append(arr)
        _POWERS[:] = pair
    return _POWERS[0], _POWERS[1]


def cut_units(
    data: np.ndarray,
    offsets: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    per_doc: np.ndarray,
    drop: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """remove_units for every document of a part at once, on bytes: the documents
    data[offsets[d]:offsets[d+1]] without the units flagged in `drop` (bool [u], over all
    units of unit_spans' (start, end, per_doc), blank ones included). Returns (new data uint8,
    new offsets int64 [n+1] from 0, removed unit bytes per document int64 [n]).

    Unit k's bytes with the separator before it are [end[k-1], end[k]) (the document's first
    unit: [start, end)), and a dropped unit takes exactly those with it; when a document's
    first units are all dropped, its first kept unit loses its separator too, as "\\n".join
    (or the paragraph separator rule of remove_units) of the kept units would have it."""
    n = len(per_doc)
    base = int(offsets[0])
    first = np.zeros(len(start), bool)
    heads = (np.cumsum(per_doc) - per_doc)[per_doc > 0]
    first[heads] = True
    lead = np.empty_like(start)
    lead[1:] = end[:-1]
    lead[first] = start[first]
    kept = ~drop
    # kept units before each unit of its document: 0 for a first kept unit after dropped ones
    before = np.cumsum(kept) - kept
    before -= np.repeat(before[heads], per_doc[per_doc > 0])
    orphan = kept & ~first & (before == 0)  # its separator goes too
    cut_lo = np.concatenate([lead[drop], lead[orphan]])
    cut_hi = np.concatenate([end[drop], start[orphan]])
    doc_of = np.repeat(np.arange(n), per_doc)
    removed = np.bincount(
        np.concatenate([doc_of[drop], doc_of[orphan]]), cut_hi - cut_lo, minlength=n
    ).astype(np.int64)
    unit_bytes = np.bincount(doc_of[drop], (end - start)[drop], minlength=n).astype(np.int64)
    order = np.argsort(cut_lo, kind="stable")  # disjoint cuts; an empty one is a no-op
    cut_lo, cut_hi = cut_lo[order], cut_hi[order]
    # the bytes between cuts, in runs (unchanged documents are one run together)
    run_lo = np.concatenate([[base], cut_hi]).tolist()
    run_hi = np.concatenate([cut_lo, [int(offsets[-1])]]).tolist()
    runs = [data[a:b] for a, b in zip(run_lo, run_hi, strict=True) if b > a]
    new_data = np.concatenate(runs) if runs else np.zeros(0, np.uint8)
    new_offsets = offsets - base
    new_offsets[1:] -= np.cumsum(removed)
    return new_data, new_offsets, unit_bytes


# ---------------------------------------------------------------- lines with Arrow kernels


def arrow_lines(col: pa.Array) -> tuple[pa.ListArray, pa.Array]:
    """The lines of every document of a string column (split on "\\n", as split_units) and
    each line stripped: (list array of the lines, the stripped lines, flat). Arrow's
    utf8_trim_whitespace strips exactly str.strip()'s set (tested on every code point)."""
    ls = split_lines(col)
    return ls, pc.utf8_trim_whitespace(ls.flatten())


def split_lines(col: pa.Array) -> pa.ListArray:
    """Each document's lines (split on "\\n", as split_units): a list array."""
    return pc.split_pattern(col, "\n")


def list_offsets(arr: pa.Array) -> np.ndarray:
    """A string or list array's offsets as int64 [len + 1] (zero copy then widened)."""
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    buf = arr.buffers()[1]
    return np.frombuffer(buf, width, len(arr) + 1, arr.offset * np.dtype(width).itemsize).astype(
        np.int64
    )


def arrow_line_candidates(
    ls: pa.ListArray, stripped: pa.Array, min_chars: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidate lines (stripped, at least max(1, min_chars) characters) among arrow_lines'
    arrays: (bool [u] over the flat lines, their unit index int32 [m], candidates per
    document int64 [n]), as unit_hashes counts them."""
    per_doc = np.diff(list_offsets(ls))
    off = list_offsets(stripped)
    floor = max(1, min_chars)
    if floor == 1:
        ok = off[1:] > off[:-1]
    else:
        ok = np.asarray(pc.utf8_length(stripped).to_numpy(zero_copy_only=False)) >= floor
    first = np.cumsum(per_doc) - per_doc
    where = (np.arange(len(ok)) - np.repeat(first, per_doc)).astype(np.int32)
    doc_of = np.repeat(np.arange(len(per_doc)), per_doc)
    counts = np.bincount(doc_of[ok], minlength=len(per_doc)).astype(np.int64)
    return ok, where[ok], counts


def string_hashes(strings: pa.Array, mask: np.ndarray | None = None) -> np.ndarray:
    """span_hashes of each string of an Arrow string array (or of those in `mask`), uint64:
    the key of a unit whose stripped bytes these are (span_hashes is relative to a span's
    start, so the keys are those of the numpy path)."""
    off = list_offsets(strings)
    data = strings.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    start, end = off[:-1], off[1:]
    if mask is not None:
        start, end = start[mask], end[mask]
    return span_hashes(data, start, end)


def arrow_line_hashes(
    ls: pa.ListArray, stripped: pa.Array, min_chars: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """unit_hashes for lines from arrow_lines' arrays: the same (hash, unit index, candidates
    per document), the stripped bytes hashed where Arrow left them."""
    ok, where, counts = arrow_line_candidates(ls, stripped, min_chars)
    return string_hashes(stripped, ok), where, counts


def arrow_cut_lines(ls: pa.ListArray, drop: np.ndarray) -> tuple[pa.Array, int]:
    """remove_units for lines on every document at once: each document's kept lines (`drop`:
    bool over ls's flat lines) joined with "\\n" (Arrow's binary_join, the column's own
    string type); returns the new text column and the removed lines' UTF-8 bytes."""
    flat = ls.flatten()
    bounds = list_offsets(ls)
    kept = np.concatenate([[0], np.cumsum(~drop, dtype=np.int32)])[bounds - bounds[0]]
    lines_kept = flat.filter(_bools(~drop))
    joined = pc.binary_join(
        pa.ListArray.from_arrays(_ints(kept), lines_kept), pa.scalar("\n", flat.type)
    )
    return joined, int(np.diff(list_offsets(flat))[drop].sum())


def _bools(values: np.ndarray) -> pa.Array:
    bits = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def _ints(values: np.ndarray) -> pa.Array:
    a = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])
