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


def test_detector_lift_mixture_keeps_the_real_part_and_not_the_junk_among_the_positives():
    """A self reference holds the corpus's own junk. Positives = 97% real (logits ~ N(3, 1))
    + 3% junk scored as the detector's negatives are (N(-2, 1)). The quantile rule lifts the
    bias until 98% of *all* positives pass: a third of the junk passes. The mixture rule
    estimates the junk share from where the negatives score and keeps 98% of the real part."""
    from pipeline.quality.lmscore import detector_lift

    rng = np.random.default_rng(0)
    real, junk = rng.normal(3.0, 1.0, 970), rng.normal(-2.0, 1.0, 30)
    neg = rng.normal(-2.0, 1.0, 1000)
    pos = np.concatenate([real, junk])
    lift_q, pi_q = detector_lift(pos, neg, 0.98, "quantile")
    lift_m, pi_m = detector_lift(pos, neg, 0.98, "mixture")
    assert pi_q == 0.0 and 0.015 <= pi_m <= 0.06
    assert (junk + lift_q >= 0).mean() > 0.25  # the defect: the 98% rule passes the junk
    assert (junk + lift_m >= 0).mean() < 0.1
    assert 0.96 <= (real + lift_m >= 0).mean() <= 0.995
    assert lift_q == -float(np.quantile(pos, 1.0 - 0.98))


def test_detector_lift_mixture_fails_at_most_max_extra_fail_more_and_needs_negatives():
    """An estimate of 7% junk would fail ~9% of the positives: the rule stops at 2% + 3%, still
    failing more junk than the quantile rule. With fewer than MIN_MIXTURE_NEGATIVES negatives
    the lower tail cannot be read: the quantile rule, to the bit."""
    from pipeline.quality.lmscore import MAX_EXTRA_FAIL, MIN_MIXTURE_NEGATIVES, detector_lift

    rng = np.random.default_rng(2)
    real, junk = rng.normal(3.0, 1.0, 930), rng.normal(-2.0, 1.0, 70)
    pos, neg = np.concatenate([real, junk]), rng.normal(-2.0, 1.0, 1000)
    lift_m, pi_m = detector_lift(pos, neg, 0.98, "mixture")
    lift_q, _ = detector_lift(pos, neg, 0.98, "quantile")
    assert pi_m > 0.05
    assert (pos + lift_m >= 0).mean() >= 0.98 - MAX_EXTRA_FAIL - 1e-9
    assert (junk + lift_m >= 0).mean() < (junk + lift_q >= 0).mean() - 0.3
    few = neg[: MIN_MIXTURE_NEGATIVES - 1]
    assert detector_lift(pos, few, 0.98, "mixture") == detector_lift(pos, few, 0.98, "quantile")


def test_detector_lift_mixture_is_the_quantile_rule_when_no_positive_scores_like_junk():
    """pi = 0 when no positive reaches the negatives' quartiles: the same lift, to the bit; a
    positive set indistinguishable from the negatives is read as at most half junk."""
    from pipeline.quality.lmscore import MAX_JUNK_SHARE, detector_lift

    rng = np.random.default_rng(1)
    pos, neg = rng.normal(3.0, 1.0, 500), rng.normal(-6.0, 0.5, 500)
    assert detector_lift(pos, neg, 0.98, "mixture") == detector_lift(pos, neg, 0.98, "quantile")
    assert detector_lift(pos, neg, 0.98, "mixture")[1] == 0.0
    same = rng.normal(0.0, 1.0, 500)
    assert detector_lift(same, rng.normal(0.0, 1.0, 500), 0.98)[1] == MAX_JUNK_SHARE
    assert detector_lift(np.zeros(0), neg, 0.98) == (0.0, 0.0)


def test_detector_lift_reaches_the_file_and_the_report():
    """LMParams.detector_lift "quantile" (an older file) stores no key, so such a file keeps its
    bytes; "mixture" stores it and reports each detector's estimated junk share."""
    from pipeline.quality import lmfile
    from pipeline.quality.ngram import SCRIPTS

    texts = docs(60, 5)
    for rule in ("quantile", "mixture"):
        params = LMParams(min_reference_docs=10, feature_set=2, detector_lift=rule)
        scorer, ref = fit_lm(texts, np.arange(60), params)
        fit_classifiers(scorer, ref, None)
        data = lmfile.scorer_bytes(scorer)
        assert (b"detector_lift" in data) == (rule == "mixture")
        info = scorer.info["classifiers"][SCRIPTS[scorer.usable[0]]]
        assert ("positives_junk_share" in info) == (rule == "mixture")
        if rule == "mixture":
            assert set(info["positives_junk_share"]) == {"local", "markov", "splice"}
    # set 1 has no detectors: its file keeps the bytes of before whatever the rule
    params = LMParams(min_reference_docs=10, feature_set=1, detector_lift="mixture")
    scorer, ref = fit_lm(texts, np.arange(60), params)
    fit_classifiers(scorer, ref, None)
    assert b"detector_lift" not in lmfile.scorer_bytes(scorer)


def test_chain_docs_reaches_the_file_and_moves_the_classifier(tmp_path):
    """LMParams.chain_docs 0 (an older file) stores no key and 8 stores it, read back equal;
    the Latin classifier's weights move with it (other corruptions), the Chinese one's do not
    (GROUPED_CHAIN_SCRIPTS), and a set-1 scorer stores
    no key whatever the value."""
    from pipeline.quality import lmfile
    from pipeline.quality.ngram import SCRIPTS

    rng = np.random.default_rng(3)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    chinese = [
        "".join("".join(rng.choice(han, int(rng.integers(8, 20)))) + "。" for _ in range(20))
        for _ in range(40)
    ]
    texts = docs(120, 5) + chinese
    weights, stored = {}, {}
    for chain in (0, 8):
        params = LMParams(min_reference_docs=10, feature_set=2, chain_docs=chain)
        scorer, ref = fit_lm(texts, np.arange(len(texts)), params)
        fit_classifiers(scorer, ref, None)
        assert scorer.usable == [SCRIPTS.index("latin"), SCRIPTS.index("cjk")]
        data = lmfile.scorer_bytes(scorer)
        assert (b"chain_docs" in data) == (chain > 0)
        path = tmp_path / f"lm{chain}.npz"
        path.write_bytes(data)
        stored[chain] = lmfile.load_scorer(path).params.chain_docs
        weights[chain] = {s: np.ravel(c.w) for s, c in scorer.classifiers.items()}
    assert stored == {0: 0, 8: 8}
    latin, cjk = SCRIPTS.index("latin"), SCRIPTS.index("cjk")
    assert not np.array_equal(weights[0][latin], weights[8][latin])
    assert np.array_equal(weights[0][cjk], weights[8][cjk])  # characters: whole-reference chains
    params = LMParams(min_reference_docs=10, feature_set=1, chain_docs=8)
    scorer, ref = fit_lm(texts, np.arange(len(texts)), params)
    fit_classifiers(scorer, ref, None)
    assert b"chain_docs" not in lmfile.scorer_bytes(scorer)
