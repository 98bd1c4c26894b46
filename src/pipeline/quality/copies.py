"""Documents stitched from the sentences of several other documents of the corpus (spun pages,
cross-document splices): a corpus-wide signal no n-gram window or reference sample sees.

A *long* sentence has at least folds.SENT_MIN_TOKENS LM tokens (sentences end after a
sentence-end token; the key hashes the token ids in order, `folds.sentence_keys`). Over the
whole corpus, each long sentence has its *holders*, the documents that contain it. Per
document d, over its long sentences held by at most MAX_HOLDERS documents (more: boilerplate,
formula lines, never evidence):

- `den`: their tokens;
- `shared`: the tokens of those also held by another document;
- `top`: the most tokens d shares with any single other document (its best partner).

`splice_share` = (shared - top) / den: the share of the document found in other documents
*beyond its best partner*. A near copy of one document (a mirror, a reshuffled copy, a
perturbed duplicate that dedup let through) shares nearly everything with one partner: ~0. A
real document whose sentences were copied elsewhere shares a part of itself, usually with
one or two copiers. A page stitched from k documents shares ~all of itself, ~1/k with each:
1 - 1/k. The gate also asks that almost nothing of the document is its own (`unshared` <=
UNSHARED_MAX), which real documents copied by several splices still have.

Pure functions of (sentence key, document, tokens) rows; the stage gathers the rows of every
part (quality/lm.py) and hands each part its documents' values. Deterministic: every step is a
sort or a sum over integers.
"""

from __future__ import annotations

import numpy as np

from pipeline.quality import folds
from pipeline.quality.folds import SENT_MIN_TOKENS, sentence_keys
from pipeline.quality.ngram import Tokens

MAX_HOLDERS = 8  # a sentence in more documents is boilerplate or a formula: no evidence
MIN_TOKENS = 20  # fewer long-sentence tokens: too little to judge (no gate)
# splice_share from which the gate starts to lower coherence, and where it reaches 0;
# measured (docs/quality.md): real text <= 0.37 even when copied by several splices on the
# benchmark sets, splices of 3-6 documents 0.5-0.75
SPLICE_OK, SPLICE_MAX = 0.4, 0.5
UNSHARED_MAX = 0.1  # the gate needs the document to be at least 90% shared sentences
# copier_exclusions: a document with less than this share of its long sentences shared is a
# source whose fold model its copiers leave (the splice gate's 90%: a copy is nearly all shared)
ORIGINAL_MAX_SHARED = 1.0 - UNSHARED_MAX


def sentence_rows(tokens: Tokens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key uint64 [m], document int64 [m], tokens int64 [m]): the distinct (long sentence,
    document) pairs of `tokens`, sorted by key then document; tokens = the sentence's tokens
    times its occurrences in the document."""
    n = len(tokens.lengths)
    _, key, length = sentence_keys(tokens)
    if not len(length):
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = np.concatenate([[0], np.cumsum(length)[:-1]])
    doc = np.repeat(np.arange(n, dtype=np.int64), tokens.lengths)[first]
    long = length >= SENT_MIN_TOKENS
    key, doc, length = key[long], doc[long], length[long].astype(np.int64)
    return _merge(key, doc, length)


def _merge(key: np.ndarray, doc: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """Rows sorted by (key, doc), equal (key, doc) rows summed."""
    order = np.lexsort((doc, key))
    key, doc, w = key[order], doc[order], w[order]
    if not len(key):
        return key, doc, w
    new = np.ones(len(key), bool)
    new[1:] = (key[1:] != key[:-1]) | (doc[1:] != doc[:-1])
    starts = np.flatnonzero(new)
    return key[starts], doc[starts], np.add.reduceat(w, starts)


def copy_stats(
    key: np.ndarray, doc: np.ndarray, w: np.ndarray, num_docs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(den, shared, top) float64 [num_docs] (see the module doc) from the sentence rows of
    the whole corpus (`doc` in [0, num_docs); rows need not be sorted or merged)."""
    key, doc, w = _merge(key.astype(np.uint64), doc.astype(np.int64), w.astype(np.int64))
    den = np.zeros(num_docs)
    shared = np.zeros(num_docs)
    top = np.zeros(num_docs)
    if not len(key):
        return den, shared, top
    head = np.ones(len(key), bool)
    head[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(head)
    holders = np.diff(np.append(starts, len(key)))
    per_row = np.repeat(holders, holders)
    ok = per_row <= MAX_HOLDERS
    wf = w.astype(np.float64)
    den = np.bincount(doc[ok], weights=wf[ok], minlength=num_docs)
    sh = ok & (per_row >= 2)
    shared = np.bincount(doc[sh], weights=wf[sh], minlength=num_docs)
    # every ordered pair (row, other holder) of a shared sentence: <= MAX_HOLDERS - 1 per row
    rows = np.flatnonzero(sh)
    if not len(rows):
        return den, shared, top
    group_start = np.repeat(starts, holders)[rows]
    size = per_row[rows]
    reps = size - 1
    src = np.repeat(rows, reps)
    # the j-th other holder of row r: position j of its group, skipping r itself
    j = np.arange(len(src)) - np.repeat(np.cumsum(reps) - reps, reps)
    own = np.repeat(rows - group_start, reps)
    other = np.repeat(group_start, reps) + j + (j >= own)
    d, p = doc[src], doc[other]
    pair = d * np.int64(num_docs) + p
    order = np.argsort(pair, kind="stable")
    pair, ws = pair[order], wf[src][order]
    new = np.ones(len(pair), bool)
    new[1:] = pair[1:] != pair[:-1]
    ps = np.flatnonzero(new)
    sums = np.add.reduceat(ws, ps)
    np.maximum.at(top, pair[ps] // np.int64(num_docs), sums)
    return den, shared, top


def splice_share(den: np.ndarray, shared: np.ndarray, top: np.ndarray) -> np.ndarray:
    """float64 [n]: (shared - top) / den; NaN where den < MIN_TOKENS (too little to judge)."""
    out = (shared - top) / np.maximum(den, 1.0)
    return np.where(den >= MIN_TOKENS, out, np.nan)


def splice_gate(den: np.ndarray, shared: np.ndarray, top: np.ndarray) -> np.ndarray:
    """float64 [n] in [0, 1], the factor on coherence: 1 - clip((s - SPLICE_OK) / (SPLICE_MAX
    - SPLICE_OK), 0, 1) for a document at most UNSHARED_MAX of which is its own; 1 otherwise
    (and where there is too little to judge)."""
    s = splice_share(den, shared, top)
    unshared = 1.0 - shared / np.maximum(den, 1.0)
    drop = np.clip((s - SPLICE_OK) / (SPLICE_MAX - SPLICE_OK), 0.0, 1.0)
    drop = np.where(np.isnan(s) | (unshared > UNSHARED_MAX), 0.0, drop)
    return 1.0 - drop


def copier_exclusions(
    tokens: Tokens, doc_fold: np.ndarray, sources: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(document int64 [m], fold int64 [m]): the fold models each reference document is also
    left out of (quality.copy_folds). Of two reference documents that share a long sentence
    (folds.sentence_partners' rule: >= SENT_MIN_TOKENS tokens, at most folds.MAX_HOLDERS
    holders), the one with more partners is the copier (a splice has several sources; its
    source, one or two copiers) and is left out of the other's fold model too: the source is
    then scored by a model that never saw its own sentences through the copy, while the copy
    is still scored by a model that saw its sources. Only a source that keeps sentences of its
    own (less than ORIGINAL_MAX_SHARED of its long sentences shared) has its model cleared:
    of two copies (two walks or splices over the same source) neither leaves the other's.
    `sources` (bool [n], default all): the documents whose model may be cleared. Pairs
    already in one fold add nothing. Distinct (document, fold) pairs, sorted."""
    n = len(tokens.lengths)
    none = np.zeros(0, np.int64)
    skey, owner = folds._long_sentences(tokens)
    if not len(skey):
        return none, none
    head = np.ones(len(skey), bool)
    head[1:] = skey[1:] != skey[:-1]
    starts = np.flatnonzero(head)
    holders = np.diff(np.append(starts, len(skey)))
    ok = (holders >= 2) & (holders <= folds.MAX_HOLDERS)
    if not ok.any():
        return none, none
    # every ordered pair (row, mate), row != mate, of the holders of each shared sentence
    g_start, g_size = starts[ok], holders[ok]
    rows = np.repeat(g_start, g_size) + _ranks(g_size)
    row_size = np.repeat(g_size, g_size)
    src = np.repeat(rows, row_size)
    mate = np.repeat(np.repeat(g_start, g_size), row_size) + _ranks(row_size)
    keep = mate != src
    a, b = owner[src[keep]], owner[mate[keep]]
    pair = np.unique(a * np.int64(n) + b)
    a, b = pair // np.int64(n), pair % np.int64(n)
    partners = np.bincount(a, minlength=n)
    # the share of each document's long sentences (those held by at most MAX_HOLDERS) that
    # another document holds: a source keeps sentences of its own; a splice, a walk or a
    # mirror is nearly all shared, and one copy is not left out of another copy's model
    counted = np.repeat(holders <= folds.MAX_HOLDERS, holders)
    own = np.bincount(owner[counted], minlength=n)
    held = np.bincount(owner[np.repeat(ok, holders)], minlength=n)
    original = held < ORIGINAL_MAX_SHARED * np.maximum(own, 1)
    if sources is not None:
        original &= sources
    fold = np.asarray(doc_fold, np.int64)
    sel = (partners[a] > partners[b]) & original[b] & (fold[a] != fold[b])
    k = int(fold.max()) + 1 if len(fold) else 1
    ex = np.unique(a[sel] * k + fold[b[sel]])
    return ex // k, ex % k


def _ranks(sizes: np.ndarray) -> np.ndarray:
    """int64 [sizes.sum()]: 0..size-1 for each size in turn."""
    return np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
