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
    "trigram_chain",
    "fourgram_chain",
    "splice",
)
CHAIN_ORDER = {"bigram_chain": 1, "trigram_chain": 2, "fourgram_chain": 3}  # Markov order
CHAIN_MAX_TOKENS = 400  # bigram chains are cut here: enough to show, cheap to generate
SENTENCE_ENDS = (".", "!", "?", "\u3002", "\uff01", "\uff1f")
BLOCK = 3  # block_shuffle: runs of 3 tokens keep local fluency, so the LM must look further


def sentence_end_hashes() -> np.ndarray:
    """uint64 [6]: the token hashes of SENTENCE_ENDS."""
    return np.array([token_hash(s) for s in SENTENCE_ENDS], np.uint64)


_ends = sentence_end_hashes


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


def markov_chains(
    tokens: Tokens,
    lengths: np.ndarray,
    rng: np.random.Generator,
    order: int = 1,
    group_docs: int = 0,
) -> list[np.ndarray]:
    """One random walk per length over the order-`order` word Markov chain of `tokens` (order
    1: every adjacent pair is real, nothing longer; order 3: every 4-gram is real). The state is
    a hash of the last `order` tokens; a state never seen inside a document restarts the walk
    at a random position. Vectorised over walks, one step at a time.

    `group_docs` > 0 (and more documents than that): the documents are dealt into
    seeded random groups of `group_docs`, and each walk runs on the chain of its start's group
    only (restarts too). A chain over a few dozen documents has few branching states, so its
    walks copy long spans and stay near a topic, as Markov spam made from a handful of scraped
    pages does; a chain over the whole reference jumps between topics at every common word,
    which is easier to see. 0: one chain over all of `tokens`."""
    n = np.minimum(lengths, CHAIN_MAX_TOKENS)
    num_docs, total = len(tokens.lengths), len(tokens.ids)
    starts = np.concatenate([[0], np.cumsum(tokens.lengths)])
    doc = np.repeat(np.arange(num_docs), tokens.lengths)
    pos = np.arange(total) - starts[doc] if total else np.zeros(0, np.int64)
    ok = np.flatnonzero(pos >= order)  # positions with `order` tokens before them in their doc
    if len(ok) == 0:  # no transition at all (documents too short): nothing to walk
        return [tokens.ids[:0] for _ in n]
    state = _state(np.stack([tokens.ids[ok - k] for k in range(order, 0, -1)], axis=1))
    grouped = 0 < group_docs < num_docs
    if grouped:  # one chain per group: states salted with their group
        group = chain_groups(num_docs, group_docs, rng)
        salt = (group.astype(np.uint64) + np.uint64(1)) * np.uint64(0xD6E8FEB86659FD93)
        state = state ^ salt[doc[ok]]
        ok_group = group[doc[ok]]  # ok ascends, so a stable sort keeps each group's in order
        by_group = np.argsort(ok_group, kind="stable")
        ok_sorted, sorted_group = ok[by_group], ok_group[by_group]
        g_lo = np.searchsorted(sorted_group, np.arange(int(group.max()) + 1))
        g_size = np.searchsorted(sorted_group, np.arange(len(g_lo)), side="right") - g_lo
    srt = np.argsort(state, kind="stable")
    keys, nxt = state[srt], tokens.ids[ok[srt]]
    heads, first, count = np.unique(keys, return_index=True, return_counts=True)
    steps = int(n.max()) if len(n) else 0
    walk = np.zeros((len(n), max(steps, 1)), np.uint64)
    at = ok[rng.integers(len(ok), size=len(n))]
    wsalt = salt[doc[at]] if grouped else np.uint64(0)  # a walk keeps its start's group
    if grouped:
        lo, size = g_lo[group[doc[at]]], np.maximum(g_size[group[doc[at]]], 1)
    window = np.stack([tokens.ids[at - k] for k in range(order, 0, -1)], axis=1)
    for t in range(steps):
        st = _state(window) ^ wsalt
        j = np.minimum(np.searchsorted(heads, st), len(heads) - 1)
        has = heads[j] == st
        pick = nxt[first[j] + (rng.random(len(n)) * count[j]).astype(np.int64)]
        if grouped:  # restart inside the walk's group
            fresh = ok_sorted[lo + (rng.random(len(n)) * size).astype(np.int64)]
        else:
            fresh = ok[rng.integers(len(ok), size=len(n))]
        cur = np.where(has, pick, tokens.ids[fresh])
        walk[:, t] = cur
        window = np.concatenate([window[:, 1:], cur[:, None]], axis=1)
    return [walk[i, : n[i]] for i in range(len(n))]


def chain_groups(num_docs: int, group_docs: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [num_docs]: each document's group, groups of `group_docs` dealt in a seeded
    random order (the last one smaller)."""
    group = np.empty(num_docs, np.int64)
    group[rng.permutation(num_docs)] = np.arange(num_docs) // group_docs
    return group


def _state(window: np.ndarray) -> np.ndarray:
    """uint64 [w]: a hash of each row of token hashes (the chain's state)."""
    h = np.zeros(len(window), np.uint64)
    with np.errstate(over="ignore"):
        for k in range(window.shape[1]):
            h = (h ^ window[:, k]) * np.uint64(0x9E3779B97F4A7C15)
    return h


def splices(
    tokens: Tokens,
    rng: np.random.Generator,
    ends: np.ndarray,
    docs: list[int],
    sources: tuple[int, int] | None = None,
) -> list[np.ndarray]:
    """For each document in `docs`: real sentences drawn from the *other* documents, in a
    random order, up to its own length (cross-document splicing: every sentence is fluent, the
    document has no topic). `sources` = (lo, hi): the sentences come from lo..hi other
    documents (drawn per splice), so topic words do recur, as in a page spun from a few
    articles; None: each sentence from any other document."""
    starts = np.concatenate([[0], np.cumsum(tokens.lengths)])
    # every document's `_sentences`, in order: pieces between the document starts and the
    # positions after sentence ends (one pass over all the tokens, not a split per document)
    cuts = np.sort(np.concatenate([starts, np.flatnonzero(np.isin(tokens.ids, ends)) + 1]))
    cuts = cuts[np.concatenate([[True], cuts[1:] != cuts[:-1]])]  # distinct, ascending
    ids = tokens.ids
    sents = [ids[a:b] for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)]
    owner_arr = np.searchsorted(starts, cuts[:-1], side="right") - 1
    first = np.searchsorted(owner_arr, np.arange(len(tokens.lengths) + 1))  # per document
    num_docs = len(tokens.lengths)
    out = []
    for i in docs:
        if sources is None:
            others = np.flatnonzero(owner_arr != i)
        else:
            k = int(rng.integers(sources[0], sources[1] + 1))
            pick = rng.choice(num_docs, size=min(k + 1, num_docs), replace=False)
            pick = np.sort(pick[pick != i][:k])  # their sentences, ascending as np.isin's
            others = np.concatenate(
                [np.arange(first[d], first[d + 1]) for d in pick.tolist()] or [np.zeros(0, int)]
            )
        want, got, pieces = int(tokens.lengths[i]), 0, []
        if len(others) == 0 or want == 0:  # nothing to draw from, or nothing to fill
            out.append(tokens.ids[starts[i] : starts[i + 1]].copy())
            continue
        while got < want:
            snt = sents[int(others[rng.integers(len(others))])]
            pieces.append(snt)
            got += len(snt)
        out.append(np.concatenate(pieces)[:want])
    return out


def corrupt_tokens(
    tokens: Tokens,
    kinds: tuple[str, ...],
    seed: int,
    splice_sources: tuple[int, int] | None = None,
    chain_docs: int = 0,
) -> tuple[Tokens, list[str]]:
    """One corruption of each document, kinds in rotation (document i gets kinds[i % len]).
    The unigram pool is the tokens of all the documents given; `splice_sources`: see `splices`;
    `chain_docs`: the Markov walks' group size (`markov_chains`' group_docs).
    With `tokens.surface` the corruptions are made on the surface hashes (names, capitals and
    numbers travel with their words) and mapped back to ids. Same input + seed = same output."""
    if tokens.surface is not None:
        surf = Tokens(tokens.surface, tokens.lengths, tokens.script)
        bad, which = corrupt_tokens(surf, kinds, seed, splice_sources, chain_docs)
        keys, first = np.unique(tokens.surface, return_index=True)
        at = np.minimum(np.searchsorted(keys, bad.ids), max(len(keys) - 1, 0))
        found = keys[at] == bad.ids if len(keys) else np.zeros(len(bad.ids), bool)
        ids = np.where(found, tokens.ids[first][at] if len(keys) else bad.ids, bad.ids)
        return Tokens(ids, bad.lengths, bad.script, bad.ids), which
    rng = np.random.default_rng(seed)
    ends = _ends()
    pool = tokens.ids if len(tokens.ids) else np.array([token_hash("the")], np.uint64)
    starts = np.concatenate([[0], np.cumsum(tokens.lengths)])
    which = [kinds[i % len(kinds)] for i in range(len(tokens.lengths))]
    chains: dict[int, np.ndarray] = {}
    for kind, order in CHAIN_ORDER.items():
        docs = [i for i, k in enumerate(which) if k == kind]
        if docs:
            walks = markov_chains(tokens, tokens.lengths[docs], rng, order, chain_docs)
            chains.update(zip(docs, walks, strict=True))
    spliced = [i for i, k in enumerate(which) if k == "splice"]
    if spliced:
        made = splices(tokens, rng, ends, spliced, splice_sources)
        chains.update(zip(spliced, made, strict=True))
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
