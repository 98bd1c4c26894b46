"""Character classes for clean's statistics: every BMP code point's class (whitespace, digit,
punctuation, symbol, mark, or a letter of one script) in one lookup table built once per process,
and the array ops on top of it: classes of a text, counts per class, word spans.
"""

from __future__ import annotations

import unicodedata

import numpy as np

# character classes; letters are split by script so the dominant script can be measured
OTHER, SPACE, DIGIT, PUNCT, SYMBOL, MARK = range(6)
LATIN, CYRILLIC, GREEK, ARABIC, HEBREW, CJ, HANGUL, INDIC, SEA, OTHER_LETTER = range(6, 16)
NUM_CLASSES = 16
SCRIPTS = (
    "latin",
    "cyrillic",
    "greek",
    "arabic",
    "hebrew",
    "cjk",
    "hangul",
    "indic",
    "southeast_asian",
    "other",
)
UNSPACED = (CJ, SEA)  # scripts written without spaces between words

_SCRIPT_RANGES = [
    (LATIN, 0x0041, 0x02AF),
    (LATIN, 0x1E00, 0x1EFF),
    (LATIN, 0x2C60, 0x2C7F),
    (LATIN, 0xA720, 0xA7FF),
    (LATIN, 0xFF21, 0xFF5A),
    (GREEK, 0x0370, 0x03FF),
    (GREEK, 0x1F00, 0x1FFF),
    (CYRILLIC, 0x0400, 0x052F),
    (CYRILLIC, 0x1C80, 0x1C8F),
    (CYRILLIC, 0x2DE0, 0x2DFF),
    (CYRILLIC, 0xA640, 0xA69F),
    (HEBREW, 0x0590, 0x05FF),
    (HEBREW, 0xFB1D, 0xFB4F),
    (ARABIC, 0x0600, 0x06FF),
    (ARABIC, 0x0750, 0x077F),
    (ARABIC, 0x08A0, 0x08FF),
    (ARABIC, 0xFB50, 0xFDFF),
    (ARABIC, 0xFE70, 0xFEFF),
    (INDIC, 0x0900, 0x0DFF),
    (SEA, 0x0E00, 0x0EFF),
    (SEA, 0x1000, 0x109F),
    (SEA, 0x1780, 0x17FF),
    (HANGUL, 0x1100, 0x11FF),
    (HANGUL, 0x3130, 0x318F),
    (HANGUL, 0xAC00, 0xD7AF),
    (CJ, 0x2E80, 0x2FDF),
    (CJ, 0x3005, 0x3007),
    (CJ, 0x3040, 0x30FF),
    (CJ, 0x3100, 0x312F),
    (CJ, 0x31F0, 0x31FF),
    (CJ, 0x3400, 0x4DBF),
    (CJ, 0x4E00, 0x9FFF),
    (CJ, 0xF900, 0xFAFF),
    (CJ, 0xFF66, 0xFF9F),
]


def _build_table() -> np.ndarray:
    """uint8 [65536]: the class of every BMP code point (~40 ms, once per process)."""
    table = np.zeros(0x10000, np.uint8)
    script = np.full(0x10000, OTHER_LETTER, np.uint8)
    for cls, lo, hi in _SCRIPT_RANGES:
        script[lo : hi + 1] = cls
    first = {"N": DIGIT, "P": PUNCT, "S": SYMBOL, "M": MARK}
    for cp in range(0x10000):
        ch = chr(cp)
        if ch.isspace():
            table[cp] = SPACE
            continue
        cat = unicodedata.category(ch)
        table[cp] = script[cp] if cat[0] == "L" else first.get(cat[0], OTHER)
    return table


_TABLE = _build_table()


def char_classes(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(code points uint8 or uint32 [n], classes uint8 [n]) of a text without lone surrogates."""
    if text.isascii():
        cp = np.frombuffer(text.encode("ascii"), np.uint8)
        return cp, _TABLE.take(cp)
    cp = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    if cp.max() <= 0xFFFF:  # all BMP (one reduction): no clipping, no astral pass
        return cp, _TABLE.take(cp)
    cls = _TABLE[np.minimum(cp, 0xFFFF)]
    high = cp > 0xFFFF
    if high.any():  # astral planes: CJK extensions are letters, emoji and the rest symbols
        hc = cp[high]
        cls[high] = np.where((hc >= 0x20000) & (hc < 0x40000), CJ, SYMBOL)
    return cp, cls


def class_counts(cls: np.ndarray) -> np.ndarray:
    """int64 [NUM_CLASSES]; bincount casts to intp (8x the memory), so big texts count per class."""
    if len(cls) < 1 << 16:
        return np.bincount(cls, minlength=NUM_CLASSES)
    return np.array([np.count_nonzero(cls == k) for k in range(NUM_CLASSES)], np.int64)


def word_spans(cp: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Word spans: (starts, ends) int64 [w]. Whitespace separates; unspaced letters stand alone."""
    nonws = cls != SPACE
    unsp = (cls == CJ) | (cls == SEA)
    prev_nonws = np.concatenate(([False], nonws[:-1]))
    prev_unsp = np.concatenate(([False], unsp[:-1]))
    start = nonws & (~prev_nonws | unsp | prev_unsp)
    starts = np.flatnonzero(start)
    # a word's last character: a non-space followed by a space, a new word or the end (one each)
    last = nonws & np.concatenate(((~nonws | start)[1:], [True]))
    return starts, np.flatnonzero(last) + 1
