"""The GPT-2 split pattern over code points, in numpy: where each piece of many chunks starts.

`encode_batch` hands the chunks its store lacks (pretokenize.COARSE's: a whitespace run, or a
run of non-whitespace with at most one plain space before it) to `piece_starts` as one array of
code points, instead of making a Python string of each and splitting it with the regex. Inside
a chunk, SPLIT_PATTERN (or GPT2_PATTERN, digits unlimited) matches, left to right:

- a whitespace chunk is one piece (the chunk identity, see pretokenize.COARSE);
- otherwise a piece starts at the chunk's start (its space included) and wherever the class of
  the code point changes between letter (\\p{L}), number (\\p{N}) and other (neither, nor \\s):
  `` ?\\p{L}+``, `` ?\\p{N}+`` and `` ?[^\\s\\p{L}\\p{N}]+`` are maximal runs of one class;
- a run of numbers is cut every 3 code points (``\\p{N}{1,3}``; GPT2_PATTERN: never);
- an apostrophe that starts a piece and is followed by ``s``, ``t``, ``m``, ``d``, ``re``,
  ``ve`` or ``ll`` is a contraction piece, taken from the front of the letters after it
  (the pattern tries contractions first; an apostrophe inside a run of other code points, or
  after a space, is not at the start of a match and stays in its run).

Classes come from the `regex` module itself (the pattern's own \\s, \\p{L} and \\p{N}), for the
code points met so far, in a table filled as new ones come. A Hypothesis test compares the
pieces with `findall` on random Unicode (contractions, digits, lone surrogates included).
"""

from __future__ import annotations

import numpy as np
import regex

WS, LETTER, NUMBER, OTHER = 0, 1, 2, 3
_UNKNOWN = 255
_CLASS = np.full(0x110000, _UNKNOWN, np.uint8)  # code point -> class, filled as met
_NOT = (  # what each class is not
    (WS, regex.compile(r"[^\s]")),
    (LETTER, regex.compile(r"\P{L}")),
    (NUMBER, regex.compile(r"\P{N}")),
)
_APOSTROPHE = ord("'")
_ONE = np.zeros(128, bool)  # 's 't 'm 'd: the letter after the apostrophe
_ONE[[ord(c) for c in "stmd"]] = True
_TWO = np.zeros(128, np.int64)  # 're 've 'll: the first letter -> the second
for _a, _b in ("re", "ve", "ll"):
    _TWO[ord(_a)] = ord(_b)


def _classify(points: np.ndarray) -> np.ndarray:
    """Class of each distinct code point, by the regex module (\\0 is `other`, never a hit)."""
    text = points.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
    out = np.full(len(points), OTHER, np.uint8)
    for cls, pattern in _NOT:
        kept = pattern.sub("\0", text).encode("utf-32-le", "surrogatepass")
        out[np.frombuffer(kept, np.uint32) != 0] = cls
    return out


def classes(cp: np.ndarray) -> np.ndarray:
    """WS / LETTER / NUMBER / OTHER of each code point (uint8)."""
    cls = _CLASS[cp]
    unknown = cls == _UNKNOWN
    if unknown.any():
        points = np.unique(cp[unknown])
        _CLASS[points] = _classify(points)
        cls = _CLASS[cp]
    return cls


def piece_starts(cp: np.ndarray, first: np.ndarray, digits: int | None = 3) -> np.ndarray:
    """Sorted positions where a piece starts, for COARSE chunks laid end to end in `cp`;
    `first[i]` is True where a chunk starts (first[0] must be). `digits`: the longest run of
    numbers in one piece (3: SPLIT_PATTERN), None for no limit (GPT2_PATTERN)."""
    n = len(cp)
    cls = classes(cp)
    starts = first.copy()
    # a class change starts a piece, except after a chunk's leading space
    starts[1:] |= (cls[1:] != cls[:-1]) & (cls[:-1] != WS)
    if digits is not None:
        at = np.flatnonzero(cls == NUMBER)
        if len(at):
            run = np.ones(len(at), bool)
            run[1:] = (at[1:] != at[:-1] + 1) | first[at[1:]]
            begin = at[run][np.cumsum(run) - 1]  # where each number's run starts
            off = at - begin
            starts[at[(off % digits == 0) & (off > 0)]] = True
    q = np.flatnonzero(starts & (cp == _APOSTROPHE))
    if len(q):
        # the two code points after each apostrophe, 0 past its chunk's end
        nxt = np.zeros((2, len(q)), np.int64)
        for k in (1, 2):
            ok = q + k < n
            ok[ok] &= ~first[q[ok] + k]
            nxt[k - 1, ok] = cp[q[ok] + k]
        ascii1 = np.where(nxt[0] < 128, nxt[0], 0)
        one = _ONE[ascii1]
        two = ~one & (_TWO[ascii1] != 0) & (nxt[1] == _TWO[ascii1])
        took = np.where(one, 2, np.where(two, 3, 0))
        hit = took > 0
        q, took = q[hit], took[hit]
        starts[q + 1] = False  # the letters after the apostrophe start later
        end = q + took
        starts[end[end < n]] = True
    return np.flatnonzero(starts)
