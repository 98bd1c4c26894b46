"""Gopher's repeated n-gram statistics for a batch of documents at once (top and duplicated
n-gram characters), from the batch's word hashes.

Level k groups the k-grams of every document by hash in one sort. Only a k-gram whose
(k-1)-word prefix and suffix both repeat can repeat, so level k sorts just those positions
(on real text ~half the words at k = 2, a few percent by k = 5) instead of every word. A
position's k-gram hash is the same polynomial as the per-document code's (so the same
n-grams compare equal); positions are packed into the low bits of the sort key, and a 40-bit
hash collision inside one document is detected and re-sorted exactly.
"""

from __future__ import annotations

import bisect

import numpy as np

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64

_POS_BITS = 24  # positions (word indices in the batch) packed under the hash: < 16M words
_POS_MASK = np.uint64((1 << _POS_BITS) - 1)


def _sort_packed(key: np.ndarray) -> np.ndarray:
    """np.sort(key) for packed keys whose low _POS_BITS bits (the positions) ascend: a stable
    LSD radix sort of the 40 hash bits above them in 16-, 16- and 8-bit digits (numpy's stable
    argsort of 8/16-bit integers is a radix sort), which keeps equal hashes in position order.
    ~25% faster than np.sort's introsort on 10^4-10^5 keys; small arrays use np.sort."""
    if len(key) < 4096:
        return np.sort(key)
    order = None
    for shift, dtype in ((_POS_BITS, np.uint16), (_POS_BITS + 16, np.uint16), (56, np.uint8)):
        k = key if order is None else key[order]
        o = np.argsort((k >> np.uint64(shift)).astype(dtype), kind="stable")
        order = o if order is None else order[o]
    return key[order]


def _groups(g: np.ndarray, pos: np.ndarray, word_doc: np.ndarray) -> tuple[np.ndarray, ...]:
    """Group the positions `pos` (ascending) by (document, k-gram hash g[pos]): (positions
    sorted by group then position, each group's document, group start indices, group sizes).
    Full hashes and documents are compared only where the packed 40-bit hashes are equal."""
    if not len(pos):
        return pos, pos, pos, pos
    exact = False
    if len(g) < 1 << _POS_BITS:
        packed = _sort_packed((g[pos] & ~_POS_MASK) | pos.astype(np.uint64))
        p = (packed & _POS_MASK).astype(np.int64)
        hi = packed >> np.uint64(_POS_BITS)
        brk = hi[1:] != hi[:-1]
        eq = np.flatnonzero(~brk)
        a, b = p[eq], p[eq + 1]
        same = word_doc[a] == word_doc[b]
        brk[eq] = ~same
        exact = not (same & (g[a] != g[b])).any()  # else a 40-bit collision
    if not exact:
        key = g[pos]
        order = np.lexsort((pos, key, word_doc[pos]))
        p, full = pos[order], key[order]
        d = word_doc[p]
        brk = (full[1:] != full[:-1]) | (d[1:] != d[:-1])
    starts = np.flatnonzero(np.concatenate(([True], brk)))
    sizes = np.diff(np.append(starts, len(p)))
    return p, word_doc[p[starts]], starts, sizes


def _dup_chars(
    p: np.ndarray,
    d: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    chars: np.ndarray,
    k: int,
    total: np.ndarray,
) -> None:
    """Add to total[doc] datatrove's duplicated k-gram chars: scanning left to right, a position
    whose k-gram was seen at an earlier *visited* position counts its k words' chars and skips
    them (skipped positions are not visited). Only repeated groups are given."""
    gid = np.repeat(np.arange(len(starts)), sizes)
    first = np.zeros(len(p), bool)
    first[starts] = True
    cand = np.flatnonzero(~first)
    cand = cand[np.argsort(p[cand], kind="stable")]  # later occurrences, by position
    pos_l, gid_l, gstart_l = p.tolist(), gid.tolist(), starts.tolist()
    chars_l, doc_l = chars.tolist(), d.tolist()
    counted: list[int] = [-k]  # counted positions, ascending: each skips the k - 1 after it
    skip_until = 0
    acc: dict[int, int] = {}
    for j in cand.tolist():
        c = pos_l[j]
        if c < skip_until:
            continue  # not visited: neither counted nor added to the seen set
        for e in range(gstart_l[gid_l[j]], j):  # earlier occurrences of the same k-gram
            x = pos_l[e]
            if x >= counted[bisect.bisect_left(counted, x) - 1] + k:  # x was visited
                doc = doc_l[j]
                acc[doc] = acc.get(doc, 0) + chars_l[j]
                skip_until = c + k
                counted.append(c)
                break
    for doc, v in acc.items():
        total[doc] += v


def ngram_stats(
    hashes: np.ndarray,
    word_offsets: np.ndarray,
    word_lengths: np.ndarray,
    scale: np.ndarray,
    top_ns: tuple[int, ...],
    dup_ns: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """(top int64 [d, len(top_ns)], dup int64 [d, len(dup_ns)]): characters of the most
    frequent n-gram times its count (ties: the one seen first; 0 with fewer than n words) and
    duplicated n-gram characters, per document. Document i reads scale[i] * n words for
    Gopher's n (2 in unspaced scripts, where a word is one character), joined by one space
    where scale is 1 and by none where it is 2. hashes uint64 [w], word_lengths int64 [w]."""
    d = len(word_offsets) - 1
    n_words = np.diff(word_offsets)
    top = np.zeros((d, len(top_ns)), np.int64)
    dup = np.zeros((d, len(dup_ns)), np.int64)
    if not len(hashes):
        return top, dup
    rules = {}  # k -> [(scale, "top"/"dup", column)]
    for s in np.unique(scale).tolist():
        for j, m in enumerate(top_ns):
            rules.setdefault(s * m, []).append((s, "top", j))
        for j, m in enumerate(dup_ns):
            rules.setdefault(s * m, []).append((s, "dup", j))
    k_max = max(rules)
    word_doc = np.repeat(np.arange(d), n_words)
    cum_len = np.concatenate(([0], np.cumsum(word_lengths)))
    need = np.zeros(len(scale), np.int64)  # the longest k-gram each document needs
    for s in np.unique(scale).tolist():
        need[scale == s] = s * max((*top_ns, *dup_ns))
    wneed = need[word_doc]
    # the word hashes are polynomials: short words have empty high bits, so mix them first (the
    # packed sort compares the high 40 bits; unmixed, "a ," and "a ." would collide there)
    hashes = mix64(hashes)
    g = hashes.copy()
    last = word_offsets[1:] - 1  # each document's last word
    valid = np.ones(len(hashes), bool)
    valid[last[n_words > 0]] = False  # no 2-gram starts at a document's last word
    pos = np.flatnonzero(valid)
    top_k = int(scale.max()) * max(top_ns)
    for k in range(2, k_max + 1):
        pos = pos[wneed[pos] >= k]
        if not len(pos) and k > top_k:
            break  # nothing repeats any more and no top n-gram is left to measure
        g[pos] = g[pos] * GOLDEN64 + hashes[pos + k - 1]  # k-gram hash at each position
        p, gdoc, starts, sizes = _groups(g, pos, word_doc)
        rep = sizes > 1
        for s, kind, j in rules.get(k, ()):
            docs = np.flatnonzero((scale == s) & (n_words >= k))
            if kind == "top":
                _top(top[:, j], docs, p, gdoc, starts, sizes, rep, cum_len, word_offsets, k, s)
            elif rep.any():
                sel = rep & (scale[gdoc] == s)
                if sel.any():
                    idx = np.repeat(sel, sizes)
                    rs, rsz = _restart(sizes[sel])
                    chars = cum_len[p[idx] + k] - cum_len[p[idx]]
                    edoc = np.repeat(gdoc[sel], sizes[sel])
                    _dup_chars(p[idx], edoc, rs, rsz, chars, k, dup[:, j])
        isrep = np.zeros(len(hashes) + 1, bool)
        isrep[p[np.repeat(rep, sizes)]] = True
        pos = np.flatnonzero(isrep[:-1] & isrep[1:])  # prefix and suffix (k-grams) repeat
    return top, dup


def _restart(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    starts = np.zeros(len(sizes), np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    return starts, sizes


def _top(
    col: np.ndarray,
    docs: np.ndarray,
    p: np.ndarray,
    gd: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    rep: np.ndarray,
    cum_len: np.ndarray,
    word_offsets: np.ndarray,
    k: int,
    s: int,
) -> None:
    """col[docs] = chars of the document's most frequent k-gram x its count (ties: seen first)."""
    if not len(docs):
        return
    best = np.ones(len(col), np.int64)
    first = word_offsets[:-1].copy()  # no repeat: the document's first k-gram, once
    gdoc, gsize, gfirst = gd[rep], sizes[rep], p[starts[rep]]
    if len(gdoc):
        np.maximum.at(best, gdoc, gsize)
        top = gsize == best[gdoc]
        has = np.zeros(len(col), bool)
        has[gdoc] = True
        first[has] = np.iinfo(np.int64).max
        np.minimum.at(first, gdoc[top], gfirst[top])
    f = first[docs]
    sep = 1 if s == 1 else 0  # spaces between the words, none between characters
    col[docs] = best[docs] * (cum_len[f + k] - cum_len[f] + sep * (k - 1))
