"""Decontamination: word n-grams shared with evaluation texts, as GPT-3 (13-grams) and Llama did.

Text is normalised as GPT-3's overlap check did: lowercased, every run of characters that are
not letters or digits (punctuation, whitespace, `_`) becomes one space, words are what is left.
Each word hashes to 64 bits from its UTF-8 bytes, vectorised over a batch (a byte's value times
a fixed random odd weight for its position in the word, summed per word, then splitmix64), and
an n-gram to the splitmix64 of a weighted sum of its word hashes: only uint64 arrays, no strings.
N-grams never cross a document boundary. Pure functions; no I/O.
"""

from __future__ import annotations

import numpy as np

from pipeline.permute import mix64, splitmix64

_BOUNDARY = "\x01"  # marks a document boundary inside a batch
_POS_WEIGHTS = splitmix64(np.arange(64, dtype=np.uint64) + np.uint64(0xDEC0)) | np.uint64(1)
_WORD_LEN = np.uint64(0x9E3779B97F4A7C15)
_MAX_NGRAM = 64
_GRAM_WEIGHTS = splitmix64(np.arange(_MAX_NGRAM, dtype=np.uint64) + np.uint64(0x13)) | np.uint64(1)
_ASCII_WORD = np.array([chr(c).isalnum() for c in range(128)], bool)  # str.isalnum: \w sans _


def _codepoints(texts: list[str]) -> np.ndarray:
    """The lowercased texts joined by _BOUNDARY, as code points uint32 [c]."""
    joined = _BOUNDARY.join(t.replace(_BOUNDARY, " ") for t in texts).lower()
    return np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)


def _word_chars(cp: np.ndarray) -> np.ndarray:
    """bool [c]: letters and digits (str.isalnum: regex \\w without `_`); the rest separate
    words. Non-ASCII code points are classified once per distinct value."""
    word = np.zeros(len(cp), bool)
    low = cp < 128
    word[low] = _ASCII_WORD[cp[low]]
    high = np.flatnonzero(~low)
    if len(high):
        uniq, inv = np.unique(cp[high], return_inverse=True)
        word[high] = np.array([chr(c).isalnum() for c in uniq.tolist()], bool)[inv]
    return word


def words(text: str) -> list[str]:
    """The normalised words of `text`: lowercased, split on every non-letter, non-digit."""
    low = text.replace(_BOUNDARY, " ").lower()
    word = _word_chars(np.frombuffer(low.encode("utf-32-le", "surrogatepass"), np.uint32))
    edges = np.flatnonzero(np.diff(np.concatenate([[False], word, [False]]).astype(np.int8)))
    return [low[a:b] for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True)]


def word_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every normalised word of `texts`: (hash uint64 [W], its text's index int64 [W]), in
    order. Temporaries: ~40 bytes per character, so callers batch ~1 MB of text."""
    cp = _codepoints(texts)
    word = _word_chars(cp)
    start = word.copy()
    start[1:] &= ~word[:-1]
    starts = np.flatnonzero(start)
    if len(starts) == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    at = np.flatnonzero(word)
    heads = np.flatnonzero(start[at])  # each word's first character among the word characters
    lengths = np.diff(np.append(heads, len(at)))
    pos = (np.arange(len(at)) - np.repeat(heads, lengths)) & 63
    with np.errstate(over="ignore"):
        val = (cp[at].astype(np.uint64) + np.uint64(1)) * _POS_WEIGHTS[pos]
        h = np.add.reduceat(val, heads) ^ (lengths.astype(np.uint64) * _WORD_LEN)
        h = mix64(h, inplace=True)
    doc = np.searchsorted(np.flatnonzero(cp == 1), starts).astype(np.int64)
    return h, doc


def ngram_hashes(wh: np.ndarray, docs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The n-grams of consecutive words inside one text: (hash uint64 [G], first word's index
    int64 [G]), in order."""
    assert 1 <= n <= _MAX_NGRAM
    m = len(wh) - n + 1
    if m <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    acc = np.zeros(m, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            acc += wh[j : j + m] * _GRAM_WEIGHTS[j]
    inside = docs[:m] == docs[n - 1 :]
    return mix64(acc[inside], inplace=True), np.flatnonzero(inside)


def text_ngrams(texts: list[str], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n-gram hash uint64 [G], its text's index int64 [G]) of a batch of texts."""
    wh, docs = word_hashes(texts)
    grams, first = ngram_hashes(wh, docs, n)
    return grams, docs[first]


def index(grams: np.ndarray) -> np.ndarray:
    """The sorted distinct n-gram hashes uint64 [k]: what matching searches."""
    g = np.sort(grams)
    keep = np.ones(len(g), bool)
    keep[1:] = g[1:] != g[:-1]
    return g[keep]


def bitmap(sorted_grams: np.ndarray) -> np.ndarray:
    """A one-probe filter of the index: uint8 [2^b / 8] with bit (h mod 2^b) set for each hash,
    2^b >= 64 bits per n-gram (a ~1.5% false-positive rate, then a binary search decides),
    at least 2^16 and at most 2^32 bits (512 MB)."""
    b = min(32, max(16, (64 * max(1, len(sorted_grams)) - 1).bit_length()))
    bits = np.zeros(1 << (b - 3), np.uint8)
    low = (sorted_grams & np.uint64((1 << b) - 1)).astype(np.int64)
    np.bitwise_or.at(bits, low >> 3, (1 << (low & 7)).astype(np.uint8))
    return bits


def contains(
    sorted_grams: np.ndarray, grams: np.ndarray, bits: np.ndarray | None = None
) -> np.ndarray:
    """bool [G]: which of `grams` are in `sorted_grams` (sorted, distinct; a memmap is fine),
    through `bits` (its bitmap) first when given: most queries miss, and a bit test is one
    memory read where a binary search is ~18."""
    if len(sorted_grams) == 0 or len(grams) == 0:
        return np.zeros(len(grams), bool)
    out = np.zeros(len(grams), bool)
    cand = np.arange(len(grams))
    if bits is not None:
        low = (grams & np.uint64(len(bits) * 8 - 1)).astype(np.int64)
        cand = np.flatnonzero((bits[low >> 3] >> (low & 7).astype(np.uint8)) & 1)
    q = grams[cand]
    pos = np.minimum(np.searchsorted(sorted_grams, q), len(sorted_grams) - 1)
    out[cand] = np.asarray(sorted_grams[pos]) == q
    return out


def first_shared(text: str, n: int, sorted_grams: np.ndarray) -> str | None:
    """The first normalised n-gram of `text` found in `sorted_grams`, as words; None if none."""
    wh, docs = word_hashes([text])
    grams, first = ngram_hashes(wh, docs, n)
    hit = np.flatnonzero(contains(sorted_grams, grams))
    if len(hit) == 0:
        return None
    i = int(first[hit[0]])
    return " ".join(words(text)[i : i + n])
