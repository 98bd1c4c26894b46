"""quality.corrupt: seeded token-level corruptions keep what they claim to keep."""

from __future__ import annotations

import numpy as np

from pipeline.quality import corrupt
from pipeline.quality.ngram import token_hash, tokenize
from synth_text import docs


def test_corruptions_are_seeded_and_keep_what_they_claim():
    toks = tokenize(docs(12, 3), 10_000)
    a, kinds = corrupt.corrupt_tokens(toks, corrupt.KINDS, seed=5)
    b, _ = corrupt.corrupt_tokens(toks, corrupt.KINDS, seed=5)
    assert (a.ids == b.ids).all() and kinds[: len(corrupt.KINDS)] == list(corrupt.KINDS)
    starts = np.concatenate([[0], np.cumsum(toks.lengths)])
    bstarts = np.concatenate([[0], np.cumsum(a.lengths)])
    bigrams = {(int(x), int(y)) for x, y in zip(toks.ids[:-1], toks.ids[1:], strict=True)}
    ends = np.array([token_hash(s) for s in corrupt.SENTENCE_ENDS], np.uint64)
    for i, kind in enumerate(kinds):
        src = toks.ids[starts[i] : starts[i + 1]]
        bad = a.ids[bstarts[i] : bstarts[i + 1]]
        if kind in ("word_shuffle", "sentence_shuffle", "block_shuffle"):
            assert sorted(bad.tolist()) == sorted(src.tolist()) and not (bad == src).all()
        elif kind == "unigram_salad":  # same length, sentence ends where they were
            at_end = np.isin(src, ends)
            assert len(bad) == len(src) and at_end.any() and (bad[at_end] == src[at_end]).all()
            assert (bad[~at_end] != src[~at_end]).mean() > 0.5
        elif kind == "word_drop":
            assert 0 < len(bad) < len(src)
        elif kind == "salad_block":
            changed = (bad != src).mean()
            assert len(bad) == len(src) and 0.1 < changed <= 0.6
        elif kind == "bigram_chain":  # every adjacent pair is a real bigram
            assert all((int(x), int(y)) in bigrams for x, y in zip(bad[:-1], bad[1:], strict=True))
        elif kind == "splice":  # the other documents' sentences, at this one's length
            assert len(bad) == len(src) and not (bad == src).all()
        else:
            assert kind in corrupt.CHAIN_ORDER, kind


def _grams(ids: np.ndarray, lengths: np.ndarray, k: int) -> set[tuple[int, ...]]:
    starts = np.concatenate([[0], np.cumsum(lengths)])
    out = set()
    for i in range(len(lengths)):
        d = ids[starts[i] : starts[i + 1]].tolist()
        out.update(tuple(d[j : j + k]) for j in range(len(d) - k + 1))
    return out


def test_markov_chains_of_order_k_keep_every_k_plus_1_gram():
    """An order-k walk: its (k+1)-grams are the corpus's own (a restart, when a state has no
    successor, is the only exception); order 3 keeps far more 4-grams than order 1."""
    toks = tokenize(docs(40, 7), 10_000)
    rng = np.random.default_rng(2)
    share4 = {}
    for order in (1, 2, 3):
        walks = corrupt.markov_chains(toks, np.full(6, 120), rng, order)
        real = _grams(toks.ids, toks.lengths, order + 1)
        four = _grams(toks.ids, toks.lengths, 4)
        w = np.concatenate(walks)
        lens = np.array([len(x) for x in walks])
        assert (lens == 120).all()
        got = [g for g in _grams(w, lens, order + 1)]
        assert np.mean([g in real for g in got]) >= 0.9, order
        share4[order] = np.mean([g in four for g in _grams(w, lens, 4)])
    assert share4[3] > 0.9 > share4[1] + 0.2


def test_grouped_markov_chains_walk_inside_one_group():
    """group_docs: a walk's (order+1)-grams are those of the documents of one group
    (chain_groups with the same seed names the groups); group_docs >= the number of documents
    is the ungrouped chain, draw for draw; seeded."""
    toks = tokenize(docs(40, 7), 10_000)
    starts = np.concatenate([[0], np.cumsum(toks.lengths)])

    def grams_of(members: np.ndarray, k: int) -> set[tuple[int, ...]]:
        out: set[tuple[int, ...]] = set()
        for i in members.tolist():
            out |= _grams(toks.ids[starts[i] : starts[i + 1]], toks.lengths[i : i + 1], k)
        return out

    for order in (1, 2):
        walks = corrupt.markov_chains(toks, np.full(8, 150), np.random.default_rng(5), order, 4)
        again = corrupt.markov_chains(toks, np.full(8, 150), np.random.default_rng(5), order, 4)
        assert all(np.array_equal(a, b) for a, b in zip(walks, again, strict=True))
        group = corrupt.chain_groups(40, 4, np.random.default_rng(5))
        assert np.bincount(group).tolist() == [4] * 10
        grams = [grams_of(np.flatnonzero(group == g), order + 1) for g in range(10)]
        for w in walks:  # one group holds ~all its (order+1)-grams (ungrouped walks: <= 0.8)
            got = _grams(w, np.array([len(w)]), order + 1)
            assert max(float(np.mean([x in grams[g] for x in got])) for g in range(10)) >= 0.95
    whole = corrupt.markov_chains(toks, np.full(8, 150), np.random.default_rng(6), 1)
    same = corrupt.markov_chains(toks, np.full(8, 150), np.random.default_rng(6), 1, 40)
    assert all(np.array_equal(a, b) for a, b in zip(whole, same, strict=True))


def test_splices_take_sentences_of_other_documents_only():
    texts = [
        f"Topic{i} alpha{i} beta{i}. Gamma{i} delta{i} topic{i}. End{i} here{i}." for i in range(6)
    ]
    toks = tokenize(texts, 10_000)
    ends = np.array([token_hash(s) for s in corrupt.SENTENCE_ENDS], np.uint64)
    out = corrupt.splices(toks, np.random.default_rng(0), ends, [0, 3])
    starts = np.concatenate([[0], np.cumsum(toks.lengths)])
    for i, bad in zip([0, 3], out, strict=True):
        own = set(toks.ids[starts[i] : starts[i + 1]].tolist()) - set(ends.tolist())
        assert len(bad) == toks.lengths[i] and not (set(bad.tolist()) & own)


def test_splices_of_a_document_without_tokens_are_empty():
    toks = tokenize(["One two three. Four five.", "", "Six seven eight. Nine ten."], 10_000)
    ends = np.array([token_hash(s) for s in corrupt.SENTENCE_ENDS], np.uint64)
    for sources in (None, (1, 2)):
        out = corrupt.splices(toks, np.random.default_rng(0), ends, [0, 1, 2], sources)
        assert [len(x) for x in out] == toks.lengths.tolist()
    bad, _ = corrupt.corrupt_tokens(toks, ("splice",), seed=1, splice_sources=(1, 2))
    assert bad.lengths.tolist() == toks.lengths.tolist()


def test_document_scale_features_see_topic_that_ngrams_do_not():
    """long_repeat and halves_shared: a document that comes back to its own names scores above
    the same sentences spliced from other documents, whose every n-gram is just as real."""
    from pipeline.quality.coherence import _document_scale

    rng = np.random.default_rng(4)
    texts = []
    for i in range(30):
        names = [f"name{i}x{j}" for j in range(4)]
        sents = [
            f"The {names[int(rng.integers(4))]} met the {names[int(rng.integers(4))]} again ."
            for _ in range(14)
        ]
        texts.append(" ".join(sents))
    toks = tokenize(texts, 10_000)
    ends = np.array([token_hash(s) for s in corrupt.SENTENCE_ENDS], np.uint64)
    bad = corrupt.splices(toks, np.random.default_rng(1), ends, list(range(30)))
    lens = np.array([len(b) for b in bad])
    spliced = type(toks)(np.concatenate(bad), lens, toks.script.copy())

    def feats(t):
        doc = np.repeat(np.arange(len(t.lengths)), t.lengths)
        starts = np.concatenate([[0], np.cumsum(t.lengths)])[:-1]
        common = {token_hash(w) for w in ("the", "met", "again", ".")}
        uni = np.where(np.isin(t.ids, np.array(list(common), np.uint64)), 100.0, 0.0)
        return _document_scale(t, doc, starts, uni)

    (rep_real, half_real), (rep_bad, half_bad) = feats(toks), feats(spliced)
    assert (rep_real > rep_bad).all() and (half_real > half_bad).all()
    assert rep_real.min() > 0.4 and half_real.mean() > 0.9 > 0.5 > half_bad.max()
