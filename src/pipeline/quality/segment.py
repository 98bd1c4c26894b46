"""One numpy pass over a batch of texts: code points, per-character classes and run fingerprints.

The quality statistics (features.stats_matrix) and the LM's tokens (ngram.tokenize) are runs of
character classes (word characters, letters, non-space, lines). Instead of one regex findall per
document and rule, the batch is joined with "\\n" into one UTF-32 array, every code point gets
its class bits from a table (each bit defined by the very regex or str predicate the scalar rules
use, filled lazily for the code points a batch brings), and a run of characters is identified by
a 64-bit fingerprint: the sum of a random table value per (code point, offset in the run),
mixed with the run length. Two distinct runs share a fingerprint with probability ~2^-64 (the
same standing as the n-gram hashes); equal runs always do. Callers hash only distinct runs.
"""

from __future__ import annotations

import re

import numpy as np

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64, splitmix64

NUM_CODEPOINTS = 0x110000
# class bits of a code point
WORD = 1  # re \w (= str.isalnum() or "_")
SPACE = 2  # re \s (= str.isspace(); str.split's and str.strip's whitespace)
LETTER = 4  # re [^\W\d_]
CHAR_SCRIPT = 8  # ngram._CHAR_SCRIPTS: a script written without spaces
SYMBOL = 16  # features._SYMBOL: not prose punctuation
DIGIT = 32  # str.isdigit()
BREAK = 64  # a line boundary of str.splitlines()
LOWER = 128  # str.islower()
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_OFFSETS = 1 << 12  # offset weights: runs longer than this reuse them (offset mod 4096)

# the scripts written without spaces (Han, Kana, Thai, Lao, Khmer, Myanmar): one token a character
CHAR_SCRIPTS = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
)
SYMBOL_CHAR = re.compile(r"[^\w\s.,;:!?'\"()\-\u2019\u201c\u201d]")  # not prose punctuation
_PATTERNS = (
    (WORD, re.compile(r"\w")),
    (SPACE, re.compile(r"\s")),
    (LETTER, re.compile(r"[^\W\d_]")),
    (CHAR_SCRIPT, re.compile(rf"[{CHAR_SCRIPTS}]")),
    (SYMBOL, SYMBOL_CHAR),
)
_flags = np.zeros(NUM_CODEPOINTS, np.uint8)  # filled lazily, the code points seen so far
_known = np.zeros(NUM_CODEPOINTS, bool)
_cp_weight = splitmix64(np.arange(NUM_CODEPOINTS, dtype=np.uint64) ^ np.uint64(0x5E6_0001))
_offset_weight = splitmix64(np.arange(_OFFSETS, dtype=np.uint64) + np.uint64(0x5E6_0002)) | 1


def _classify(ch: str) -> int:
    f = 0
    for bit, pattern in _PATTERNS:
        if pattern.fullmatch(ch):
            f |= bit
    if ch.isdigit():
        f |= DIGIT
    if ch in _LINE_BREAKS:
        f |= BREAK
    if ch.islower():
        f |= LOWER
    return f


def classes(cps: np.ndarray) -> np.ndarray:
    """uint8 class bits of every code point (uint32 [C])."""
    if len(cps) == 0:
        return np.zeros(0, np.uint8)
    present = np.bincount(cps, minlength=NUM_CODEPOINTS).astype(bool)
    new = np.flatnonzero(present & ~_known)
    if len(new):
        _flags[new] = np.fromiter((_classify(chr(c)) for c in new.tolist()), np.uint8, len(new))
        _known[new] = True
    return _flags[cps]


def join(texts: list[str]) -> tuple[str, np.ndarray, np.ndarray]:
    """(the texts joined by "\\n", its code points uint32 [C], each text's start int64 [n + 1]:
    text i is [starts[i], starts[i + 1] - 1), the last entry is C + 1). The "\\n" between texts
    is a space and a line break, so no run of non-space characters, words or lines crosses a
    text."""
    big = "\n".join(texts)
    cps = np.frombuffer(big.encode("utf-32-le", "surrogatepass"), np.uint32)
    lengths = np.fromiter(map(len, texts), np.int64, len(texts)) + 1
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return big, cps, starts


def runs(member: np.ndarray, single: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) int64 of the maximal runs of `member` characters (bool [C]) plus each
    `single` character (bool [C], disjoint from member) as a run of its own; [start, end)."""
    prev = np.concatenate([[False], member[:-1]])
    nxt = np.concatenate([member[1:], [False]])
    first = member & ~prev
    last = member & ~nxt
    if single is not None:
        first = first | single
        last = last | single
    return np.flatnonzero(first), np.flatnonzero(last) + 1


def fingerprints(cps: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """uint64 [R]: a fingerprint of each run's characters cps[starts[r]:ends[r]] (non-empty,
    disjoint, ascending)."""
    if len(starts) == 0:
        return np.zeros(0, np.uint64)
    lengths = ends - starts
    total = int(lengths.sum())
    # position of each run character, and its offset in its run
    offs = np.concatenate([[0], np.cumsum(lengths)])
    pos = np.repeat(starts - offs[:-1], lengths) + np.arange(total, dtype=np.int64)
    offset = pos - np.repeat(starts, lengths)
    with np.errstate(over="ignore"):
        v = _cp_weight[cps[pos]] * _offset_weight[offset & (_OFFSETS - 1)]
        fp = np.add.reduceat(v, offs[:-1])
        return mix64(fp ^ (lengths.astype(np.uint64) * GOLDEN64), inplace=True)


def group(fp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one index of each distinct value, the group of every element int64 [R]), groups in
    ascending value order. A plain sort and a search: numpy's SIMD sort of uint64 is ~30x its
    argsort, and the distinct values (a batch's vocabulary) fit in cache."""
    s = np.sort(fp)
    new = np.concatenate([[True], s[1:] != s[:-1]]) if len(s) else np.zeros(0, bool)
    gid = np.searchsorted(s[new], fp)
    rep = np.empty(int(new.sum()), np.int64)
    rep[gid] = np.arange(len(fp), dtype=np.int64)  # some occurrence of each value
    return rep, gid
