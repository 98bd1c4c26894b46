"""quality.folds: per-sentence fold routing (coherence_folds: sentence) and per-token folds."""

from __future__ import annotations

import numpy as np

from pipeline.quality.coherence import fold_of
from pipeline.quality.folds import build_router, sentence_keys, sentence_partners
from pipeline.quality.lmscore import LMParams, fit_lm, text_keys
from pipeline.quality.ngram import tokenize, train_lm
from synth_text import docs


def test_per_token_folds_score_each_token_by_its_own_model():
    """A token scored with token_fold f gets exactly what model f gives it when the whole
    document is scored by f (its n-gram and its context both come from model f, also across a
    seam where the previous token's fold differs)."""
    toks = tokenize(docs(24, 1), 10_000)
    lm = train_lm(toks, 4, np.arange(24) % 3, 3)
    probe = tokenize(docs(4, 2), 10_000)
    n, t = len(probe.lengths), len(probe.ids)
    tok_fold = np.random.default_rng(0).integers(0, 3, t)
    mixed = lm.log_probs(probe, np.zeros(n, np.int64), tok_fold)
    for f in range(3):
        alone = lm.log_probs(probe, np.full(n, f))
        m = tok_fold == f
        for x, y in zip(mixed, alone, strict=True):
            np.testing.assert_array_equal(x[m], y[m])
    same = lm.log_probs(probe, np.full(n, 1), np.ones(t, np.int64))
    for x, y in zip(same, lm.log_probs(probe, np.full(n, 1)), strict=True):
        np.testing.assert_array_equal(x, y)


def test_sentence_keys_are_the_same_for_the_same_sentence_anywhere():
    toks = tokenize(
        [
            "Alpha beta gamma delta eps. Zeta eta theta iota kappa.",
            "Other words here now then. Alpha beta gamma delta eps.",
        ],
        1000,
    )
    sid, key, length = sentence_keys(toks)
    assert len(key) == 4 and length.tolist() == [6, 6, 6, 6]
    assert key[0] == key[3] and len(set(key.tolist())) == 3
    assert sid.tolist() == np.repeat(np.arange(4), 6).tolist()


def test_router_shares_folds_and_routes_copied_sentences():
    ref = docs(40, 3)
    # reference document 40 copies a sentence of document 0: the two must share a fold
    copied = ref[0].split(". ")[1] + "."
    ref.append(docs(1, 9)[0] + " " + copied)
    keys = text_keys(ref)
    toks = tokenize(ref, 10_000)
    router, fold, info = build_router(toks, keys, 4, seed=0)
    assert fold[0] == fold[40] and info["docs_sharing_a_fold"] >= 2
    sid, key, length = sentence_keys(toks)  # documents sharing no sentence keep their fold
    owner = np.repeat(np.arange(41), toks.lengths)[np.searchsorted(sid, np.arange(len(key)))]
    holders: dict[int, set[int]] = {}
    for k, o, n in zip(key.tolist(), owner.tolist(), length.tolist(), strict=True):
        if n >= 5:
            holders.setdefault(k, set()).add(o)
    alone = np.ones(41, bool)
    for h in holders.values():
        if len(h) > 1:
            alone[list(h)] = False
    assert not alone[0] and not alone[40] and alone.sum() > 10
    np.testing.assert_array_equal(fold[alone], fold_of(keys[alone], 4, 0))
    # a reference document: every token by its (component's) fold
    doc_fold, tok_fold = router.folds(toks, keys)
    np.testing.assert_array_equal(doc_fold, fold)
    np.testing.assert_array_equal(tok_fold, np.repeat(fold, toks.lengths))
    # a splice of reference sentences: each sentence by the fold of the document it came from
    a, b = ref[5].split(". ")[0] + ".", ref[7].split(". ")[0] + "."
    new = "Fresh words never seen at all before here."
    splice = [f"{a} {b} {new}"]
    stoks = tokenize(splice, 10_000)
    d, t = router.folds(stoks, text_keys(splice))
    la, lb = len(tokenize([a], 100).ids), len(tokenize([b], 100).ids)
    assert d[0] == fold_of(text_keys(splice), 4, 0)[0]
    assert (t[:la] == fold[5]).all() and (t[la : la + lb] == fold[7]).all()
    assert (t[la + lb :] == d[0]).all()


def test_sentence_partners_count_the_documents_a_text_is_stitched_from():
    texts = ["Aa bb cc dd ee. Ff gg hh ii jj.", "Kk ll mm nn oo. Pp qq rr ss tt.", "Uu vv ww."]
    texts.append("Aa bb cc dd ee. Pp qq rr ss tt. Uu vv ww.")  # two long sentences of 0 and 1
    assert sentence_partners(tokenize(texts, 1000)).tolist() == [1, 1, 0, 2]


def test_sentence_folds_remove_the_leak_of_copied_sentences():
    """A splice of reference sentences is scored by models that saw its sentences under
    `doc` (so it looks far more predictable than it is) and by models that did not under
    `sentence`: its mean log-prob falls; a reference document's own score is a model's that
    saw none of it under both rules."""
    ref = docs(60, 5)
    keys = text_keys(ref)
    splice = [" ".join(ref[i].split(". ")[j] + "." for i, j in ((3, 0), (9, 1), (21, 2)) * 3)]
    out = {}
    for rule in ("doc", "sentence"):
        sc, _ = fit_lm(ref, keys, LMParams(min_reference_docs=10, folds=rule))
        out[rule] = sc.features(splice, text_keys(splice))[0][0]
    assert out["sentence"][0] < out["doc"][0] - 0.3  # log_prob, nats per token
