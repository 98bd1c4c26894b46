"""quality.ngram: tokens, the radix-indexed hash table, Kneser-Ney smoothing, fold columns."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.quality.ngram import SCRIPTS, HashTable, Tokens, token_hash, tokenize, train_lm
from synth_text import docs


def test_tokenize_words_digits_and_scripts():
    toks = tokenize(["Hello, World 2024!", "我们喜欢", "Привет мир"], 1000)
    want = [token_hash(w) for w in ("hello", ",", "world", "0", "!")]
    assert toks.ids[:5].tolist() == [int(w) for w in want]
    assert toks.lengths.tolist() == [5, 4, 2]  # Chinese: one token per character
    assert [SCRIPTS[s] for s in toks.script] == ["latin", "cjk", "cyrillic"]


def test_hash_table_finds_present_keys_only():
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(1, 2**63, 5000, dtype=np.int64).astype(np.uint64))
    table = HashTable.build(keys)
    absent = rng.integers(1, 2**63, 3000, dtype=np.int64).astype(np.uint64)
    absent = absent[~np.isin(absent, keys)]
    assert (table.find(keys) == np.arange(len(keys))).all()
    assert (table.find(absent) == -1).all()
    assert (HashTable.build(keys[:0]).find(keys) == -1).all()


def test_kneser_ney_distribution_sums_to_one():
    """For a fixed context, P(w | context) over every training word plus one unseen word
    (the uniform share of the unknown slot) sums to 1: the smoothing is a distribution."""
    toks = tokenize(docs(30, 0), 10_000)
    lm = train_lm(toks, order=3)
    vocab = np.unique(toks.ids)
    unseen = np.array([token_hash("zebra")], np.uint64)
    for context in (["the", "old"], ["a", "farmer"], ["zebra", "the"]):
        h = np.array([token_hash(w) for w in context], np.uint64)
        cands = np.concatenate([vocab, unseen])
        ids = np.concatenate([np.concatenate([h, [w]]) for w in cands]).astype(np.uint64)
        query = Tokens(ids, np.full(len(cands), 3), np.zeros(len(cands), np.int8))
        lp = lm.log_probs(query, np.zeros(len(cands), np.int64))[0]
        p = np.exp(lp.reshape(-1, 3)[:, 2])
        assert p.sum() == pytest.approx(1.0, abs=1e-6), context


def test_fold_columns_equal_models_trained_without_that_fold():
    texts = docs(24, 1)
    toks = tokenize(texts, 10_000)
    fold = np.arange(24) % 3
    lm = train_lm(toks, 4, fold, 3)
    probe = tokenize(docs(5, 2), 10_000)
    for f in range(3):
        alone = train_lm(toks.doc_slice(np.flatnonzero(fold != f)), 4)
        a = lm.log_probs(probe, np.full(5, f))
        b = alone.log_probs(probe, np.zeros(5, np.int64))
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-6)
