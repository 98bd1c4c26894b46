"""Seeded corruptions of real documents, made on their LM tokens: the negatives the coherence
classifier learns from.

Each keeps what heuristic rules look at (real words, real sentence lengths, punctuation) and
breaks what only a language model sees (word order, the words themselves, sentence order).
Working on tokens (not text) costs no second tokenisation and treats Chinese characters and
English words alike. Pure functions of (tokens, seed).
"""

from __future__ import annotations

import numpy as np

from pipeline.quality.ngram import Tokens, token_hash

KINDS = (
    "word_shuffle",
    "unigram_salad",
    "word_drop",
    "sentence_shuffle",
    "block_shuffle",
    "salad_block",
    "bigram_chain",
)
CHAIN_MAX_TOKENS = 400  # bigram chains are cut here: enough to show, cheap to generate
SENTENCE_ENDS = (".", "!", "?", "\u3002", "\uff01", "\uff1f")
BLOCK = 3  # block_shuffle: runs of 3 tokens keep local fluency, so the LM must look further


def _ends() -> np.ndarray:
    return np.array([token_hash(s) for s in SENTENCE_ENDS], np.uint64)


def _sentences(ids: np.ndarray, ends: np.ndarray) -> list[np.ndarray]:
    """Split after every sentence-end token; a trailing piece without one is a sentence too."""
    cuts = np.flatnonzero(np.isin(ids, ends)) + 1
    return [s for s in np.split(ids, cuts) if len(s)]


def corrupt_one(
    kind: str, ids: np.ndarray, rng: np.random.Generator, pool: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """One corruption of one document's token hashes (uint64 [n] -> uint64 [m])."""
    n = len(ids)
    if kind == "word_shuffle":  # the document's own words in a random order
        return ids[rng.permutation(n)]
    if kind == "block_shuffle":
        blocks = [ids[i : i + BLOCK] for i in range(0, n, BLOCK)]
        return np.concatenate([blocks[i] for i in rng.permutation(len(blocks))] or [ids])
    if kind == "word_drop":  # telegraphic junk: each token dropped with p in [0.3, 0.6]
        keep = rng.random(n) >= rng.uniform(0.3, 0.6)
        return ids[keep] if keep.any() else ids[:1]
    if kind == "salad_block":  # a real page with one block (30-60%) of unigram salad
        out = ids.copy()
        size = max(int(n * rng.uniform(0.3, 0.6)), 1)
        at = int(rng.integers(n - size + 1))
        out[at : at + size] = pool[rng.integers(len(pool), size=size)]
        return out
    if kind == "sentence_shuffle":
        sents = _sentences(ids, ends)
        return np.concatenate([sents[i] for i in rng.permutation(len(sents))])
    # unigram_salad: corpus-frequency words at this document's sentence lengths and ends
    out = pool[rng.integers(len(pool), size=n)]
    is_end = np.isin(ids, ends)
    out[is_end] = ids[is_end]
    return out


def bigram_chains(
    tokens: Tokens, lengths: np.ndarray, rng: np.random.Generator
) -> list[np.ndarray]:
    """One random walk per length over the word bigrams of `tokens` (a bigram-Markov text:
    every adjacent pair is real, nothing longer is). Vectorised over walks, one step at a time."""
    starts = np.concatenate([[0], np.cumsum(tokens.lengths)])
    last = np.zeros(len(tokens.ids), bool)
    last[starts[1:][tokens.lengths > 0] - 1] = True
    a, b = tokens.ids[:-1][~last[:-1]], tokens.ids[1:][~last[:-1]]
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    heads, first, count = np.unique(a, return_index=True, return_counts=True)
    n = np.minimum(lengths, CHAIN_MAX_TOKENS)
    if len(heads) == 0:  # no bigram at all (one-token documents): nothing to walk
        return [tokens.ids[:0] for _ in n]
    steps = int(n.max()) if len(n) else 0
    walk = np.zeros((len(n), max(steps, 1)), np.uint64)
    cur = tokens.ids[rng.integers(len(tokens.ids), size=len(n))]
    for t in range(steps):
        walk[:, t] = cur
        j = np.minimum(np.searchsorted(heads, cur), len(heads) - 1)
        has = heads[j] == cur
        nxt = b[first[j] + (rng.random(len(n)) * count[j]).astype(np.int64)]
        cur = np.where(has, nxt, tokens.ids[rng.integers(len(tokens.ids), size=len(n))])
    return [walk[i, : n[i]] for i in range(len(n))]


def corrupt_tokens(tokens: Tokens, kinds: tuple[str, ...], seed: int) -> tuple[Tokens, list[str]]:
    """One corruption of each document, kinds in rotation (document i gets kinds[i % len]).
    The unigram pool is the tokens of all the documents given. Same input + seed = same output."""
    rng = np.random.default_rng(seed)
    ends = _ends()
    pool = tokens.ids if len(tokens.ids) else np.array([token_hash("the")], np.uint64)
    starts = np.concatenate([[0], np.cumsum(tokens.lengths)])
    which = [kinds[i % len(kinds)] for i in range(len(tokens.lengths))]
    chain_docs = [i for i, k in enumerate(which) if k == "bigram_chain"]
    chains = dict(
        zip(chain_docs, bigram_chains(tokens, tokens.lengths[chain_docs], rng), strict=True)
    )
    out, lengths = [], np.zeros(len(tokens.lengths), np.int64)
    for i in range(len(tokens.lengths)):
        ids = tokens.ids[starts[i] : starts[i + 1]]
        if i in chains:
            bad = chains[i] if len(ids) else ids
        else:
            bad = corrupt_one(which[i], ids, rng, pool, ends) if len(ids) else ids
        out.append(bad)
        lengths[i] = len(bad)
    ids = np.concatenate(out) if out else np.zeros(0, np.uint64)
    return Tokens(ids.astype(np.uint64), lengths, tokens.script.copy()), which
