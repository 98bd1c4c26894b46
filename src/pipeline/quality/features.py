"""Per-document statistics (each in [0, 1]), the heuristic score, and hashed n-gram features.

Statistics follow published rules where one exists (Gopher word/alpha/duplicate-line rules,
FineWeb's line punctuation ratio); the heuristic score is sigmoid(bias + sum(weight * stat)).
Features are word unigrams + bigrams hashed into `dims` buckets (xxh64), log-tf, L2-normalised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import xxhash

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64

# The order of the columns of `stats_matrix` and of the model's statistic weights.
STAT_NAMES = (
    "length",
    "alpha_words",
    "stop_words",
    "terminal_punct",
    "unique_words",
    "dup_lines",
    "dup_trigrams",
    "symbols",
    "word_length",
)

# Heuristic defaults, tuned on the toy corpus and checked on real text (docs/quality.md):
# real prose scores 0.8-0.99; keyword spam, symbol soup, repetition and boilerplate < 0.1.
DEFAULT_WEIGHTS = {
    "length": 5.0,
    "alpha_words": 2.0,
    "stop_words": 8.0,
    "terminal_punct": 3.0,
    "unique_words": 4.0,
    "dup_lines": -6.0,
    "dup_trigrams": -6.0,
    "symbols": -8.0,
    "word_length": 1.0,
}
DEFAULT_BIAS = -12.0

# Gopher's 8 stop words plus the commonest English function words: real prose is ~35-50% these.
STOP_WORDS = frozenset(
    """the be to of and that have with a an in on at for from by as is are was
were been has had it its this these those he she they we you i his her their our your not but or
if so then than there what which who when where will would can could do does did into about
""".split()
)

LENGTH_WORDS = 50  # Gopher's minimum: length = min(1, words / 50)
UNIQUE_WINDOW = 200  # unique-word ratio over the first 200 words: independent of length
WORD_LEN_RANGE = (3.0, 10.0)  # Gopher: mean word length within [3, 10] characters

_LETTER_TOKEN = re.compile(r"[^\W\d_]+")  # runs of letters: stop words, word lengths
HASH_SEED = 0  # fixed: a saved model must hash words exactly as it did in training
_FEATURE_TOKEN = re.compile(r"[^\W_]+")  # runs of letters/digits: the hashed features
_NO_ALPHA_WORD = re.compile(r"(?<!\S)(?:[^\w\s]|[\d_])+(?!\S)")  # words without a letter
_SYMBOL = re.compile(r"[^\w\s.,;:!?'\"()\-\u2019\u201c\u201d]")  # not prose punctuation
_TERMINAL = (".", "!", "?", '"', "'", "\u201d", "\u2019", "\u2026", ")")


def doc_stats(text: str, max_chars: int) -> tuple[float, ...]:
    """The STAT_NAMES statistics of one document (its first `max_chars` characters).

    A document with no words gets all zeros (it is dropped as `no_words` by the stage).
    """
    text = text[:max_chars]
    words = text.split()
    num_words = len(words)
    if num_words == 0:
        return (0.0,) * len(STAT_NAMES)
    letters = _LETTER_TOKEN.findall(text.lower())
    num_letters = max(len(letters), 1)
    stop = sum(map(STOP_WORDS.__contains__, letters)) / num_letters
    window = letters[:UNIQUE_WINDOW]
    unique = len(set(window)) / len(window) if window else 0.0
    mean_len = sum(map(len, letters)) / num_letters if letters else 0.0
    lo, hi = WORD_LEN_RANGE
    word_length = max(0.0, 1.0 - max(lo - mean_len, mean_len - hi, 0.0) / lo)
    trigrams = list(zip(letters, letters[1:], letters[2:], strict=False))
    dup_tri = 1.0 - len(set(trigrams)) / len(trigrams) if trigrams else 0.0
    lines = [s for s in (line.strip() for line in text.splitlines()) if s]
    # a hard-wrapped line (the next one starts lowercase) continues its sentence: not unended
    ended = [
        a.endswith(_TERMINAL) or b[0].islower() for a, b in zip(lines, lines[1:], strict=False)
    ]
    ended.append(lines[-1].endswith(_TERMINAL) if lines else False)
    punct = sum(ended) / max(len(lines), 1)
    dup = 1.0 - len(set(lines)) / len(lines) if lines else 0.0
    non_space = sum(map(len, words))
    symbols = len(_SYMBOL.findall(text)) / max(non_space, 1)
    return (
        min(1.0, num_words / LENGTH_WORDS),
        1.0 - len(_NO_ALPHA_WORD.findall(text)) / num_words,
        stop,
        punct,
        unique,
        dup,
        dup_tri,
        min(1.0, symbols),
        word_length,
    )


def stats_matrix(texts: list[str], max_chars: int) -> np.ndarray:
    """float32 [n, len(STAT_NAMES)]."""
    out = np.zeros((len(texts), len(STAT_NAMES)), np.float32)
    for i, text in enumerate(texts):
        out[i] = doc_stats(text, max_chars)
    return out


def heuristic_score(stats: np.ndarray, weights: dict[str, float], bias: float) -> np.ndarray:
    """sigmoid(bias + stats @ w): float64 [n] in (0, 1); `weights` keys are STAT_NAMES."""
    w = np.array([weights.get(name, 0.0) for name in STAT_NAMES], np.float64)
    z = bias + (stats.astype(np.float64) * w).sum(axis=1)
    return 1.0 / (1.0 + np.exp(-z))


@dataclass
class Csr:
    """A sparse row matrix: row i is indices/data[indptr[i]:indptr[i+1]], columns ascending."""

    indptr: np.ndarray  # int64 [n + 1]
    indices: np.ndarray  # int32 [nnz]
    data: np.ndarray  # float32 [nnz]
    num_cols: int

    @property
    def num_rows(self) -> int:
        return len(self.indptr) - 1

    def row_ids(self) -> np.ndarray:
        """int64 [nnz]: the row of each stored value."""
        return np.repeat(np.arange(self.num_rows, dtype=np.int64), np.diff(self.indptr))

    def take(self, rows: np.ndarray) -> Csr:
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lengths = ends - starts
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        pos = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
        return Csr(indptr, self.indices[pos], self.data[pos], self.num_cols)


def vstack(mats: list[Csr], num_cols: int) -> Csr:
    indptr = [np.zeros(1, np.int64)]
    offset = 0
    for m in mats:
        indptr.append(m.indptr[1:] + offset)
        offset += int(m.indptr[-1])
    cat = np.concatenate
    return Csr(
        cat(indptr),
        cat([m.indices for m in mats] or [np.zeros(0, np.int32)]),
        cat([m.data for m in mats] or [np.zeros(0, np.float32)]),
        num_cols,
    )


def hashed_features(texts: list[str], dims: int, hash_seed: int, max_chars: int) -> Csr:
    """Word unigrams + adjacent bigrams (lowercased letter/digit runs) hashed into `dims`
    buckets (a power of two), value 1 + ln(count), each row L2-normalised (empty rows stay 0).

    Each distinct word is hashed once per call (xxh64), so cost is one dict lookup per token.
    """
    tokens: list[str] = []
    lengths = np.zeros(len(texts), np.int64)
    for i, text in enumerate(texts):
        toks = _FEATURE_TOKEN.findall(text[:max_chars].lower())
        lengths[i] = len(toks)
        tokens.extend(toks)
    vocab = {w: i for i, w in enumerate(dict.fromkeys(tokens))}  # C-speed dedup, then ids
    ids = np.fromiter(map(vocab.__getitem__, tokens), np.int64, count=len(tokens))
    digest = xxhash.xxh64_intdigest
    words = np.fromiter(
        (digest(w.encode("utf-8", "surrogatepass"), hash_seed) for w in vocab),
        np.uint64,
        count=len(vocab),
    )
    tok = words[ids]
    doc = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    same = doc[:-1] == doc[1:]  # bigrams never cross a document boundary
    with np.errstate(over="ignore"):
        bigram = mix64(tok[:-1][same] * GOLDEN64 ^ tok[1:][same], inplace=True)
    mask = np.uint64(dims - 1)
    cols = np.concatenate([tok & mask, bigram & mask]).astype(np.int64)
    rows = np.concatenate([doc, doc[:-1][same]])
    keys, counts = np.unique(rows * dims + cols, return_counts=True)
    row = keys // dims
    data = 1.0 + np.log(counts.astype(np.float64))
    norms = np.sqrt(np.bincount(row, weights=data * data, minlength=len(texts)))
    data = (data / norms[row]).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=len(texts)))])
    return Csr(indptr.astype(np.int64), (keys % dims).astype(np.int32), data, dims)
