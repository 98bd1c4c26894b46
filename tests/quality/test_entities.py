"""Feature set 4 (quality.cohesion.entity_features): entities from the raw surface, worked
examples; Tokens.surface through tokenize, corruptions and the scorer file."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.quality import lmfile
from pipeline.quality.coherence import FEATURE_SETS, doc_features
from pipeline.quality.cohesion import ENTITY_NAMES, entity_features
from pipeline.quality.corrupt import KINDS, corrupt_tokens, sentence_end_hashes
from pipeline.quality.lmscore import LMParams, fit_classifiers, fit_lm, text_keys
from pipeline.quality.ngram import tokenize
from synth_text import docs


def test_surface_keeps_capitals_and_digits_and_leaves_ids_alone():
    """tokenize(surface=True) gives the same ids; the surface differs from the id exactly at
    capitalised tokens and numbers other than 0, and is one value per spelling."""
    texts = ["Alice met alice in 1999 and 2001 . ALICE left at 0 .", "李白是诗人。"]
    plain, surf = tokenize(texts, 1000), tokenize(texts, 1000, surface=True)
    assert plain.surface is None
    np.testing.assert_array_equal(plain.ids, surf.ids)
    differs = (surf.surface != surf.ids).tolist()
    n0 = int(surf.lengths[0])
    #          Alice met  alice in    1999 and   2001 .      ALICE left  at     0      .
    assert differs[:n0] == [1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0]
    assert not any(differs[n0:])  # no case in Chinese
    assert surf.ids[0] == surf.ids[2] and surf.surface[0] != surf.surface[2]
    assert surf.surface[0] == surf.surface[8]  # Alice, ALICE: a capital first letter
    assert surf.ids[4] == surf.ids[6] and surf.surface[4] != surf.surface[6]  # 1999, 2001
    sub = surf.doc_slice(np.array([1, 0]))
    np.testing.assert_array_equal(sub.surface[-n0:], surf.surface[:n0])


def _entities(texts: list[str]) -> dict[str, list[float]]:
    toks = tokenize(texts, 1000, surface=True)
    n = len(texts)
    doc = np.repeat(np.arange(n), toks.lengths)
    starts = np.concatenate([[0], np.cumsum(toks.lengths)])[:-1]
    is_end = np.isin(toks.ids, sentence_end_hashes())
    log_uni = np.where(is_end, -1.0, -10.0)  # every word a content word
    f = entity_features(toks, log_uni, doc, starts, is_end)
    return {name: f[:, i].tolist() for i, name in enumerate(ENTITY_NAMES)}


def test_names_carried_between_sentences_against_names_that_change():
    """Doc 0 keeps its cast: names (capitals not at a sentence start) Alice | Alice Bob | Bob:
    2 of 4 occurrences come back, both later segments link, one cluster of 3 segments. Doc 1
    changes cast every sentence (a splice's pattern): nothing comes back, the largest cluster
    is 1 of 3 segments. Doc 2: two different years (numbers count wherever they stand)."""
    col = _entities(
        [
            "We saw Alice . Then Alice met Bob . Later Bob left .",
            "We saw Alice . Then Carol met Bob . Later Dan left .",
            "It rained in 1990 . It snowed in 2001 .",
        ]
    )
    assert col["entity_density"] == pytest.approx([4 / 13, 4 / 13, 2 / 10])
    assert col["entity_repeat"] == pytest.approx([0.5, 0.0, 0.0])
    assert col["entity_link"] == pytest.approx([1.0, 0.0, 0.0])
    assert col["entity_cluster"] == pytest.approx([1.0, 1 / 3, 0.5])
    # with the content words too: doc 2's "it", "in" join its two sentences
    assert col["unit_cluster"] == pytest.approx([1.0, 1 / 3, 1.0])


def test_one_sentence_and_unspaced_documents():
    """One sentence: only the density is set. Chinese: pairs of rare characters are entities
    (the test's log-frequencies make every character rare)."""
    col = _entities(["We saw Alice and Bob", "甲乙丙。乙丙丁。"])
    assert col["entity_density"][0] == pytest.approx(2 / 5)
    assert [col[k][0] for k in ENTITY_NAMES[1:]] == [0.0] * 4
    assert col["entity_repeat"][1] == pytest.approx(1 / 4)  # 乙丙 again, of 甲乙 乙丙 乙丙 丙丁
    assert col["entity_link"][1] == 1.0 and col["entity_cluster"][1] == 1.0


def test_corruptions_carry_the_surface_of_their_words():
    """Corruptions made on surfaces map back to the ids of those spellings; every kind."""
    toks = tokenize(
        ["Alice met Bob in 1990 . " * 3 + "Then Carol left .", *docs(11, 3)], 10_000, True
    )
    bad, kinds = corrupt_tokens(toks, KINDS, seed=5, splice_sources=(2, 6))
    assert set(kinds) == set(KINDS) and bad.surface is not None
    pairs = dict(zip(toks.surface.tolist(), toks.ids.tolist(), strict=True))
    assert all(pairs[s] == i for s, i in zip(bad.surface.tolist(), bad.ids.tolist(), strict=True))
    again, _ = corrupt_tokens(toks, KINDS, seed=5, splice_sources=(2, 6))
    np.testing.assert_array_equal(again.surface, bad.surface)


def test_set_4_extends_set_2_and_round_trips_through_the_file(tmp_path):
    """Set 4's first columns are set 2's; a fitted set-4 scorer written and read back scores
    the same features (it tokenises with surfaces again)."""
    texts = docs(60, 7)
    scorer, ref = fit_lm(texts, text_keys(texts), LMParams(min_reference_docs=10, feature_set=4))
    assert ref.tokens.surface is not None
    fit_classifiers(scorer, ref, None)
    f4, script = scorer.features(texts[:20], text_keys(texts[:20]))
    assert f4.shape[1] == len(FEATURE_SETS[4]) == len(FEATURE_SETS[2]) + len(ENTITY_NAMES)
    toks = tokenize(texts[:20], 100_000)
    fold = scorer.folds(toks, text_keys(texts[:20]))[0]
    np.testing.assert_array_equal(f4[:, :17], doc_features(scorer.lm, toks, fold, 2))
    path = tmp_path / "lm.npz"
    path.write_bytes(lmfile.scorer_bytes(scorer))
    back = lmfile.load_scorer(path)
    assert back.params.feature_set == 4
    f_back, _ = back.features(texts[:20], text_keys(texts[:20]))
    np.testing.assert_array_equal(f_back, f4)
    np.testing.assert_array_equal(back.coherence(f_back, script), scorer.coherence(f4, script))
