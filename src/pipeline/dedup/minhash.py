"""MinHash signatures of word n-gram shingles, vectorised across a batch of documents.

A batch is lowercased, stripped of punctuation and joined with NUL separators in one string; words
are hashed by tabulation over their UTF-8 bytes in numpy, n-gram shingles combine n word hashes,
and all permutations are one (shingles x num_perm) array op reduced with np.minimum.reduceat.
No Python loop runs per word, per shingle or per hash value.
"""

from __future__ import annotations

import functools

import numpy as np
import regex

# Unicode punctuation and symbols are deleted (datatrove/text-dedup simplify); whitespace runs
# and the NUL document separator are word boundaries.
_PUNCT = regex.compile(r"[\p{P}\p{S}]+")
_MAX_HASH = np.uint32(0xFFFFFFFF)
_WORD_POS = 64  # tabulation rows: byte positions past 64 in a word wrap around
_CHUNK_CELLS = 1 << 20  # shingles x num_perm cells per permutation block: 8 MiB of uint64


def simplify(text: str) -> str:
    """Lowercase, punctuation and symbols removed, whitespace runs collapsed to one space."""
    return " ".join(_PUNCT.sub("", text.lower()).split())


@functools.lru_cache(maxsize=8)
def _tables(seed: int, num_perm: int, ngram: int) -> tuple[np.ndarray, ...]:
    """Seeded constants: tabulation table [64, 256], n-gram multipliers [ngram], perms a."""
    rng = np.random.default_rng([seed, 0x6D696E68])  # "minh": independent of other seed users
    table = rng.integers(0, 2**64, size=(_WORD_POS, 256), dtype=np.uint64)
    mult = rng.integers(0, 2**64, size=ngram, dtype=np.uint64) | np.uint64(1)
    a = rng.integers(0, 2**64, size=num_perm, dtype=np.uint64) | np.uint64(1)
    for arr in (table, mult, a):
        arr.flags.writeable = False  # cached and shared between calls
    return table, mult, a


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, in place on a uint64 array: spreads every input bit over the word."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _byte_classes() -> tuple[np.ndarray, np.ndarray]:
    """Lookup tables over byte values: ASCII punctuation/symbols (deleted), ASCII whitespace."""
    punct = np.zeros(256, bool)
    punct[[ord(c) for c in map(chr, range(128)) if _PUNCT.fullmatch(c)]] = True
    space = np.zeros(256, bool)
    space[[ord(c) for c in " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"]] = True
    return punct, space


_ASCII_PUNCT, _ASCII_SPACE = _byte_classes()  # ASCII bytes (most of them) go through numpy


@functools.lru_cache(maxsize=1)
def _bmp_classes() -> np.ndarray:
    """uint8 [65536]: per BMP code point 0 = keep, 1 = punctuation/symbol (delete), 2 = space."""
    cls = np.zeros(0x10000, np.uint8)
    chars = "".join(map(chr, range(0x10000)))
    for m in _PUNCT.finditer(chars):
        cls[m.start() : m.end()] = 1
    cls[[i for i in range(0x10000) if chars[i].isspace()]] = 2
    return cls


def _wide(text: str) -> str:
    """Non-ASCII text: delete Unicode punctuation/symbols, whitespace -> ' ' (numpy on UTF-32)."""
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    bmp = cp < 0x10000
    if bmp.all():
        cls = _bmp_classes()[cp]
    else:
        cls = np.zeros(cp.size, np.uint8)
        cls[bmp] = _bmp_classes()[cp[bmp]]
        for u in np.unique(cp[~bmp]).tolist():  # astral code points (emoji...): few distinct
            c = chr(u)
            cls[cp == u] = 1 if _PUNCT.fullmatch(c) else (2 if c.isspace() else 0)
    out = cp.copy()
    out[cls == 2] = 32
    out = out[cls != 1]
    return out.tobytes().decode("utf-32-le", "surrogatepass")


def _simplified_bytes(texts: list[str]) -> np.ndarray:
    """The lowercased batch joined by NUL, ASCII punctuation deleted, as uint8 [bytes]."""
    parts = [t if t.isascii() else _wide(t) for t in texts]
    joined = "\x00".join(parts)
    if joined.count("\x00") != len(texts) - 1:  # a text holds NUL itself: make it a space
        joined = "\x00".join(t.replace("\x00", " ") for t in parts)
    joined = joined.lower()
    buf = np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    return buf[~_ASCII_PUNCT[buf]]


def word_hashes(texts: list[str], table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hash every word of the simplified batch (tabulation hashing of its UTF-8 bytes).

    Returns (hashes uint64 [num_words], words_per_doc int64 [len(texts)]).
    """
    buf = _simplified_bytes(texts)
    is_nul = buf == 0
    inside = np.flatnonzero(~(_ASCII_SPACE[buf] | is_nul))  # byte offsets inside a word
    if inside.size == 0:
        return np.zeros(0, np.uint64), np.zeros(len(texts), np.int64)
    starts = np.ones(inside.size, bool)  # a word starts where the previous byte is not in it
    starts[1:] = inside[1:] != inside[:-1] + 1
    first = np.flatnonzero(starts)  # index into `inside` of each word's first byte
    pos = np.arange(inside.size) - np.repeat(first, np.diff(np.append(first, inside.size)))
    np.minimum(pos, _WORD_POS - 1, out=pos)  # bytes past 63 share the last row
    vals = table.ravel()[pos * 256 + buf[inside]]
    hashes = _mix64(np.bitwise_xor.reduceat(vals, first))
    doc_of_word = np.searchsorted(np.flatnonzero(is_nul), inside[first])
    counts = np.bincount(doc_of_word, minlength=len(texts)).astype(np.int64)
    return hashes, counts


def shingle_hashes(
    words: np.ndarray, counts: np.ndarray, mult: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of word n-grams (n = len(mult)) that do not cross documents.

    A document with 0 < k < n words gets one shingle of its k words; one with none gets none.
    Returns (shingles uint64 [S], shingles_per_doc int64 [len(counts)]).
    """
    n = len(mult)
    ends = np.cumsum(counts)
    starts = ends - counts
    total = int(ends[-1]) if len(ends) else 0
    doc_end = np.repeat(ends, counts)  # per word: end offset of its document
    j = np.arange(total)
    acc = np.zeros(total, np.uint64)
    padded = np.concatenate([words, np.zeros(n, np.uint64)])
    for k in range(n):  # n is small (1..~13): a loop over shingle width, not over data
        term = padded[k : k + total] * mult[k]
        term[j + k >= doc_end] = 0
        acc += term
    per_doc = np.where(counts >= n, counts - n + 1, np.minimum(counts, 1))
    keep = (j + n <= doc_end) | ((j == np.repeat(starts, counts)) & np.repeat(counts < n, counts))
    return _mix64(acc[keep]), per_doc.astype(np.int64)


def _long_doc_min(shingles: np.ndarray, a: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """Signature uint32 [num_perm] of one document whose shingles exceed one block."""
    step = buf.shape[1]
    best = np.full(len(a), np.iinfo(np.uint64).max, np.uint64)
    for lo in range(0, len(shingles), step):
        block = shingles[lo : lo + step]
        cells = buf[:, : len(block)]
        np.multiply(a[:, None], block[None, :], out=cells)
        np.minimum(best, cells.min(axis=1), out=best)
    return (best >> np.uint64(32)).astype(np.uint32)


def signatures(shingles: np.ndarray, per_doc: np.ndarray, a: np.ndarray) -> np.ndarray:
    """MinHash signatures: min over a doc's shingles x of (a_i * x mod 2^64) >> 32.

    `shingles` uint64 [S], already well mixed; `a` odd uint64 [num_perm]. Multiply-shift
    (Dietzfelbinger et al. 1997) is universal; the shift commutes with min, so it runs once per
    signature value. One multiply and one reduce per cell: the (S x num_perm) array is the cost.
    Docs without shingles get all 0xFFFFFFFF. Returns uint32 [num_docs, num_perm].
    """
    num_docs, num_perm = len(per_doc), len(a)
    out = np.full((num_docs, num_perm), _MAX_HASH, np.uint32)
    has = np.flatnonzero(per_doc > 0)
    if has.size == 0:
        return out
    offsets = np.concatenate([[0], np.cumsum(per_doc)])
    ends = offsets[has + 1]
    step = max(1, _CHUNK_CELLS // num_perm)
    buf = np.empty((num_perm, step), np.uint64)  # reused: no page faults per block
    i = 0
    while i < has.size:  # blocks of whole documents, ~step shingles each (cache-sized)
        lo = offsets[has[i]]
        j = max(i + 1, int(np.searchsorted(ends, lo + step, side="right")))
        hi = ends[j - 1]
        if hi - lo > step:  # one document longer than a block: running min over sub-blocks
            out[has[i]] = _long_doc_min(shingles[lo:hi], a, buf)
            i = j
            continue
        # [num_perm, block]: reduceat along the contiguous axis is ~20x faster than across it
        cells = buf[:, : hi - lo]
        np.multiply(a[:, None], shingles[None, lo:hi], out=cells)
        mins = np.minimum.reduceat(cells, offsets[has[i:j]] - lo, axis=1)
        out[has[i:j]] = (mins >> np.uint64(32)).astype(np.uint32).T
        i = j
    return out


def minhash_texts(texts: list[str], num_perm: int, ngram: int, seed: int) -> np.ndarray:
    """Signatures uint32 [len(texts), num_perm] for raw texts (simplified here)."""
    table, mult, a = _tables(seed, num_perm, ngram)
    words, counts = word_hashes(texts, table)
    shingles, per_doc = shingle_hashes(words, counts, mult)
    return signatures(shingles, per_doc, a)


def shingle_sets(texts: list[str], ngram: int, seed: int) -> list[np.ndarray]:
    """Each text's set of 64-bit shingle hashes, sorted unique uint64 arrays (exact Jaccard)."""
    table, mult, _ = _tables(seed, 1, ngram)
    words, counts = word_hashes(texts, table)
    shingles, per_doc = shingle_hashes(words, counts, mult)
    return [np.unique(s) for s in np.split(shingles, np.cumsum(per_doc)[:-1])]


def exact_jaccard(sets: dict[int, np.ndarray], pairs: np.ndarray) -> np.ndarray:
    """float64 [E]: |A & B| / |A | B| for each (i, j) row of `pairs`, sets from shingle_sets."""
    out = np.empty(len(pairs))
    for k, (i, j) in enumerate(pairs.tolist()):  # one vectorised intersect per candidate pair
        a, b = sets[i], sets[j]
        inter = len(np.intersect1d(a, b, assume_unique=True))
        out[k] = inter / max(len(a) + len(b) - inter, 1)
    return out


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Share of equal signature values per row: float64 [E] for uint32 [E, num_perm] pairs."""
    return (sig_a == sig_b).mean(axis=1)
