"""quality.cohesion (feature set 2): sentence-scale cohesion, worked examples; set 1 vs set 2."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.quality import lmfile
from pipeline.quality.coherence import FEATURE_SETS, Coherence, doc_features, fold_of
from pipeline.quality.cohesion import COHESION_NAMES, cohesion_features
from pipeline.quality.corrupt import sentence_end_hashes
from pipeline.quality.lmscore import LMParams, fit_classifiers, fit_lm
from pipeline.quality.ngram import SCRIPTS, Tokens, token_hash, tokenize
from synth_text import docs


def _features(sentences_per_doc: list[list[list[str]]], script: str = "latin") -> np.ndarray:
    """cohesion_features of documents given as sentences of words; every word but "." is
    content (log-frequency -10 < ln 1e-3), "." ends a sentence, gains are 0."""
    words = [[w for s in d for w in [*s, "."]] for d in sentences_per_doc]
    flat = [w for d in words for w in d]
    ids = np.array([token_hash(w) for w in flat], np.uint64)
    lengths = np.array([len(d) for d in words], np.int64)
    toks = Tokens(ids, lengths, np.full(len(words), SCRIPTS.index(script), np.int8))
    log_uni = np.where(np.array(flat) == ".", -1.0, -10.0)
    doc = np.repeat(np.arange(len(words)), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)])[:-1]
    is_end = np.isin(ids, sentence_end_hashes())
    zeros = np.zeros(len(ids))
    return cohesion_features(toks, log_uni, zeros, doc, starts, is_end)


def test_adjacent_sentences_sharing_a_word_link_and_unrelated_ones_do_not():
    """Document 0: "a b . b c . c d ." — sentences 2 and 3 each repeat a word of the sentence
    before: adjacent_link = 2/2, unit_repeat = 2 repeats / 6 units, every repeat is 1 segment
    back: locality 1 minus the chance share for 3 segments (3 pairs, all within 2: 1) = 0.
    Document 1: "a b . c d . e f ." — nothing recurs: all three are 0. unit_density = 6/9."""
    f = _features([[["a", "b"], ["b", "c"], ["c", "d"]], [["a", "b"], ["c", "d"], ["e", "f"]]])
    col = {n: f[:, i] for i, n in enumerate(COHESION_NAMES)}
    assert col["adjacent_link"].tolist() == [1.0, 0.0]
    assert col["unit_repeat"] == pytest.approx([2 / 6, 0.0])
    assert col["repeat_locality"] == pytest.approx([0.0, 0.0])
    assert col["unit_density"] == pytest.approx([6 / 9, 6 / 9])


def test_repeat_locality_is_high_for_near_repeats_in_a_long_document():
    """Six sentences; sentence k repeats a word of sentence k-1 (gaps of 1) vs sentence k
    repeating the k-th word of sentence 0 (gaps 1..5). Chance share within 2 of 6 segments:
    (5 + 4) / 15 = 0.6, so locality = 1 - 0.6 = 0.4 vs 2/5 - 0.6 = -0.2."""
    chain = [[f"w{k}", f"w{k + 1}"] for k in range(6)]
    star = [["a", "b", "c", "d", "e"]] + [[w, f"v{k}"] for k, w in enumerate("abcde")]
    f = _features([chain, star])
    loc = f[:, COHESION_NAMES.index("repeat_locality")]
    assert loc == pytest.approx([0.4, -0.2])


def test_unspaced_scripts_link_by_character_pairs():
    """In a CJK document single characters are no units; a pair of adjacent rare characters
    is: "甲乙丙 . 乙丙丁 ." shares the pair 乙丙 (and 甲乙, 丙丁 are not repeated)."""
    f = _features([[["甲", "乙", "丙"], ["乙", "丙", "丁"]]], script="cjk")
    assert f[0, COHESION_NAMES.index("adjacent_link")] == 1.0
    assert f[0, COHESION_NAMES.index("unit_repeat")] == pytest.approx(1 / 4)


@pytest.mark.parametrize("old,new", [(1, 2), (2, 3)])
def test_each_feature_set_extends_the_one_before_without_moving_its_columns(old, new):
    """Set k+1's first columns are set k's, value for value, on the same documents and model."""
    texts = docs(40, 3)
    scorer, _ = fit_lm(texts, np.arange(40), LMParams(min_reference_docs=10))
    toks = tokenize(texts, 10_000)
    fold = np.arange(40) % scorer.lm.num_folds
    before, after = (doc_features(scorer.lm, toks, fold, k) for k in (old, new))
    assert before.shape[1] == len(FEATURE_SETS[old]) and after.shape[1] == len(FEATURE_SETS[new])
    np.testing.assert_array_equal(after[:, : before.shape[1]], before)
    assert np.isfinite(after).all()
    if new == 3:  # the two added columns: a spread and a ratio of spreads
        assert after.shape[1] == before.shape[1] + 2 and (after[:, -2] >= 0).all()


def test_doc_features_in_runs_of_documents_equal_one_pass(monkeypatch):
    """Documents scored in runs of whole documents (CHUNK_TOKENS) get the rows of one pass,
    empty documents and a run boundary at every document included."""
    import pipeline.quality.coherence as coherence

    texts = docs(30, 3)
    scorer, _ = fit_lm(texts, np.arange(30), LMParams(min_reference_docs=10))
    toks = tokenize(texts[:12] + ["", "...", *docs(6, 5)], 10_000)
    fold = np.arange(len(toks.lengths)) % scorer.lm.num_folds
    whole = doc_features(scorer.lm, toks, fold, 3)
    for chunk in (1, 50, 400):
        monkeypatch.setattr(coherence, "CHUNK_TOKENS", chunk)
        np.testing.assert_array_equal(doc_features(scorer.lm, toks, fold, 3), whole)


def test_detectors_score_the_lowest_and_round_trip_through_the_file():
    """Set 2 fits one detector per junk family (w [3, F]); P(coherent) is their minimum, and
    the scorer file keeps the set; a set-1 file stores no feature_set key (its old bytes)."""
    texts = docs(60, 5)
    for k in (1, 2):
        scorer, ref = fit_lm(texts, np.arange(60), LMParams(min_reference_docs=10, feature_set=k))
        fit_classifiers(scorer, ref, None)
        clf = scorer.classifiers[SCRIPTS.index("latin")]
        assert clf.w.ndim == k  # set 1: one logistic regression
        data = lmfile.scorer_bytes(scorer)
        assert (b"feature_set" in data) == (k == 2)
    z = np.array([[0.0, 1.0]])
    two = Coherence(np.zeros(2), np.ones(2), np.array([[1.0, 0.0], [0.0, -3.0]]), np.zeros(2))
    assert two.predict(z)[0] == pytest.approx(1 / (1 + np.exp(3.0)))


def test_detector_keep_raises_biases_until_that_share_of_positives_passes():
    """Each set-2 detector's bias is lifted until `detector_keep` of the positives pass it;
    a text passes when all do, so at 0.98 at least 1 - 3 x 0.02 of the positives pass (before
    the gates), and never fewer than with no lift asked for (keep 0.5: balanced fits alone)."""
    texts = docs(60, 6)
    kept = {}
    for keep in (0.5, 0.98):
        params = LMParams(min_reference_docs=10, feature_set=2, detector_keep=keep)
        scorer, ref = fit_lm(texts, np.arange(60), params)
        fit_classifiers(scorer, ref, None)
        clf = scorer.classifiers[SCRIPTS.index("latin")]
        fold = fold_of(ref.rows, scorer.lm.num_folds, params.seed)  # as the fit scored them
        kept[keep] = float((clf.predict(doc_features(scorer.lm, ref.tokens, fold)) >= 0.5).mean())
    assert kept[0.98] >= max(kept[0.5], 0.94)


def test_segment_gain_spread_and_seam_jump_worked_example():
    """Set 3. Document 0: three sentences "a b ." with per-token gains 1, 3, 1 per sentence:
    segment means 1, 3, 1 -> std sqrt(8/9), mean |jump| 2, seam_gain_jump 2 / (std + 0.1).
    Document 1: one sentence -> both 0. Document 2: equal gains -> std 0, jump 0."""
    from pipeline.quality.cohesion import COHESION_NAMES_V3, segment_features

    words = [["a", "b", "."] * 3, ["a", "b", "."], ["a", "b", "."] * 2]
    flat = [w for d in words for w in d]
    ids = np.array([token_hash(w) for w in flat], np.uint64)
    lengths = np.array([len(d) for d in words], np.int64)
    toks = Tokens(ids, lengths, np.zeros(3, np.int8))
    gain = np.array([1.0] * 3 + [3.0] * 3 + [1.0] * 3 + [5.0] * 3 + [2.0] * 6)
    doc = np.repeat(np.arange(3), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)])[:-1]
    is_end = np.isin(ids, sentence_end_hashes())
    f = segment_features(toks, gain, doc, starts, is_end)
    std = np.sqrt(8 / 9)
    assert COHESION_NAMES_V3 == ("segment_gain_std", "seam_gain_jump")
    assert f[0] == pytest.approx([std, 2.0 / (std + 0.1)])
    assert f[1].tolist() == [0.0, 0.0]
    assert f[2] == pytest.approx([0.0, 0.0])


def test_repeats_in_order_gives_the_lexsort_groups_and_gaps():
    """One stable sort by key (units in document and segment order) yields the occurrences of
    the 3-key lexsort, grouped in another order: the same (document, segment, same, gap) rows;
    input out of that order is what the lexsort is kept for."""
    from pipeline.quality.cohesion import _repeats

    rng = np.random.default_rng(5)
    d = np.sort(rng.integers(0, 40, 3000))
    s = d * 100 + np.sort(rng.integers(0, 60, 3000))  # segments ascend within each document
    s = np.sort(s)
    key = rng.integers(0, 25, 3000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)

    def rows(out):
        return sorted(zip(*(x.tolist() for x in out), strict=True))

    want = _repeats(d, s, key)
    assert rows(_repeats(d, s, key, in_order=True)) == rows(want)
    assert (want[3] >= 1).sum() > 100  # repeats over earlier segments do occur
    shuffled = rng.permutation(len(d))
    assert rows(_repeats(d[shuffled], s[shuffled], key[shuffled])) == rows(want)
    assert rows(_repeats(d[shuffled], s[shuffled], key[shuffled], in_order=True)) != rows(want)
