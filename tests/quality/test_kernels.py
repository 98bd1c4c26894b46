"""quality.kernels: the compiled scoring loop gives NgramLM.log_probs_numpy's values, bit for
bit (the numpy path is the definition)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.quality.ngram import tokenize, train_lm
from synth_text import docs, salad


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint8) if x.dtype.kind == "f" else x


@pytest.mark.parametrize(("order", "folds"), [(4, 4), (2, 1), (3, 3), (5, 2)])
def test_compiled_log_probs_equal_the_numpy_definition(order, folds):
    rng = np.random.default_rng(order * 10 + folds)
    ref = tokenize(docs(60, 1), 10_000)
    lm = train_lm(ref, order, rng.integers(0, folds, len(ref.lengths)), folds)
    # seen text, unseen salad, an empty document and one-token documents (contexts of pads)
    texts = docs(20, 2) + salad(docs(10, 3), 4) + ["", "word", "Unseen zzzq qqxv"]
    toks = tokenize(texts, 10_000)
    fold = rng.integers(0, folds, len(toks.lengths))
    per_token = rng.integers(0, folds, len(toks.ids))  # sentence folds: seams inside documents
    for token_fold in (None, per_token):
        want = lm.log_probs_numpy(toks, fold, token_fold)
        got = lm.log_probs(toks, fold, token_fold)
        assert len(got) == len(want) == 5
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert np.array_equal(_bits(g), _bits(w))
        assert (want[2] >= 2).mean() > 0.3  # the seen text reaches the longer orders


def test_compiled_log_probs_of_no_tokens_and_an_empty_model():
    lm = train_lm(tokenize(["one two three"], 100), 4)
    none = tokenize(["", ""], 100)
    for got in lm.log_probs(none, np.zeros(2, np.int64)):
        assert got.shape == (0,)
    toks = tokenize(["four five six four"], 100)
    got = lm.log_probs(toks, np.zeros(1, np.int64))
    want = lm.log_probs_numpy(toks, np.zeros(1, np.int64))
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(_bits(g), _bits(w))
    assert (got[2] == 0).all()  # every word unseen
