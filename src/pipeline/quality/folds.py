"""Which fold model scores which token (`quality.coherence_folds`).

`doc` (the first rule): a document's fold is `fold_of(its text key)` and every token of it is
scored by that fold's model, which never saw the document. But a text made of sentences copied
from reference documents A, B, C (a cross-document splice, a page that quotes another) is then
scored by a model that did see A, B and C (they sit in other folds), so its copied sentences
look *more* predictable than any real unseen text; and a reference page whose sentences were
copied into another reference document (a splice in the `self` reference, a near duplicate) is
scored by a model that saw them through the copy.

`sentence`: reference documents that share a sentence (>= SENT_MIN_TOKENS tokens) share a fold
(union-find over the shared sentences: a component takes the fold of its smallest text key, so
a document that shares nothing keeps `fold_of(its key)`), and a table maps each reference
sentence to its component's fold. A token is scored by the model of the fold of the sentence it
is in when that sentence is in the table, else by its document's fold. A reference document is
scored, every token, by its component's model (which saw no document of the component); a copy
of reference sentences is scored, sentence by sentence, by models that never saw them; a text
that shares no sentence with the reference is scored exactly as with `doc`. Sentences held by
more than MAX_HOLDERS reference documents (boilerplate) join nothing and are not routed, and a
union that would make a component larger than COMPONENT_SHARE x N / K documents (at least 8)
is skipped (its sentence is not routed either), so no component takes over a fold.

Sentences are cut after the sentence-end tokens (corrupt.SENTENCE_ENDS) and at document starts;
a sentence's key is an order-sensitive 64-bit hash of its token hashes. Pure functions of the
token arrays, the text keys and the seed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from pipeline.hashing import GOLDEN64
from pipeline.permute import mix64
from pipeline.quality.coherence import fold_of
from pipeline.quality.corrupt import sentence_end_hashes
from pipeline.quality.ngram import HashTable, Tokens

FOLD_RULES = ("doc", "sentence")
SENT_MIN_TOKENS = 5  # shorter sentences ("Thank you.") recur by chance: never routed
MAX_HOLDERS = 8  # a sentence in more reference documents is boilerplate: joins nothing
COMPONENT_SHARE = 0.5  # max_component = this share of a fold's documents (N / K), >= 8


def sentence_keys(tokens: Tokens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sentence of every token int64 [T], key uint64 [S], length int64 [S]) of the sentences
    of `tokens` in order: a sentence ends after a sentence-end token or at its document's end.
    The key is a sum of mixed (token hash, position) values, so it depends on the tokens and
    their order only (the same sentence has the same key in any document)."""
    ids = tokens.ids
    num = len(ids)
    if num == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64)
    start = np.zeros(num, bool)
    start[np.concatenate([[0], np.cumsum(tokens.lengths)])[:-1][tokens.lengths > 0]] = True
    start[1:] |= np.isin(ids[:-1], sentence_end_hashes())
    first = np.flatnonzero(start)
    sid = np.cumsum(start) - 1
    pos = (np.arange(num, dtype=np.int64) - first[sid]).astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = mix64(ids ^ mix64((pos + np.uint64(1)) * GOLDEN64), inplace=True)
    length = np.diff(np.append(first, num))
    key = np.add.reduceat(mixed, first)  # wraps mod 2^64
    key = mix64(key ^ length.astype(np.uint64), inplace=True)
    return sid, key, length


def sentence_partners(tokens: Tokens) -> np.ndarray:
    """int64 [n]: for each document, how many other documents of `tokens` share one of its
    sentences (>= SENT_MIN_TOKENS tokens, held by at most MAX_HOLDERS documents). A document
    stitched from the sentences of several others (a splice, a spun page) has several."""
    n = len(tokens.lengths)
    skey, owner = _long_sentences(tokens)
    out = np.zeros(n, np.int64)
    if not len(skey):
        return out
    head = np.ones(len(skey), bool)
    head[1:] = skey[1:] != skey[:-1]
    starts = np.flatnonzero(head)
    holders = np.diff(np.append(starts, len(skey)))
    pairs: set[tuple[int, int]] = set()
    for g in np.flatnonzero((holders >= 2) & (holders <= MAX_HOLDERS)).tolist():
        docs = owner[starts[g] : starts[g] + holders[g]].tolist()
        pairs.update((a, b) for a in docs for b in docs if a != b)
    for a, _ in pairs:
        out[a] += 1
    return out


def _long_sentences(tokens: Tokens) -> tuple[np.ndarray, np.ndarray]:
    """(sentence key, document) of the distinct (sentence, document) pairs of sentences of at
    least SENT_MIN_TOKENS tokens, sorted by key then document."""
    n = len(tokens.lengths)
    _, skey, slen = sentence_keys(tokens)
    sdoc = np.repeat(np.arange(n, dtype=np.int64), tokens.lengths)
    first = np.concatenate([[0], np.cumsum(slen)])[:-1] if len(slen) else np.zeros(0, np.int64)
    owner = sdoc[first] if len(slen) else np.zeros(0, np.int64)
    long = slen >= SENT_MIN_TOKENS
    skey, owner = skey[long], owner[long]
    order = np.lexsort((owner, skey))
    skey, owner = skey[order], owner[order]
    new = np.ones(len(skey), bool)
    new[1:] = (skey[1:] != skey[:-1]) | (owner[1:] != owner[:-1])
    return skey[new], owner[new]


@dataclass
class FoldRouter:
    """The `sentence` rule's tables: reference sentence keys -> fold, and the text keys of the
    reference documents whose component moved them off `fold_of(key)` -> fold."""

    num_folds: int
    seed: int
    sent_keys: np.ndarray  # uint64 [S], sorted
    sent_fold: np.ndarray  # int8 [S]
    doc_keys: np.ndarray  # uint64 [D], sorted
    doc_fold: np.ndarray  # int8 [D]

    @functools.cached_property
    def _tables(self) -> tuple[HashTable, HashTable]:
        """Lookup tables of the sentence and document keys, built once per router."""
        return HashTable(self.sent_keys), HashTable(self.doc_keys)

    def doc_folds(self, keys: np.ndarray) -> np.ndarray:
        """int64 [n]: each document's fold from its text key."""
        fold = fold_of(keys, self.num_folds, self.seed)
        if len(self.doc_keys):
            at = self._tables[1].find(keys.astype(np.uint64))
            fold = np.where(at >= 0, self.doc_fold[np.maximum(at, 0)].astype(np.int64), fold)
        return fold

    def token_folds(self, tokens: Tokens, doc_fold: np.ndarray) -> np.ndarray:
        """int64 [T]: each token's fold: its sentence's when that sentence is routed, else its
        document's (`doc_fold` [n])."""
        tok = np.repeat(doc_fold.astype(np.int64), tokens.lengths)
        if not len(self.sent_keys) or not len(tokens.ids):
            return tok
        sid, key, length = sentence_keys(tokens)
        at = self._tables[0].find(key)
        at[length < SENT_MIN_TOKENS] = -1
        routed = at[sid]
        has = routed >= 0
        tok[has] = self.sent_fold[routed[has]]
        return tok

    def folds(self, tokens: Tokens, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(document folds [n], token folds [T]) of documents with text keys `keys`."""
        doc = self.doc_folds(keys)
        return doc, self.token_folds(tokens, doc)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "route.sent_keys": self.sent_keys,
            "route.sent_fold": self.sent_fold,
            "route.doc_keys": self.doc_keys,
            "route.doc_fold": self.doc_fold,
        }


def build_router(
    tokens: Tokens, keys: np.ndarray, num_folds: int, seed: int
) -> tuple[FoldRouter, np.ndarray, dict]:
    """(the router, each reference document's fold int64 [n], a report) for the reference
    documents `tokens` with text keys `keys`: union-find over the sentences they share."""
    n = len(tokens.lengths)
    skey, owner = _long_sentences(tokens)  # distinct (sentence, document) pairs, by sentence
    head = np.ones(len(skey), bool)
    head[1:] = skey[1:] != skey[:-1]
    starts = np.flatnonzero(head)
    holders = np.diff(np.append(starts, len(skey)))
    parent = np.arange(n, dtype=np.int64)
    size = np.ones(n, np.int64)
    cap = max(int(COMPONENT_SHARE * n / max(num_folds, 1)), 8)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = int(parent[a])
        return a

    shared = np.flatnonzero((holders >= 2) & (holders <= MAX_HOLDERS))
    skipped = np.zeros(len(starts), bool)
    skipped[holders > MAX_HOLDERS] = True
    for g in shared.tolist():  # ascending sentence keys: deterministic
        docs = owner[starts[g] : starts[g] + holders[g]].tolist()
        roots = sorted({find(d) for d in docs})
        if len(roots) < 2:
            continue
        if int(size[roots].sum()) > cap:
            skipped[g] = True
            continue
        for r in roots[1:]:
            parent[r] = roots[0]
            size[roots[0]] += size[r]
    root = np.array([find(d) for d in range(n)], np.int64)
    # a component's fold: that of its smallest text key (a singleton keeps its own)
    keys = keys.astype(np.uint64)
    comp_min = np.full(n, np.iinfo(np.uint64).max, np.uint64)
    np.minimum.at(comp_min, root, keys)
    doc_fold = fold_of(comp_min[root], num_folds, seed)
    moved = doc_fold != fold_of(keys, num_folds, seed)
    # routed sentences: every holder in one component (always, unless a union was skipped)
    g_root = root[owner]
    lo = np.minimum.reduceat(g_root, starts) if len(starts) else g_root
    hi = np.maximum.reduceat(g_root, starts) if len(starts) else g_root
    ok = (lo == hi) & ~skipped
    sent_keys = skey[starts[ok]]
    sent_fold = doc_fold[owner[starts[ok]]].astype(np.int8)
    dk = keys[moved]
    o = np.argsort(dk, kind="stable")
    dk, dfold = dk[o], doc_fold[moved][o].astype(np.int8)
    distinct = np.ones(len(dk), bool)
    distinct[1:] = dk[1:] != dk[:-1]
    router = FoldRouter(num_folds, seed, sent_keys, sent_fold, dk[distinct], dfold[distinct])
    comp_sizes = np.bincount(root, minlength=n)
    info = {
        "rule": "sentence",
        "routed_sentences": int(len(sent_keys)),
        "shared_sentences": int(len(shared)),
        "boilerplate_sentences": int((holders > MAX_HOLDERS).sum()),
        "unions_skipped": int(skipped[holders <= MAX_HOLDERS].sum()),
        "docs_sharing_a_fold": int((comp_sizes[root] > 1).sum()),
        "largest_component": int(comp_sizes.max()) if n else 0,
        "docs_moved": int(moved.sum()),
        "docs_per_fold": np.bincount(doc_fold, minlength=num_folds).tolist(),
    }
    return router, doc_fold, info
