"""Gopher's stop-word statistic for a batch of documents at once, from its segmentation.

A stop word is present when a whitespace token, lower-cased and stripped of the punctuation
textstats strips (`w.lower().strip(_STRIP)`), equals it. Lower-casing is a table lookup per
character: every code point but U+0130 lower-cases to one character, no character lower-cases
into the strip set, and none outside ASCII and Cyrillic lower-cases into a stop word's letters
(tests/clean/test_fastpath.py checks all three), so matching per character is exact.
"""

from __future__ import annotations

import numpy as np

from pipeline.clean.segment import Segments

_NO_MATCH = 0xFFFF  # no stop word holds U+FFFF: a character that cannot be part of a match


def _lower_table() -> np.ndarray:
    """uint16 [0x10000]: the lower case of each BMP character (_NO_MATCH where it is not one
    BMP character: U+0130 and the surrogates). One str.lower() of all of them (~5 ms; a loop
    costs ~50x that); the only context rule of str.lower, final sigma, concerns no stop word."""
    cps = np.array([c for c in range(0x10000) if not (0xD800 <= c < 0xE000 or c == 0x130)])
    low = "".join(map(chr, cps.tolist())).lower()
    assert len(low) == len(cps)  # every other BMP character lower-cases to one character
    table = np.full(0x10000, _NO_MATCH, np.uint16)
    values = np.frombuffer(low.encode("utf-32-le"), np.uint32)
    table[cps] = np.where(values < 0x10000, values, _NO_MATCH)
    return table


_LOWER: np.ndarray | None = None  # built on first use (~30 ms)


def _pack(word: str) -> int:
    return sum(ord(c) << (16 * j) for j, c in enumerate(word))  # 16 bits per character


def _strip_ends(is_strip: np.ndarray, cp: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Move a forward and b back over strip characters, in place (str.strip on [a, b))."""
    i = np.flatnonzero((a < b) & _at(is_strip, cp, a))
    while len(i):
        a[i] += 1
        i = i[(a[i] < b[i]) & _at(is_strip, cp, a[i])]
    i = np.flatnonzero((a < b) & _at(is_strip, cp, b - 1))
    while len(i):
        b[i] -= 1
        i = i[(a[i] < b[i]) & _at(is_strip, cp, b[i] - 1)]


def _at(table: np.ndarray, cp: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """table[cp[pos]] for a BMP table (astral code points read as U+FFFF)."""
    c = cp[np.minimum(pos, len(cp) - 1)]
    return table[c] if cp.dtype == np.uint8 else table[np.minimum(c, 0xFFFF)]


def stop_word_counts(
    seg: Segments, docs: np.ndarray, stop: tuple[str, ...], strip: str
) -> np.ndarray:
    """int64 [len(docs)]: distinct words of `stop` present in each of the documents `docs`."""
    global _LOWER
    if _LOWER is None:
        _LOWER = _lower_table()
    ts, te = seg.tokens()
    tdoc = seg.token_doc()
    cp = seg.cp
    is_strip = np.zeros(0x10000, bool)
    is_strip[[ord(c) for c in strip]] = True  # all BMP
    longest = max(map(len, stop))
    # only a token this short, or one that strip() can shorten, can be a stop word
    want = np.zeros(seg.num_docs, bool)
    want[docs] = True
    cand = (te - ts <= longest) | _at(is_strip, cp, ts) | _at(is_strip, cp, te - 1)
    keep = np.flatnonzero(cand & want[tdoc])
    a, b, tdoc = ts[keep], te[keep], tdoc[keep]
    _strip_ends(is_strip, cp, a, b)
    length = b - a
    present = np.zeros((seg.num_docs, len(stop)), bool)
    for n in sorted({len(w) for w in stop}):
        ids = [i for i, w in enumerate(stop) if len(w) == n]
        keys = np.array([_pack(stop[i]) for i in ids], np.uint64)
        order = np.argsort(keys)
        keys, ids_sorted = keys[order], np.array(ids)[order]
        sel = np.flatnonzero(length == n)
        if not len(sel):
            continue
        key = np.zeros(len(sel), np.uint64)
        for j in range(n):
            c = cp[a[sel] + j].astype(np.int64)
            low = _LOWER[np.minimum(c, 0xFFFF)].astype(np.uint64)
            low[c > 0xFFFF] = _NO_MATCH
            key |= low << np.uint64(16 * j)
        at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        hit = keys[at] == key
        present[tdoc[sel[hit]], ids_sorted[at[hit]]] = True
    return present[docs].sum(axis=1)
