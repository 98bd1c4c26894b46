"""quality.lmscore + coherence: fold models score order, corruptions gain less from context."""

from __future__ import annotations

import numpy as np

from pipeline.quality import corrupt
from pipeline.quality.coherence import FEATURE_NAMES, doc_features
from pipeline.quality.lmscore import LMParams, fit_classifiers, fit_lm
from pipeline.quality.ngram import tokenize
from synth_text import docs


def test_salad_and_shuffles_gain_less_from_context_than_their_sources():
    """The property the issue asks for: order-sensitive scoring. Every corrupted copy has a
    lower context gain than its source, scored by a fold model that saw neither."""
    texts = docs(60, 4)
    scorer, ref = fit_lm(texts, np.arange(60), LMParams(min_reference_docs=10))
    fold = np.arange(60) % scorer.lm.num_folds
    toks = tokenize(texts, 10_000)
    gain = FEATURE_NAMES.index("context_gain")
    real = doc_features(scorer.lm, toks, fold)[:, gain]
    for kind in ("word_shuffle", "unigram_salad", "salad_block"):
        bad, _ = corrupt.corrupt_tokens(toks, (kind,), seed=1)
        assert (doc_features(scorer.lm, bad, fold)[:, gain] < real).all(), kind
    fit_classifiers(scorer, ref, None)
    info = scorer.info["classifiers"]["latin"]
    assert info["train_auc_per_kind"]["word_shuffle"] > 0.95
    assert info["train_auc_per_kind"]["unigram_salad"] > 0.95
