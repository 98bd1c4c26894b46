"""quality.ngram: tokens, the probing hash table, Kneser-Ney smoothing, fold columns."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.quality.ngram import (
    SCRIPTS,
    HashTable,
    Tokens,
    token_hash,
    tokenize,
    tokenize_regex,
    train_lm,
)
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


def test_hash_table_clustered_keys_and_the_largest_key():
    """Keys crowding a few home slots (long displaced runs, past the last home slot) and the
    all-ones key (the free slots' marker) are all found; keys between them are not."""
    top = np.uint64(2**64 - 1)
    keys = np.concatenate(
        [np.arange(1, 200, 2, dtype=np.uint64), top - np.arange(300, 0, -3, dtype=np.uint64)]
    )
    keys = np.unique(np.concatenate([keys, [top]]))
    table = HashTable.build(keys)
    assert (table.find(keys) == np.arange(len(keys))).all()
    between = np.concatenate([np.arange(2, 200, 2, dtype=np.uint64), [top - np.uint64(1)]])
    assert (table.find(between) == -1).all()


TRICKY = [
    "Hello, World 2024! x_y __init__ e-mail: a@b.c",
    "我们喜欢 ok 日本語のテキスト",
    "Привет мир, ΣΑΣ σς",
    "",
    "   \n\t ",
    "İstanbul ǅ ½² ３４ ٣٤ a\u0e31b \u0e01\u0e32",
    "emoji 🙂🙂 and \U0001d400\U0001d401 math, \ud800 lone surrogate",
    "line\r\nbreaks\x1c\x85\u2028end",
]


@pytest.mark.parametrize("max_chars", [7, 40, 10_000])
def test_tokenize_one_pass_equals_the_regex(max_chars):
    """The numpy pass finds the tokens of the per-text regex findall, on scripts, digits,
    underscores, combining marks, astral characters, lone surrogates and odd line breaks."""
    texts = TRICKY + docs(20, 5)
    a, b = tokenize(texts, max_chars), tokenize_regex(texts, max_chars)
    assert a.lengths.tolist() == b.lengths.tolist()
    assert a.ids.tolist() == b.ids.tolist()
    assert a.script.tolist() == b.script.tolist()


def test_tokenize_in_passes_of_whole_texts_equals_one_pass(monkeypatch):
    import pipeline.quality.ngram as ngram

    texts = TRICKY + docs(12, 5)
    whole = tokenize(texts, 10_000)
    for chars in (1, 64, 700):
        monkeypatch.setattr(ngram, "TOKENIZE_CHARS", chars)
        got = tokenize(texts, 10_000)
        assert got.ids.tolist() == whole.ids.tolist()
        assert got.lengths.tolist() == whole.lengths.tolist()
        assert got.script.tolist() == whole.script.tolist()


@pytest.mark.parametrize("cap", [0, 7, 1 << 20])
def test_tokenize_hash_cache_gives_the_hashes_of_a_fresh_process(monkeypatch, cap):
    """Hashes looked up by run fingerprint across passes and calls (full or capped cache)
    equal those of the regex definition; the cache learns at most its cap."""
    import pipeline.quality.ngram as ngram

    monkeypatch.setattr(ngram, "_HASHES", ngram._HashCache())
    monkeypatch.setattr(ngram._HashCache, "MAX", cap)
    monkeypatch.setattr(ngram, "TOKENIZE_CHARS", 300)  # many passes: later ones hit
    texts = TRICKY + docs(12, 5)
    want = tokenize_regex(texts, 10_000)
    sizes = []
    for _ in range(2):  # the second call: every word cached (up to the cap)
        got = tokenize(texts, 10_000)
        assert got.ids.tolist() == want.ids.tolist()
        assert got.lengths.tolist() == want.lengths.tolist()
        sizes.append(len(ngram._HASHES.keys))
    keys = ngram._HASHES.keys
    assert sizes[0] == sizes[1] == min(cap, sizes[1]) and (cap == 0 or sizes[0] > 0)
    if cap == 7:
        assert sizes[0] == 7
    assert (keys[1:] > keys[:-1]).all()  # sorted, distinct


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
