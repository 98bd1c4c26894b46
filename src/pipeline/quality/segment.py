"""One numpy pass over a batch of texts: code points, per-character classes and run fingerprints.

The quality statistics (features.stats_matrix) and the LM's tokens (ngram.tokenize) are runs of
character classes (word characters, letters, non-space). Instead of regex findalls per document
and rule, a batch is joined with "\n" into one UTF-32 array, every code point gets its class bits
from a table (each bit defined by the very regex the scalar rules use, filled lazily with the
code points a batch brings), and a run of characters is named by a 64-bit fingerprint: a
polynomial over random per-code-point values, from prefix sums (so ~3 array passes a character;
runs over LONG_RUN characters get per-offset weights), mixed with the run length. Equal runs
always share a fingerprint; two distinct ones with probability ~2^-64 (the standing of the
n-gram hashes). Callers hash only distinct runs, with the hash the scalar code uses.
Not here: lines (str.splitlines is faster per line than any pass per character). Memory: ~27 MB
of tables per process (a random value and the class bits per code point, the power tables).
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
ALPHA = 32  # str.isalpha() (ngram's script of a token; not LETTER: "½" is \w, not a digit)
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
_UNKNOWN = 128  # not classified yet: _flags is filled lazily, with the code points seen so far
_flags = np.full(NUM_CODEPOINTS, _UNKNOWN, np.uint8)
_cp_weight = splitmix64(np.arange(NUM_CODEPOINTS, dtype=np.uint64) ^ np.uint64(0x5E6_0001))
_offset_weight = splitmix64(np.arange(_OFFSETS, dtype=np.uint64) + np.uint64(0x5E6_0002)) | 1


def _classify(ch: str) -> int:
    """The class bits of one character, from the patterns themselves."""
    f = ALPHA if ch.isalpha() else 0
    for bit, pattern in _PATTERNS:
        if pattern.fullmatch(ch):
            f |= bit
    return f


def classes(cps: np.ndarray) -> np.ndarray:
    """uint8 class bits of every code point (uint32 [C])."""
    f = _flags[cps]
    unknown = np.flatnonzero(f & _UNKNOWN)
    if len(unknown):
        new = np.unique(cps[unknown])
        _flags[new] = np.fromiter((_classify(chr(c)) for c in new.tolist()), np.uint8, len(new))
        f[unknown] = _flags[cps[unknown]]
    return f


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
    if len(member) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
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
    disjoint, ascending): the polynomial sum_j W[c_j] B^(j - start) mod 2^64 over random
    per-code-point values W (prefix sums over windows of the array, so ~3 array passes a
    character), mixed with the length. Runs longer than LONG_RUN use per-offset weights
    instead: a polynomial mod 2^64 has rare structured collisions between long strings."""
    out = np.zeros(len(starts), np.uint64)
    if len(starts) == 0:
        return out
    lo = 0
    while lo < len(starts):  # windows of ~WINDOW characters, cut between runs
        base = int(starts[lo])
        hi = max(int(np.searchsorted(starts, base + WINDOW, side="left")), lo + 1)
        top = int(ends[hi - 1])
        pw, ipw = _powers(top - base + 1)
        with np.errstate(over="ignore"):
            v = _cp_weight[cps[base:top]] * pw[: top - base]
            acc = np.concatenate([np.zeros(1, np.uint64), np.cumsum(v, dtype=np.uint64)])
            s, e = starts[lo:hi] - base, ends[lo:hi] - base
            out[lo:hi] = (acc[e] - acc[s]) * ipw[s]
        lo = hi
    lengths = ends - starts
    long = np.flatnonzero(lengths > LONG_RUN)
    if len(long):
        out[long] = _offset_sums(cps, starts[long], ends[long])
    with np.errstate(over="ignore"):
        return mix64(out ^ (lengths.astype(np.uint64) * GOLDEN64), inplace=True)


WINDOW = 1 << 20  # characters per prefix-sum window (the power tables' size)
LONG_RUN = 64  # longer runs: per-offset weights
_B = np.uint64(0x9FB2_1C65_1E98_DF25)  # odd: invertible mod 2^64
_pow_cache: list[np.ndarray] = []


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(B^j, B^-j) mod 2^64 for j < n (at least WINDOW + 1), cached."""
    if not _pow_cache or len(_pow_cache[0]) < n:
        size = max(n, WINDOW + 1)
        with np.errstate(over="ignore"):
            one = np.ones(1, np.uint64)
            pw = np.concatenate([one, np.cumprod(np.full(size - 1, _B, np.uint64))])
            inv = np.uint64(pow(int(_B), -1, 1 << 64))
            ipw = np.concatenate([one, np.cumprod(np.full(size - 1, inv, np.uint64))])
        _pow_cache[:] = [pw, ipw]
    return _pow_cache[0], _pow_cache[1]


def _offset_sums(cps: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """uint64 [R]: sum over a run's characters of W[c] x a random odd weight of its offset."""
    lengths = ends - starts
    total = int(lengths.sum())
    offs = np.concatenate([[0], np.cumsum(lengths)])
    pos = np.repeat(starts - offs[:-1], lengths) + np.arange(total, dtype=np.int64)
    offset = pos - np.repeat(starts, lengths)
    with np.errstate(over="ignore"):
        v = _cp_weight[cps[pos]] * _offset_weight[offset & (_OFFSETS - 1)]
        return np.add.reduceat(v, offs[:-1])
