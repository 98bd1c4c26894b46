"""Gopher's stop-word statistic for a batch of documents at once, from its segmentation.

A stop word is present when a whitespace token, lower-cased and stripped of the punctuation
textstats strips (`w.lower().strip(_STRIP)`), equals it. Lower-casing is a table lookup per
character: every code point but U+0130 lower-cases to one character, no character lower-cases
into the strip set, and none outside ASCII and Cyrillic lower-cases into a stop word's letters
(tests/clean/test_fastpath.py checks all three), so matching per character is exact. Only the
tokens that can be a stop word are looked at: short ones, and ones with a strip character
(punctuation, by class) at an end.
"""

from __future__ import annotations

import numpy as np

from pipeline.clean.charclass import PUNCT, char_classes
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
    return table.take(c) if cp.dtype == np.uint8 else table.take(np.minimum(c, 0xFFFF))


def stop_word_counts(
    seg: Segments, docs: np.ndarray, stop: tuple[str, ...], strip: str
) -> np.ndarray:
    """int64 [len(docs)]: distinct words of `stop` present in each of the documents `docs`."""
    global _LOWER
    if _LOWER is None:
        _LOWER = _lower_table()
    ts, te = seg.tokens()
    cp = seg.cp
    is_strip = np.zeros(0x10000, bool)
    is_strip[[ord(c) for c in strip]] = True  # all BMP
    if len(docs) == seg.num_docs:
        a, b, tdoc = ts, te, seg.token_doc()
    else:
        want = np.zeros(seg.num_docs, bool)
        want[docs] = True
        keep = np.flatnonzero(want[seg.token_doc()])
        a, b, tdoc = ts[keep], te[keep], seg.token_doc()[keep]
    # only a token this short, or one that strip() can shorten, can be a stop word
    short = b - a <= max(map(len, stop))
    if (char_classes(strip)[1] == PUNCT).all():  # one gather of the class, not three
        cand = short | (seg.cls[a] == PUNCT) | (seg.cls[b - 1] == PUNCT)
    else:
        cand = short | _at(is_strip, cp, a) | _at(is_strip, cp, b - 1)
    a, b, tdoc = a[cand], b[cand], tdoc[cand]
    _strip_ends(is_strip, cp, a, b)
    # and only one whose first letter starts a stop word (lower-cased)
    firsts = np.zeros(0x10000, bool)
    firsts[[ord(w[0]) for w in stop]] = True
    ok = (a < b) & firsts.take(_lower(cp, np.minimum(a, len(cp) - 1)))
    a, b, tdoc = a[ok], b[ok], tdoc[ok]
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
        at_ = a[sel]
        key = np.zeros(len(sel), np.uint64)
        for j in range(n):
            key |= _lower(cp, at_ + j).astype(np.uint64) << np.uint64(16 * j)
        at = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        hit = keys[at] == key
        present[tdoc[sel[hit]], ids_sorted[at[hit]]] = True
    return present[docs].sum(axis=1)


def _lower(cp: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """uint16 [k]: the lower case of cp[pos] (_NO_MATCH for astral code points)."""
    c = cp[pos]
    if cp.dtype == np.uint8:
        return _LOWER.take(c)
    low = _LOWER.take(np.minimum(c, 0xFFFF))
    low[c > 0xFFFF] = _NO_MATCH
    return low
