"""Cross-document line (or paragraph) dedup, as dolma's paragraph dedup and CCNet's line dedup:
a unit seen in at least `min_docs` documents stays only in the first of them, by a seeded order.

Pure functions on in-memory texts and arrays; the stage (pipeline.stages.line_dedup) runs them as
a partitioned hash pass: per part, (unit hash, document key) rows sorted by hash; per hash
partition, the hashes in >= min_docs documents and their first document; per part again, the
units to remove. A unit is a line (split on "\\n") or a paragraph (split on blank lines); its
key is xxh3-64 of the unit with surrounding whitespace stripped. Blank units are never removed.
"""

from __future__ import annotations

import re

import numpy as np
import xxhash

from pipeline.permute import mix64, splitmix64

UNITS = ("line", "paragraph")
PARAGRAPH_SEP = re.compile(r"(\n(?:[ \t]*\n)+)")  # a blank line (or several) between paragraphs
_h64 = xxhash.xxh3_64_intdigest


def split_units(text: str, unit: str) -> list[str]:
    """The pieces of `text`: for lines, the lines; for paragraphs, paragraphs at even and their
    separators at odd positions. `join_units(split_units(t, u), u) == t`."""
    return text.split("\n") if unit == "line" else PARAGRAPH_SEP.split(text)


def join_units(pieces: list[str], unit: str) -> str:
    return "\n".join(pieces) if unit == "line" else "".join(pieces)


def _units(pieces: list[str], unit: str) -> list[str]:
    return pieces if unit == "line" else pieces[0::2]


def unit_hashes(
    texts: list[str], unit: str, min_chars: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate unit (stripped, at least max(1, min_chars) characters), in document then
    unit order: (hash uint64 [m], its index among its document's units int32 [m], units per
    document int64 [n])."""
    floor = max(1, min_chars)
    out: list[int] = []
    where: list[int] = []
    counts = np.zeros(len(texts), np.int64)
    for d, text in enumerate(texts):
        stripped = list(map(str.strip, _units(split_units(text, unit), unit)))
        idx = [i for i, s in enumerate(stripped) if len(s) >= floor]
        out += [_h64(stripped[i].encode("utf-8", "surrogatepass")) for i in idx]
        where += idx
        counts[d] = len(idx)
    return np.array(out, np.uint64), np.array(where, np.int32), counts


def doc_keys(first: int, n: int, seed: int) -> np.ndarray:
    """The seeded order key of global documents first..first+n-1: uint64 [n], distinct (x ->
    mix64(x + s) is a bijection of uint64), so 'the first document' is never a tie."""
    salt = splitmix64(np.array([seed], np.uint64))[0]
    with np.errstate(over="ignore"):
        return mix64(np.arange(first, first + n, dtype=np.uint64) + salt, inplace=True)


def part_rows(hashes: np.ndarray, counts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """One part's (hash, document key) rows, each pair once, sorted by hash then key: uint64
    [2, k]. A unit repeated inside one document counts once for that document."""
    doc_key = np.repeat(keys, counts)
    order = np.lexsort((doc_key, hashes))
    h, k = hashes[order], doc_key[order]
    new = np.ones(len(h), bool)
    new[1:] = (h[1:] != h[:-1]) | (k[1:] != k[:-1])
    return np.stack([h[new], k[new]]) if len(h) else np.zeros((2, 0), np.uint64)


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
    """For one partition's rows uint64 [2, k] (from every part): the hashes in at least
    `min_docs` documents with their first document's key, uint64 [2, r] sorted by hash, and
    their document counts int64 [r]."""
    order = np.lexsort((rows[1], rows[0]))
    h, k = rows[0][order], rows[1][order]
    new = np.ones(len(h), bool)
    new[1:] = h[1:] != h[:-1]
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(h)))
    keep = counts >= min_docs
    return np.stack([h[starts[keep]], k[starts[keep]]]), counts[keep]


def removable(hashes: np.ndarray, unit_keys: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """bool [m]: which candidate units (hashes uint64 [m], their document's key uint64 [m]) to
    remove: their hash is in `rep` ([2, r]: hash, first key, sorted by hash; a memmap is fine)
    and their document is not that first one."""
    if rep.shape[1] == 0 or len(hashes) == 0:
        return np.zeros(len(hashes), bool)
    pos = np.minimum(np.searchsorted(rep[0], hashes), rep.shape[1] - 1)
    hit = np.asarray(rep[0][pos]) == hashes
    return hit & (np.asarray(rep[1][pos]) != unit_keys)


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
