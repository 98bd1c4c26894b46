"""One segmentation of a batch of documents, shared by every statistic that reads words.

The texts are joined with "\\n" (whitespace, so no word, token or line crosses a document) and
measured once: code points, character classes (pipeline.clean.charclass), word spans and their
64-bit content hashes, as numpy arrays over the joined text. Each document's words are a slice
of the batch's word arrays (`word_offsets`). Per-document numpy calls cost ~1-5 us each, which
on 2 KB documents is more than the work; one call per batch costs ~1 ns per character.
No rules here (pipeline.clean.textstats) and no tokenizer (the quality LM may reuse the words).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.clean.charclass import NUM_CLASSES, SPACE, char_classes, word_spans
from pipeline.hashing import poly_powers

CHUNK_CHARS = 1 << 20  # characters per segmented batch: ~30 MB of arrays, a cache-friendly size


@dataclass
class Segments:
    """A batch of documents as one text and numpy spans over it (positions are code points)."""

    text: str  # the documents joined by "\n"
    doc_starts: np.ndarray  # int64 [d]: document i is text[doc_starts[i] : doc_ends[i]]
    doc_ends: np.ndarray  # int64 [d]
    cp: np.ndarray  # uint8 (ASCII batch) or uint32 [n]: code points of `text`
    cls: np.ndarray  # uint8 [n]: character classes (charclass.SPACE, LATIN, ...)
    word_starts: np.ndarray  # int64 [w]: words (whitespace tokens; one per unspaced letter)
    word_ends: np.ndarray  # int64 [w]
    word_offsets: np.ndarray  # int64 [d + 1]: document i's words are [offsets[i], offsets[i+1])
    word_hashes: np.ndarray  # uint64 [w]: content hash of each word (hashing.span_hashes)
    prefix: np.ndarray  # uint64 [n + 1]: polynomial prefix sums of cp, for span_hashes
    _tokens: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    _word_doc: np.ndarray | None = None

    def span_hashes(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """uint64 [k]: hashing.span_hashes of text[starts[i]:ends[i]] (position-free)."""
        return (self.prefix[ends] - self.prefix[starts]) * poly_powers(len(self.cp))[1][starts]

    def tokens(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) int64 [t]: whitespace tokens, as str.split() cuts them (runs of
        words with no space between: the words split only unspaced letters off)."""
        if self._tokens is None:
            ws, we, cls = self.word_starts, self.word_ends, self.cls
            first = cls[np.maximum(ws - 1, 0)] == SPACE
            first[ws == 0] = True
            last = cls[np.minimum(we, len(cls) - 1)] == SPACE
            last[we == len(cls)] = True
            self._tokens = (ws[first], we[last], self.word_doc()[first])
        return self._tokens[:2]

    def token_doc(self) -> np.ndarray:
        """int64 [t]: the document of each whitespace token."""
        self.tokens()
        return self._tokens[2]

    @property
    def num_docs(self) -> int:
        return len(self.doc_starts)

    def word_doc(self) -> np.ndarray:
        """int64 [w]: the document of each word."""
        if self._word_doc is None:
            self._word_doc = np.repeat(np.arange(self.num_docs), np.diff(self.word_offsets))
        return self._word_doc

    def class_counts(self) -> np.ndarray:
        """int64 [d, NUM_CLASSES]: characters of each class per document."""
        d = self.num_docs
        lengths = self.doc_ends - self.doc_starts
        # int64 keys: np.bincount casts any other type to them first (a copy of the batch)
        key = np.repeat(np.arange(0, d * NUM_CLASSES, NUM_CLASSES, np.int64), lengths + 1)
        key = key[: len(self.cls)]
        key += self.cls
        counts = np.bincount(key, minlength=d * NUM_CLASSES).reshape(d, NUM_CLASSES)
        counts[:-1, SPACE] -= 1  # the "\n" joining document i to i + 1
        return counts


def doc_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """int64 [d]: sums of values (bool or int, [offsets[-1]]) over each [offsets[i],
    offsets[i+1]) (np.add.reduceat: one pass, no per-element document ids)."""
    if len(offsets) < 2:
        return np.zeros(0, np.int64)
    # a 0 after the values keeps every start a valid index (an empty last range)
    sums = np.add.reduceat(np.append(values, 0), offsets[:-1], dtype=np.int64)
    sums[offsets[1:] == offsets[:-1]] = 0  # reduceat gives values[i] for an empty range
    return sums


def segment(texts: list[str]) -> Segments:
    """Segment a batch of texts (without lone surrogates) into words, all at once."""
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    starts = np.zeros(len(texts), np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    text = "\n".join(texts)
    cp, cls = char_classes(text)
    ws, we = word_spans(cp, cls)
    offsets = np.searchsorted(ws, np.append(starts, len(text) + 1))
    pw, inv = poly_powers(len(cp))
    prefix = np.empty(len(cp) + 1, np.uint64)
    prefix[0] = 0
    np.multiply(cp, pw[: len(cp)], out=prefix[1:])  # in place: no 8-byte temporaries
    np.cumsum(prefix[1:], out=prefix[1:])
    hashes = (prefix[we] - prefix[ws]) * inv[ws]  # as hashing.span_hashes
    return Segments(text, starts, starts + lengths, cp, cls, ws, we, offsets, hashes, prefix)


def chunks(lengths: list[int], max_chars: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    """[(lo, hi)]: consecutive index ranges of about max_chars characters (at least one doc)."""
    out, lo, size = [], 0, 0
    for i, n in enumerate(lengths):
        if size and size + n > max_chars:
            out.append((lo, i))
            lo, size = i, 0
        size += n + 1
    if lo < len(lengths):
        out.append((lo, len(lengths)))
    return out
