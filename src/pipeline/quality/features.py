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
from pipeline.quality import segment
from pipeline.quality.ngram import HashTable, char_script_share

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
SHARE_WINDOW = 2000  # characters char_script_share reads (its default)

_LETTER_TOKEN = re.compile(r"[^\W\d_]+")  # runs of letters: stop words, word lengths
HASH_SEED = 0  # fixed: a saved model must hash words exactly as it did in training
_FEATURE_TOKEN = re.compile(r"[^\W_]+")  # runs of letters/digits: the hashed features
_NO_ALPHA_WORD = re.compile(r"(?<!\S)(?:[^\w\s]|[\d_])+(?!\S)")  # words without a letter
_SYMBOL = segment.SYMBOL_CHAR  # not prose punctuation
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
    """float32 [n, len(STAT_NAMES)]: `doc_stats` of every text, from one numpy pass per batch
    of up to STATS_BATCH texts and ~STATS_BATCH_CHARS characters (pipeline.quality.segment)
    instead of five regex and split passes per text. Equal to doc_stats row for row (tests), up
    to 64-bit fingerprint collisions."""
    return stats_and_script_share(texts, max_chars)[0]


def stats_and_script_share(
    texts: list[str], max_chars: int, window: int = SHARE_WINDOW
) -> tuple[np.ndarray, np.ndarray]:
    """(stats_matrix, float64 [n] ngram.char_script_share(text, window) of every text) from the
    same pass: the share from the batch's character classes, not one regex per text."""
    out = np.zeros((len(texts), len(STAT_NAMES)), np.float32)
    share = np.zeros(len(texts))
    cut = [t[:max_chars] for t in texts]
    ends = np.cumsum(np.fromiter(map(len, cut), np.int64, len(cut)))
    i = 0
    while i < len(cut):  # [i, j): up to STATS_BATCH texts, ~STATS_BATCH_CHARS characters
        j = int(np.searchsorted(ends, ends[i] - len(cut[i]) + STATS_BATCH_CHARS, side="right"))
        j = min(max(j, i + 1), i + STATS_BATCH)
        if window <= max_chars:
            out[i:j], share[i:j] = _stats_batch(cut[i:j], window)
        else:  # the share's window reads past the statistics' characters
            out[i:j] = _stats_batch(cut[i:j], 0)[0]
            share[i:j] = [char_script_share(t, window) for t in texts[i:j]]
        i = j
    return out, share


STATS_BATCH = 4096  # texts per pass: bounds memory; 12 bits of the per-document keys
# characters per pass (whole texts, at least one): the per-character arrays stay in cache
# (~15% less CPU than one pass over a 4 MB part, measured)
STATS_BATCH_CHARS = 1 << 18
_stop_table: HashTable | None = None


def _stop_fingerprints() -> HashTable:
    """The stop words' fingerprints, as a table (one bucket read per word, not a search)."""
    global _stop_table
    if _stop_table is None:
        _, cps, _ = segment.join(sorted(STOP_WORDS))
        start, end = segment.runs((segment.classes(cps) & segment.LETTER) > 0)
        _stop_table = HashTable(np.unique(segment.fingerprints(cps, start, end)))
    return _stop_table


def _per_doc(flags: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """int64 [n]: how many True in each text's range of a joined batch (its "\n" included:
    callers count classes "\n" is not in)."""
    out = np.zeros(len(starts) - 1, np.int64)
    # the last text has no "\n" after it: empty, it starts past the end (and counts 0)
    m = int(np.searchsorted(starts[:-1], len(flags)))
    if m:
        out[:m] = np.add.reduceat(flags, starts[:m], dtype=np.int64)
    return out


def _distinct_per_doc(doc: np.ndarray, fp: np.ndarray, n: int) -> np.ndarray:
    """int64 [n]: distinct fingerprints per document. The document sits in the key's top bits
    (n <= STATS_BATCH), the fingerprint in the rest, so one sort groups both."""
    bits = max(int(n).bit_length(), 1)
    key = (doc.astype(np.uint64) << np.uint64(64 - bits)) | (fp >> np.uint64(bits))
    s = np.sort(key)
    new = np.concatenate([[True], s[1:] != s[:-1]]) if len(s) else np.zeros(0, bool)
    return np.bincount((s[new] >> np.uint64(64 - bits)).astype(np.int64), minlength=n)


def _stats_batch(texts: list[str], window: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(texts)
    out = np.zeros((n, len(STAT_NAMES)))
    # the text as is: whitespace words, words without a letter, symbols, lines
    _, cps, st = segment.join(texts)
    f = segment.classes(cps)
    non_space = (f & segment.SPACE) == 0  # the "\n" between texts is a space
    share = _script_share(f, non_space, st, window) if window else np.zeros(n)
    w_start, w_end = segment.runs(non_space)
    num_words = np.diff(np.searchsorted(w_start, st))
    is_letter = (f & segment.LETTER) > 0
    # letters from a word's start to the next one's: the word's own (only spaces between)
    no_alpha = (
        np.add.reduceat(is_letter, w_start, dtype=np.int64) == 0
        if len(w_start)
        else np.zeros(0, bool)
    )
    w_doc = np.repeat(np.arange(n, dtype=np.int64), num_words)
    num_no_alpha = np.bincount(w_doc[no_alpha], minlength=n)
    chars = np.maximum(_per_doc(non_space, st), 1)
    symbols = _per_doc((f & segment.SYMBOL) > 0, st) / chars
    punct, dup = np.array([_line_stats(t) for t in texts]).reshape(n, 2).T
    # lowercased: letter runs (stop words, unique words, word length, duplicate trigrams)
    _, lcps, lst = segment.join([t.lower() for t in texts])
    l_start, l_end = segment.runs((segment.classes(lcps) & segment.LETTER) > 0)
    num_letters = np.diff(np.searchsorted(l_start, lst))
    fp = segment.fingerprints(lcps, l_start, l_end)
    l_doc = np.repeat(np.arange(n, dtype=np.int64), num_letters)
    denom = np.maximum(num_letters, 1)
    ss = _stop_fingerprints()
    stop = np.bincount(l_doc, weights=ss.rows(fp) < len(ss.keys), minlength=n) / denom
    first = np.concatenate([[0], np.cumsum(num_letters)])[:-1]
    rank = np.arange(len(fp), dtype=np.int64) - first[l_doc]
    win = rank < UNIQUE_WINDOW
    in_window = np.minimum(num_letters, UNIQUE_WINDOW)
    uniq = _distinct_per_doc(l_doc[win], fp[win], n) / np.maximum(in_window, 1)
    unique = np.where(in_window > 0, uniq, 0.0)
    sum_len = np.bincount(l_doc, weights=l_end - l_start, minlength=n)
    mean_len = np.where(num_letters > 0, sum_len / denom, 0.0)
    lo, hi = WORD_LEN_RANGE
    word_length = np.maximum(
        0.0, 1.0 - np.maximum(np.maximum(lo - mean_len, mean_len - hi), 0.0) / lo
    )
    tri = rank >= 2
    with np.errstate(over="ignore"):
        g = mix64(np.roll(fp, 2) * GOLDEN64 ^ np.roll(fp, 1), inplace=True) * GOLDEN64 ^ fp
    num_tri = np.maximum(num_letters - 2, 0)
    dup_t = 1.0 - _distinct_per_doc(l_doc[tri], mix64(g[tri]), n) / np.maximum(num_tri, 1)
    dup_tri = np.where(num_tri > 0, dup_t, 0.0)
    nw = np.maximum(num_words, 1)
    cols = (
        np.minimum(1.0, num_words / LENGTH_WORDS),
        1.0 - num_no_alpha / nw,
        stop,
        punct,
        unique,
        dup,
        dup_tri,
        np.minimum(1.0, symbols),
        word_length,
    )
    for j, c in enumerate(cols):
        out[:, j] = c
    out[num_words == 0] = 0.0
    return out, share


def _script_share(f: np.ndarray, non_space: np.ndarray, st: np.ndarray, window: int):
    """char_script_share of each text of a joined batch: among the non-space characters of its
    first `window` characters, the share in the unspaced scripts (sums over each text's window
    only: one reduceat per count, not prefix sums over the batch)."""
    a = st[:-1]
    b = np.minimum(a + window, st[1:] - 1)  # text i is [st[i], st[i + 1] - 1)
    head = np.zeros(len(a), np.int64)
    cc = np.zeros(len(a), np.int64)
    scripted = non_space & ((f & segment.CHAR_SCRIPT) > 0)
    # reduceat sums [at[2i], at[2i + 1]) only for windows that end before the array's end
    # (an empty one, a == b, reads one element: left at 0); the last text's may reach it
    inner = np.flatnonzero((a < b) & (b < len(f)))
    if len(inner):
        at = np.stack([a[inner], b[inner]], axis=1).reshape(-1)
        head[inner] = np.add.reduceat(non_space, at, dtype=np.int64)[::2]
        cc[inner] = np.add.reduceat(scripted, at, dtype=np.int64)[::2]
    if len(a) and a[-1] < b[-1] == len(f):
        head[-1] = np.count_nonzero(non_space[a[-1] :])
        cc[-1] = np.count_nonzero(scripted[a[-1] :])
    return np.where(head > 0, cc / np.maximum(head, 1), 0.0)


def _line_stats(text: str) -> tuple[float, float]:
    """(terminal_punct, dup_lines) of one text: str.splitlines and a set run at C speed per
    line, faster than any array pass (a line is long; hashing it costs a pass per character)."""
    lines = [s for s in (line.strip() for line in text.splitlines()) if s]
    if not lines:
        return 0.0, 0.0
    # a hard-wrapped line (the next one starts lowercase) continues its sentence: not unended
    ended = sum(
        a.endswith(_TERMINAL) or b[0].islower() for a, b in zip(lines, lines[1:], strict=False)
    )
    ended += lines[-1].endswith(_TERMINAL)
    return ended / len(lines), 1.0 - len(set(lines)) / len(lines)


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
