"""Per-document language-model features and the coherence classifier over them.

Features come from an n-gram model that never saw the document (its fold's model): the mean
log-probability, the *context gain* (mean ln P_KN(w | context) − ln P_unigram(w): what the
preceding words add; word salad drawn from the corpus's own vocabulary and shuffled words gain
~nothing, real prose of any domain gains a lot), its worst 32-token block and the share of
tokens in blocks that gain nothing (one salad block in a good page), and the share of tokens
whose bigram / trigram the model had seen, overall and between common words, and the gain of
the longer contexts over the bigram one (a word-bigram chain is fluent pair by pair only), and
two document-scale signals no n-gram window sees: content words coming back after a long gap,
and content words shared by the two halves (a Markov walk over the corpus, or sentences spliced
from several documents, wander off topic). The
classifier is a dense logistic regression (Newton steps, L2) from those features to
P(coherent), trained on reference documents (1) against seeded corruptions of them (0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.permute import mix64
from pipeline.quality.cohesion import (
    COHESION_NAMES,
    COHESION_NAMES_V3,
    ENTITY_NAMES,
    cohesion_features,
    entity_features,
    segment_features,
)
from pipeline.quality.corrupt import sentence_end_hashes
from pipeline.quality.ngram import NgramLM, Tokens

FEATURE_NAMES_V1 = (
    "log_prob",
    "context_gain",
    "worst_block_gain",
    "bigram_hits",
    "trigram_hits",
    "log_tokens",
    "common_pair_hits",
    "common_pair_gain",
    "low_block_share",
    "long_context_gain",
    "long_repeat",
    "halves_shared",
)
# Feature sets (`quality.coherence_features`): 1 = the 12 n-gram and document-scale features
# above; 2 = those + the sentence-scale cohesion of quality/cohesion.py; 3 = set 2 + the
# per-segment gain spread and seam jumps (cohesion.segment_features); 4 = set 2 + entity and
# number consistency and sentence clusters (cohesion.entity_features; needs
# Tokens.surface). The first columns never move, so an index into FEATURE_NAMES holds for
# every set.
FEATURE_SETS = {
    1: FEATURE_NAMES_V1,
    2: FEATURE_NAMES_V1 + COHESION_NAMES,
    3: FEATURE_NAMES_V1 + COHESION_NAMES + COHESION_NAMES_V3,
    4: FEATURE_NAMES_V1 + COHESION_NAMES + ENTITY_NAMES,
}
SURFACE_SETS = (4,)  # feature sets that read Tokens.surface (tokenize(surface=True))
FEATURE_NAMES = FEATURE_SETS[2]
COMMON_COUNT = 20  # a word seen this often in the reference is "common" (see common_pair_*)
BLOCK_TOKENS = 32  # block window; a document's last partial block joins the one before
LOW_BLOCK_GAIN = 0.0  # a block whose words gain nothing from context reads as salad
REPEAT_DISTANCE = 32  # long_repeat: a content word seen at least this many tokens before


CHUNK_TOKENS = 1 << 17  # doc_features works on runs of whole documents of about this many tokens


def doc_features(
    lm: NgramLM,
    tokens: Tokens,
    fold: np.ndarray,
    feature_set: int = 2,
    token_fold: np.ndarray | None = None,
) -> np.ndarray:
    """float64 [n, len(FEATURE_SETS[feature_set])], each document scored by the model of its
    fold (int [n], 0..lm.num_folds-1), or each token by the model of its `token_fold` (int [T],
    quality/folds.py) where given; documents without tokens get zeros. A document's row
    depends on its own tokens only, so the documents go in runs of ~CHUNK_TOKENS tokens: the
    per-token arrays stay in cache (~15% less CPU than one pass over a 400k-token part)."""
    ends = np.cumsum(tokens.lengths)
    if len(ends) < 2 or ends[-1] <= CHUNK_TOKENS:
        return _doc_features(lm, tokens, fold, feature_set, token_fold)
    out, i, a = [], 0, 0
    while i < len(ends):  # [i, j): whole documents, at least one
        j = max(int(np.searchsorted(ends, a + CHUNK_TOKENS, side="right")), i + 1)
        b = int(ends[j - 1])
        sub = tokens.slice(i, j, a, b)
        sub_fold = None if token_fold is None else token_fold[a:b]
        out.append(_doc_features(lm, sub, fold[i:j], feature_set, sub_fold))
        i, a = j, b
    return np.concatenate(out)


def _doc_features(
    lm: NgramLM,
    tokens: Tokens,
    fold: np.ndarray,
    feature_set: int,
    token_fold: np.ndarray | None = None,
) -> np.ndarray:
    n = len(tokens.lengths)
    out = np.zeros((n, len(FEATURE_SETS[feature_set])))
    if len(tokens.ids) == 0:
        return out
    lp, lu, hit, uni, lp2 = lm.log_probs(tokens, fold, token_fold)
    gain = lp - lu
    doc = np.repeat(np.arange(n, dtype=np.int64), tokens.lengths)
    num = np.maximum(tokens.lengths, 1).astype(np.float64)

    def mean(x: np.ndarray) -> np.ndarray:
        return np.bincount(doc, weights=x, minlength=n) / num

    out[:, 0] = mean(lp)
    out[:, 1] = mean(gain)
    out[:, 3] = mean((hit >= 2).astype(np.float64))
    out[:, 4] = mean((hit >= 3).astype(np.float64))
    out[:, 5] = np.log1p(tokens.lengths)
    # what the words before the previous one add: ~0 for a bigram chain (locally fluent salad)
    out[:, 9] = mean(lp - lp2)
    out[:, 2], out[:, 8] = _blocks(gain, doc, tokens.lengths)
    # pairs of common words: real text of any domain uses their seen bigrams; salad, shuffles
    # and dropped words make unseen pairs of common words (rare words miss in any case)
    starts = np.concatenate([[0], np.cumsum(tokens.lengths)])[:-1]
    first = np.zeros(len(gain), bool)
    first[starts[tokens.lengths > 0]] = True
    prev = np.concatenate([[0.0], uni[:-1]])
    pair = (uni >= COMMON_COUNT) & (prev >= COMMON_COUNT) & ~first
    num_pair = np.bincount(doc[pair], minlength=n).astype(np.float64)
    ok = num_pair > 0
    hits = np.bincount(doc[pair], weights=(hit[pair] >= 2).astype(np.float64), minlength=n)
    pg = np.bincount(doc[pair], weights=gain[pair], minlength=n)
    out[:, 6] = np.where(ok, hits / np.maximum(num_pair, 1), 0.0)
    out[:, 7] = np.where(ok, pg / np.maximum(num_pair, 1), 0.0)
    out[:, 10], out[:, 11] = _document_scale(tokens, doc, starts, uni)
    if feature_set >= 2:
        is_end = np.isin(tokens.ids, sentence_end_hashes())
        c2 = 12 + len(COHESION_NAMES)
        out[:, 12:c2] = cohesion_features(tokens, lu, gain, doc, starts, is_end)
        if feature_set == 3:
            out[:, c2:] = segment_features(tokens, gain, doc, starts, is_end)
        elif feature_set == 4:
            out[:, c2:] = entity_features(tokens, lu, doc, starts, is_end)
    out[tokens.lengths == 0] = 0.0
    return out


def _document_scale(
    tokens: Tokens, doc: np.ndarray, starts: np.ndarray, uni: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Document-scale cohesion no n-gram window sees, over *content* words (seen fewer than
    COMMON_COUNT times in the reference: names, topic nouns, numbers folded to 0 excepted):

    - long_repeat: the share of content tokens whose word first occurred >= REPEAT_DISTANCE
      tokens earlier in the same document. A real document comes back to its names and topic;
      a Markov walk over the corpus or sentences spliced from other documents rarely does;
    - halves_shared: the share of the document's content word types that occur in both its
      first and its second half (topical consistency between halves).
    Both are 0 for a document without content words."""
    n = len(tokens.lengths)
    pos = np.arange(len(doc), dtype=np.int64) - starts[doc]
    content = uni < COMMON_COUNT
    idx = np.flatnonzero(content)
    num = np.bincount(doc[idx], minlength=n).astype(np.float64)
    if not len(idx):
        return np.zeros(n), np.zeros(n)
    ids, d, p = tokens.ids[idx], doc[idx], pos[idx]
    order = np.lexsort((p, ids, d))  # by document, then word, then position
    ids, d, p = ids[order], d[order], p[order]
    same = np.concatenate([[False], (ids[1:] == ids[:-1]) & (d[1:] == d[:-1])])
    first = ~same
    tid = np.cumsum(first) - 1
    # the word's first occurrence lies >= REPEAT_DISTANCE tokens back: the text came back to it
    since = p - p[np.flatnonzero(first)][tid]
    rep = np.bincount(d[since >= REPEAT_DISTANCE], minlength=n).astype(np.float64)
    long_repeat = rep / np.maximum(num, 1.0)
    # per (document, word) type: does it occur in the first half and in the second?
    half = (p * 2 >= tokens.lengths[d]).astype(np.int64)
    lo = np.bincount(tid, weights=1 - half, minlength=int(first.sum())) > 0
    hi = np.bincount(tid, weights=half, minlength=int(first.sum())) > 0
    tdoc = d[first]
    types = np.bincount(tdoc, minlength=n).astype(np.float64)
    both = np.bincount(tdoc, weights=(lo & hi).astype(np.float64), minlength=n)
    return long_repeat, both / np.maximum(types, 1.0)


def _blocks(gain: np.ndarray, doc: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per document over consecutive BLOCK_TOKENS-token blocks: the lowest mean gain, and the
    share of tokens in blocks whose mean gain is below LOW_BLOCK_GAIN (a salad part)."""
    n = len(lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)])[:-1]
    pos = np.arange(len(gain)) - starts[doc]
    blocks_per_doc = np.maximum(lengths // BLOCK_TOKENS, 1)
    local = np.minimum(pos // BLOCK_TOKENS, blocks_per_doc[doc] - 1)
    block_start = np.concatenate([[0], np.cumsum(blocks_per_doc)])[:-1]
    block = block_start[doc] + local
    nb = int(blocks_per_doc.sum())
    counts = np.bincount(block, minlength=nb).astype(np.float64)
    means = np.bincount(block, weights=gain, minlength=nb) / np.maximum(counts, 1.0)
    worst = np.minimum.reduceat(means, block_start)  # blocks of a document are contiguous
    block_doc = np.repeat(np.arange(n), blocks_per_doc)
    low = np.bincount(block_doc, weights=counts * (means < LOW_BLOCK_GAIN), minlength=n)
    return worst, low / np.maximum(lengths, 1)


def fold_of(rows: np.ndarray, num_folds: int, seed: int) -> np.ndarray:
    """Fold (0..num_folds-1) of each global row or reference index: a seeded hash, so folds do
    not follow part boundaries or the input order."""
    x = rows.astype(np.uint64) ^ np.uint64(seed & 0xFFFF_FFFF_FFFF_FFFF)
    h = mix64(x + np.uint64(0x632BE59BD9B4E019), inplace=True)
    return (h % np.uint64(num_folds)).astype(np.int64)


@dataclass
class Coherence:
    """Logistic regression over standardised features: P(coherent) = sigmoid(z·w + b). With
    `w` [G, F] and `b` [G] (feature set 2) it is G detectors, one per family of junk, and
    P(coherent) is the lowest of their probabilities: a text must pass every one (a linear
    model over all families at once trades one family's weights against another's)."""

    mean: np.ndarray  # float64 [F]
    std: np.ndarray  # float64 [F]
    w: np.ndarray  # float64 [F] or [G, F]
    b: float | np.ndarray  # float or float64 [G]

    def predict(self, feats: np.ndarray) -> np.ndarray:
        z = (feats - self.mean) / self.std
        if self.w.ndim == 1:
            return 0.5 * (1.0 + np.tanh(0.5 * (z @ self.w + self.b)))
        p = 0.5 * (1.0 + np.tanh(0.5 * (z @ self.w.T + np.asarray(self.b))))
        return p.min(axis=1)


def stack_detectors(detectors: list[Coherence]) -> Coherence:
    """One Coherence of G detectors trained on the same standardisation (the first's)."""
    first = detectors[0]
    w = np.stack([d.w for d in detectors])
    return Coherence(first.mean, first.std, w, np.array([float(d.b) for d in detectors]))


def train_coherence(
    feats: np.ndarray, y: np.ndarray, l2: float = 1e-2, scale: tuple | None = None
) -> Coherence:
    """Class-balanced L2 logistic regression by 25 Newton steps (deterministic, F ~ 17).
    `scale` = (mean, std) to standardise with (default: these features' own)."""
    if scale is None:
        mean, std = feats.mean(axis=0), feats.std(axis=0)
        std = np.where(std > 1e-9, std, 1.0)
    else:
        mean, std = scale
    z = np.hstack([(feats - mean) / std, np.ones((len(feats), 1))])
    y = y.astype(np.float64)
    pos = max(float(y.sum()), 1.0)
    sw = np.where(y > 0.5, 0.5 / pos, 0.5 / max(len(y) - pos, 1.0))
    theta = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(25):
        p = 0.5 * (1.0 + np.tanh(0.5 * (z @ theta)))
        grad = z.T @ (sw * (p - y)) + reg * theta
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg + 1e-9)
        theta -= np.linalg.solve(hess, grad)
    return Coherence(mean, std, theta[:-1].copy(), float(theta[-1]))
