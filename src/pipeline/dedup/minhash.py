"""MinHash signatures of word n-gram shingles, vectorised across a batch of documents.

A batch is lowercased and stripped of punctuation (bytes.translate for ASCII texts, numpy over
UTF-32 for the others) and joined by spaces into one buffer; each word is hashed from its bytes
read as 8-byte words (one gather for words up to 8 bytes), n-gram shingles combine n word hashes,
and all permutations are one (num_perm x shingles) array op reduced with np.minimum.reduceat.
No Python loop runs per word, per shingle or per hash value.
"""

from __future__ import annotations

import functools

import numpy as np
import regex

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64

# Unicode punctuation and symbols are deleted (datatrove/text-dedup simplify); whitespace runs
# are word boundaries.
_PUNCT = regex.compile(r"[\p{P}\p{S}]+")
_MAX_HASH = np.uint32(0xFFFFFFFF)
_CHUNK_CELLS = 1 << 20  # shingles x num_perm cells per permutation block: 4 MiB of uint32
_PAD = 8  # NUL bytes after the buffer, so an 8-byte read at any word start stays inside it
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], np.uint64)  # low k bytes kept
_ASCII_SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # exactly the ASCII chars with str.isspace()
_DELETED = np.uint32(0xFFFFFFFF)  # _bmp_map value of a code point that is deleted
_CONTEXT_LOWER = "\u0130\u03a3"  # İ lowers to 2 chars, Σ by context (final sigma): str.lower


def simplify(text: str) -> str:
    """Lowercase, punctuation and symbols removed, whitespace runs collapsed to one space."""
    return " ".join(_PUNCT.sub("", text.lower()).split())


@functools.lru_cache(maxsize=8)
def _tables(seed: int, num_perm: int, ngram: int) -> tuple[np.ndarray, ...]:
    """Seeded constants: word keys [2], n-gram multipliers [ngram], permutation multipliers a."""
    rng = np.random.default_rng([seed, 0x6D696E68])  # "minh": independent of other seed users
    keys = rng.integers(0, 2**64, size=2, dtype=np.uint64)
    mult = rng.integers(0, 2**64, size=ngram, dtype=np.uint64) | np.uint64(1)
    a = rng.integers(0, 2**32, size=num_perm, dtype=np.uint32) | np.uint32(1)
    for arr in (keys, mult, a):
        arr.flags.writeable = False  # cached and shared between calls
    return keys, mult, a


def _ascii_tables() -> tuple[bytes, bytes]:
    """bytes.translate arguments: A-Z -> a-z, whitespace and NUL -> ' '; punctuation deleted."""
    src = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + _ASCII_SPACES + "\x00"
    dst = "abcdefghijklmnopqrstuvwxyz" + " " * (len(_ASCII_SPACES) + 1)
    table = bytes.maketrans(src.encode(), dst.encode())
    return table, bytes(c for c in range(128) if _PUNCT.fullmatch(chr(c)))


_ASCII_TABLE, _ASCII_DELETE = _ascii_tables()


def _simple(c: str) -> int:
    """One character's simplified code point: deleted, space (32), or its lowercase."""
    if _PUNCT.fullmatch(c):
        return int(_DELETED)
    if c.isspace():
        return 32
    low = c.lower()
    return ord(low) if len(low) == 1 and c not in _CONTEXT_LOWER else ord(c)


@functools.lru_cache(maxsize=1)
def _bmp_map() -> np.ndarray:
    """uint32 [65536]: _simple() of every BMP code point (built once per process, ~50 ms)."""
    chars = "".join(map(chr, range(0x10000)))
    lower = (ord(low) if len(low := c.lower()) == 1 else ord(c) for c in chars)
    out = np.fromiter(lower, np.uint32, 0x10000)
    for c in _CONTEXT_LOWER:
        out[ord(c)] = ord(c)
    out[[i for i in range(0x10000) if chars[i].isspace()]] = 32
    for m in _PUNCT.finditer(chars):
        out[m.start() : m.end()] = _DELETED
    return out


def _wide(texts: list[str]) -> list[bytes]:
    """Non-ASCII texts, all at once: Unicode punctuation/symbols deleted, whitespace -> ' ',
    lowercased (a numpy lookup over UTF-32 code points), NUL -> ' '; each as UTF-8 bytes."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:  # a text holds NUL itself: make it a space
        joined = "\x00".join(t.replace("\x00", " ") for t in texts)
    cp = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
    simple = np.take(_bmp_map(), cp, mode="clip")  # astral code points: fixed below
    astral = np.flatnonzero(cp > 0xFFFF)
    for u in np.unique(cp[astral]).tolist():  # emoji and the like: few distinct
        simple[astral[cp[astral] == u]] = _simple(chr(u))
    keep = simple != _DELETED
    text = simple[keep].tobytes().decode("utf-32-le", "surrogatepass")
    if any(c in text for c in _CONTEXT_LOWER):  # rare: lowercase the unlowered text as a whole
        unlowered = np.where(simple == 32, np.uint32(32), cp)[keep]
        text = unlowered.tobytes().decode("utf-32-le", "surrogatepass").lower()
    return text.encode("utf-8", "surrogatepass").split(b"\x00")


def _simplified_bytes(texts: list[str]) -> tuple[bytes, np.ndarray]:
    """The simplified batch as one buffer: ' ' + docs joined by ' ' + ' ' + _PAD NUL bytes;
    and int64 [len(texts) + 1], the offset of each document's first byte (last: the end)."""
    parts: list[bytes] = [
        t.encode("ascii").translate(_ASCII_TABLE, _ASCII_DELETE) if t.isascii() else b""
        for t in texts
    ]
    wide = [i for i, t in enumerate(texts) if not t.isascii()]
    if wide:
        for i, b in zip(wide, _wide([texts[i] for i in wide]), strict=True):
            parts[i] = b
    bounds = np.ones(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)) + 1, out=bounds[1:])
    bounds[1:] += 1
    return b" " + b" ".join(parts) + b" " + bytes(_PAD), bounds


def _long_words(
    win: np.ndarray, starts: np.ndarray, lens: np.ndarray, key: np.uint64
) -> np.ndarray:
    """uint64 per word longer than 8 bytes: sum of mix64(chunk_k + key + k * golden) over its
    8-byte chunks k >= 1 (the last one masked to the word's end)."""
    extra = (lens - 1) // 8  # chunks after the first
    first = np.cumsum(extra) - extra
    k = np.arange(int(extra.sum())) - np.repeat(first - 1, extra)  # 1, 2, ... within a word
    chunk = win[np.repeat(starts, extra) + 8 * k]
    chunk &= _BYTE_MASKS[np.minimum(np.repeat(lens, extra) - 8 * k, 8)]
    chunk += key + k.astype(np.uint64) * GOLDEN64  # odd step between a word's chunk keys
    return np.add.reduceat(mix64(chunk, inplace=True), first)


def word_hashes(texts: list[str], keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hash every word of the simplified batch: mix64(first 8 bytes ^ key) for words up to 8
    bytes (injective: a word holds no NUL), longer ones add their further chunks first.

    Returns (hashes uint64 [num_words], words_per_doc int64 [len(texts)]).
    """
    data, bounds = _simplified_bytes(texts)
    buf = np.frombuffer(data, np.uint8, len(data) - _PAD)
    space = np.flatnonzero(buf == 32)  # the buffer starts and ends with one
    gap = np.diff(space)
    word = np.flatnonzero(gap > 1)
    starts, lens = space[word] + 1, gap[word] - 1
    win = np.ndarray((len(data) - 7,), "<u8", data, 0, (1,))  # 8 bytes at every offset
    h = win[starts]
    h &= _BYTE_MASKS[np.minimum(lens, 8)]
    long = np.flatnonzero(lens > 8)
    if long.size:
        h[long] ^= _long_words(win, starts[long], lens[long], keys[1])
    h ^= keys[0]
    return mix64(h, inplace=True), np.diff(np.searchsorted(starts, bounds))


def shingle_hashes(
    words: np.ndarray, counts: np.ndarray, mult: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes mix64(sum_k word[j+k] * mult[k]) of word n-grams (n = len(mult)) that do not
    cross documents. A document with 0 < k < n words gets one shingle of its k words; one with
    none gets none. Returns (shingles uint64 [S], shingles_per_doc int64 [len(counts)]).
    """
    n, total = len(mult), len(words)
    per_doc = np.where(counts >= n, counts - n + 1, np.minimum(counts, 1)).astype(np.int64)
    word_start = np.cumsum(counts) - counts
    out_start = np.cumsum(per_doc) - per_doc
    windows = max(total - n + 1, 0)
    acc = words[:windows] * mult[0]  # every window of n words, crossing documents or not
    for k in range(1, n):  # n is small (1..~13): a loop over shingle width, not over data
        acc += words[k : k + windows] * mult[k]
    # shingle i of doc d is window word_start[d] + i
    src = np.repeat(word_start - out_start, per_doc) + np.arange(int(per_doc.sum()))
    out = np.take(acc, src, mode="clip") if windows else np.zeros(len(src), np.uint64)
    short = np.flatnonzero((counts > 0) & (counts < n))
    if short.size:  # one shingle of their k < n words
        s, c = word_start[short], counts[short]
        val = np.zeros(short.size, np.uint64)
        for k in range(int(c.max())):
            val += np.where(k < c, words[np.minimum(s + k, total - 1)] * mult[k], np.uint64(0))
        out[out_start[short]] = val
    return mix64(out, inplace=True), per_doc


def _long_doc_min(x: np.ndarray, a: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """Signature uint32 [num_perm] of one document whose shingles exceed one block."""
    step = buf.shape[1]
    best = np.full(len(a), _MAX_HASH, np.uint32)
    for lo in range(0, len(x), step):
        block = x[lo : lo + step]
        cells = buf[:, : len(block)]
        np.multiply(a[:, None], block[None, :], out=cells)
        np.minimum(best, cells.min(axis=1), out=best)
    return best


def signatures(shingles: np.ndarray, per_doc: np.ndarray, a: np.ndarray) -> np.ndarray:
    """MinHash signatures: min over a doc's shingles of h_i(x) = a_i * x mod 2^32.

    x = the top 32 bits of the well-mixed 64-bit shingle hash; `a` odd uint32 [num_perm], so
    each h_i is a bijection of the 32-bit values (multiplicative hashing; its estimates match
    the binomial variance, see docs/dedup.md). One uint32 multiply and one reduce per cell:
    the (num_perm x S) array is the cost, and 32-bit lanes halve it against 64-bit ones.
    Docs without shingles get all 0xFFFFFFFF. Returns uint32 [num_docs, num_perm].
    """
    num_docs, num_perm = len(per_doc), len(a)
    out = np.full((num_docs, num_perm), _MAX_HASH, np.uint32)
    has = np.flatnonzero(per_doc > 0)
    if has.size == 0:
        return out
    x = (shingles >> np.uint64(32)).astype(np.uint32)
    offsets = np.concatenate([[0], np.cumsum(per_doc)])
    ends = offsets[has + 1]
    step = max(1, _CHUNK_CELLS // num_perm)
    buf = np.empty((num_perm, step), np.uint32)  # reused: no page faults per block
    i = 0
    while i < has.size:  # blocks of whole documents, ~step shingles each (cache-sized)
        lo = offsets[has[i]]
        j = max(i + 1, int(np.searchsorted(ends, lo + step, side="right")))
        hi = ends[j - 1]
        if hi - lo > step:  # one document longer than a block: running min over sub-blocks
            out[has[i]] = _long_doc_min(x[lo:hi], a, buf)
            i = j
            continue
        # [num_perm, block]: reduceat along the contiguous axis is ~20x faster than across it
        cells = buf[:, : hi - lo]
        np.multiply(a[:, None], x[None, lo:hi], out=cells)
        out[has[i:j]] = np.minimum.reduceat(cells, offsets[has[i:j]] - lo, axis=1).T
        i = j
    return out


def minhash_texts(texts: list[str], num_perm: int, ngram: int, seed: int) -> np.ndarray:
    """Signatures uint32 [len(texts), num_perm] for raw texts (simplified here)."""
    keys, mult, a = _tables(seed, num_perm, ngram)
    words, counts = word_hashes(texts, keys)
    shingles, per_doc = shingle_hashes(words, counts, mult)
    return signatures(shingles, per_doc, a)


def text_shingles(texts: list[str], ngram: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(shingle hashes uint64 [S], shingles per text int64): what minhash_texts and shingle_sets
    both start from (they do not depend on num_perm)."""
    keys, mult, _ = _tables(seed, 1, ngram)
    words, counts = word_hashes(texts, keys)
    return shingle_hashes(words, counts, mult)


def minhash_shingles(
    shingles: np.ndarray, per_doc: np.ndarray, num_perm: int, ngram: int, seed: int
) -> np.ndarray:
    """minhash_texts from text_shingles' output."""
    return signatures(shingles, per_doc, _tables(seed, num_perm, ngram)[2])


def sets_of_rows(shingles: np.ndarray, per_doc: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """shingle_sets of the texts `rows` (indices) from text_shingles' output."""
    if not len(rows):
        return []
    starts = np.cumsum(per_doc) - per_doc
    rows = np.asarray(rows, np.int64)
    pick = [np.arange(starts[r], starts[r] + per_doc[r]) for r in rows.tolist()]
    return _unique_runs(shingles[np.concatenate(pick).astype(np.int64)], per_doc[rows])


def shingle_sets(texts: list[str], ngram: int, seed: int) -> list[np.ndarray]:
    """Each text's set of 64-bit shingle hashes, sorted unique uint64 arrays (exact Jaccard)."""
    return _unique_runs(*text_shingles(texts, ngram, seed))


def _unique_runs(shingles: np.ndarray, per_doc: np.ndarray) -> list[np.ndarray]:
    """Each document's run of `shingles` (per_doc long) as a sorted unique array."""
    # each document's run sorted in place, then one pass for repeats (np.unique per document
    # costs ~4x the hashing: its Python overhead, not the sort)
    ends = np.cumsum(per_doc)
    shingles = shingles.copy()
    for lo, hi in zip((ends - per_doc).tolist(), ends.tolist(), strict=True):
        shingles[lo:hi].sort()
    doc = np.repeat(np.arange(len(per_doc), dtype=np.int64), per_doc)
    first = np.ones(len(shingles), bool)
    first[1:] = (shingles[1:] != shingles[:-1]) | (doc[1:] != doc[:-1])
    bounds = np.cumsum(np.bincount(doc[first], minlength=len(per_doc)))[:-1]
    return np.split(shingles[first], bounds)


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
