"""quality.copies: documents stitched from the sentences of several other documents."""

from __future__ import annotations

import numpy as np

from pipeline.quality import copies
from pipeline.quality.ngram import tokenize
from synth_text import docs, zh_docs


def _brute(key, doc, w, n):
    """copy_stats by dictionaries: holders per sentence, pair sums per (document, partner)."""
    tok: dict[tuple[int, int], int] = {}
    for k, d, x in zip(key.tolist(), doc.tolist(), w.tolist(), strict=True):
        tok[(k, d)] = tok.get((k, d), 0) + x
    holders: dict[int, set[int]] = {}
    for k, d in tok:
        holders.setdefault(k, set()).add(d)
    den, shared, top = np.zeros(n), np.zeros(n), np.zeros(n)
    pair: dict[tuple[int, int], int] = {}
    for (k, d), x in tok.items():
        h = holders[k]
        if len(h) > copies.MAX_HOLDERS:
            continue
        den[d] += x
        if len(h) >= 2:
            shared[d] += x
            for p in h - {d}:
                pair[(d, p)] = pair.get((d, p), 0) + x
    for (d, _), x in pair.items():
        top[d] = max(top[d], x)
    return den, shared, top


def test_copy_stats_equal_a_dictionary_count_in_any_row_order():
    rng = np.random.default_rng(5)
    n = 40
    # sentences with 1 to ~5 holders, one in ~25 documents (boilerplate), some rows repeated
    key = np.concatenate([rng.integers(0, 500, 860), np.full(40, 999)]).astype(np.uint64)
    key = key * np.uint64(0x9E3779B97F4A7C15)
    doc = rng.integers(0, n, 900)
    w = rng.integers(5, 30, 900)
    want = _brute(key, doc, w, n)
    assert (want[1] > want[2]).any() and (want[0] > want[1]).any()  # partners and own text
    assert (want[2] > 0).any()
    for perm in (np.arange(900), rng.permutation(900)):
        got = copies.copy_stats(key[perm], doc[perm], w[perm], n)
        for g, x in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, x)


def _sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(".") if s.strip()]


def test_a_splice_of_three_documents_is_gated_its_sources_and_a_copy_are_not():
    real = docs(12, 4)
    parts = [_sentences(t) for t in real[:3]]
    # sentences 0-2 of document 0, 3-5 of 1, 6-9 of 2, interleaved
    picks = [parts[0][i] for i in range(3)] + [parts[1][i] for i in range(3, 6)]
    picks += [parts[2][i] for i in range(6, 10)]
    order = np.random.default_rng(1).permutation(len(picks))
    splice = " ".join(picks[i] for i in order)
    copy = " ".join(reversed(_sentences(real[3])))  # one document's sentences reordered
    texts = [*real, splice, copy]
    toks = tokenize(texts, 100_000)
    den, shared, top = copies.copy_stats(*copies.sentence_rows(toks), len(texts))
    share = copies.splice_share(den, shared, top)
    gate = copies.splice_gate(den, shared, top)
    s, c = len(real), len(real) + 1
    assert share[s] == (shared[s] - top[s]) / den[s] and shared[s] == den[s]  # all copied
    assert 0.55 < share[s] < 0.75  # its best partner holds 4 of its 10 sentences
    assert gate[s] == 0.0
    assert share[c] == 0.0 and gate[c] == 1.0  # everything shared, with one partner
    assert (gate[: len(real)] == 1.0).all()
    assert shared[0] > 0.0 and share[0] == 0.0  # a source shares a part, with one partner


def test_boilerplate_sentences_are_no_evidence():
    real = docs(14, 6)
    line = "Click here to subscribe to our weekly newsletter today."
    texts = [f"{t} {line}" for t in real]  # in 14 documents: more than MAX_HOLDERS
    toks = tokenize(texts, 100_000)
    den, shared, top = copies.copy_stats(*copies.sentence_rows(toks), len(texts))
    alone = copies.copy_stats(*copies.sentence_rows(tokenize(real, 100_000)), len(real))
    np.testing.assert_array_equal(den, alone[0])  # the line counts nowhere
    np.testing.assert_array_equal(shared, alone[1])


def test_too_little_text_is_not_judged():
    toks = tokenize(["Short one here now. Short one here now.", "Short one here now."], 1000)
    den, shared, top = copies.copy_stats(*copies.sentence_rows(toks), 2)
    assert (den < copies.MIN_TOKENS).all()
    assert np.isnan(copies.splice_share(den, shared, top)).all()
    assert (copies.splice_gate(den, shared, top) == 1.0).all()


def test_the_reference_leaves_out_its_own_splices():
    """With drop_splices, a splice of reference documents 0-2 trains no fold model, so the
    models that score its sources no longer saw their sentences through it."""
    from pipeline.quality.coherence import fold_of
    from pipeline.quality.lmscore import LMParams, fit_lm, text_keys

    real = docs(40, 8)
    sents = [_sentences(t) for t in real[:3]]
    splice = " ".join(s for k in range(3) for s in sents[k][3 * k : 3 * k + 4])
    texts = [*real, splice]
    keys = text_keys(texts)
    params = LMParams(num_folds=4, min_reference_docs=10)
    kept, _ = fit_lm(texts, keys, params)
    left, _ = fit_lm(texts, keys, params, drop_splices=True)
    assert "reference_splices_left_out" not in kept.info
    assert left.info["reference_splices_left_out"] == 1
    assert left.info["reference_docs"] == kept.info["reference_docs"] - 1 == 40
    src = [i for i in range(3) if fold_of(keys[i : i + 1], 4, 0)[0] != fold_of(keys[40:], 4, 0)[0]]
    assert src  # a source in another fold than the splice: its model saw the splice before
    with_copy = kept.features([texts[i] for i in src], keys[src])[0][:, 0]
    without = left.features([texts[i] for i in src], keys[src])[0][:, 0]
    assert (without < with_copy).all()  # mean log-prob: less predictable without the copy


def _splice_set():
    real = docs(40, 8)
    sents = [_sentences(t) for t in real[:3]]
    splice = " ".join(s for k in range(3) for s in sents[k][3 * k : 3 * k + 4])
    quote = f"{real[5]} {_sentences(real[6])[2]}"  # one sentence of document 6: one partner each
    return [*real[:5], quote, *real[6:], splice]


def _brute_exclusions(toks, fold):
    """copier_exclusions by sets: the holders of every long sentence, partners per document."""
    from pipeline.quality import folds as foldmod

    skey, owner = foldmod._long_sentences(toks)
    holders: dict[int, set[int]] = {}
    for key, d in zip(skey.tolist(), owner.tolist(), strict=True):
        holders.setdefault(key, set()).add(d)
    partners: dict[int, set[int]] = {}
    own: dict[int, int] = {}
    held: dict[int, int] = {}
    for h in holders.values():
        if len(h) <= foldmod.MAX_HOLDERS:
            for a in h:
                own[a] = own.get(a, 0) + 1
                held[a] = held.get(a, 0) + (len(h) >= 2)
        if 2 <= len(h) <= foldmod.MAX_HOLDERS:
            for a in h:
                partners.setdefault(a, set()).update(h - {a})
    out = set()
    for a, ps in partners.items():
        for b in ps:
            source = held[b] < copies.ORIGINAL_MAX_SHARED * own[b]
            if len(ps) > len(partners[b]) and source and fold[a] != fold[b]:
                out.add((a, int(fold[b])))
    return sorted(out)


def test_copier_exclusions_leave_a_splice_out_of_its_sources_folds_only():
    texts = _splice_set()
    toks = tokenize(texts, 100_000)
    s = len(texts) - 1
    fold = np.array([0, 1, 2, *([3] * (len(texts) - 4)), 0], np.int64)  # splice with source 0
    got = list(zip(*(x.tolist() for x in copies.copier_exclusions(toks, fold)), strict=True))
    assert got == _brute_exclusions(toks, fold)
    # the splice (3 partners) leaves the models of its sources' other folds (1, 2; source 0
    # is in its own fold); the quote and its source (one partner each) leave nothing
    assert (s, 1) in got and (s, 2) in got and (s, 0) not in got
    assert not [d for d, _ in got if d in (5, 6)]
    # two copies of the same sentences (all shared): neither leaves the other's model
    walks = [" ".join(_sentences(texts[0])[:4]), " ".join(_sentences(texts[0])[1:4])]
    t3 = [*texts, *walks]
    f3 = np.concatenate([fold, [4, 4]])  # fold 4 holds the two copies only
    toks3 = tokenize(t3, 100_000)
    got3 = list(zip(*(x.tolist() for x in copies.copier_exclusions(toks3, f3)), strict=True))
    assert got3 == _brute_exclusions(toks3, f3)
    assert (s, 4) not in got3 and not [d for d, f in got3 if f == 4]
    fold2 = np.zeros(len(texts), np.int64)  # one fold: nothing to leave
    assert all(len(x) == 0 for x in copies.copier_exclusions(toks, fold2))


def test_train_lm_exclusions_count_as_models_without_those_documents():
    from pipeline.quality.ngram import train_lm

    rng = np.random.default_rng(3)
    toks = tokenize(docs(24, 5), 100_000)
    n, k = len(toks.lengths), 4
    fold = rng.integers(0, k, n)
    pairs = sorted(
        {
            (int(d), int(f))
            for d, f in zip(rng.integers(0, n, 12), rng.integers(0, k, 12), strict=True)
            if f != fold[d]
        }
    )
    ex = (np.array([d for d, _ in pairs]), np.array([f for _, f in pairs]))
    lm = train_lm(toks, 3, fold, k, ex)
    for f in range(k):
        allowed = [d for d in range(n) if fold[d] != f and (d, f) not in pairs]
        alone = train_lm(toks.doc_slice(np.array(allowed)), 3)
        # every n-gram the fold's model counts, by its key, and none it does not
        for order in range(3):
            keys, counts = lm.tables[order].keys, lm.values[order][:, f]
            got = dict(zip(keys[counts > 0].tolist(), counts[counts > 0].tolist(), strict=True))
            want_keys, want = alone.tables[order].keys, alone.values[order][:, 0]
            assert got == dict(zip(want_keys.tolist(), want.tolist(), strict=True)), (f, order)
        np.testing.assert_array_equal(
            lm.uni_counts[np.isin(lm.tables[0].keys, alone.tables[0].keys), f],
            alone.uni_counts[:, 0],
        )


def _zh_splice_set():
    real = zh_docs(40, 8)
    sents = [[x + "。" for x in t.split("。") if x] for t in real[:3]]
    splice = "".join(x for k in range(3) for x in sents[k][2 * k : 2 * k + 3])
    return [*real, splice]


def test_copy_folds_score_a_chinese_source_as_unseen():
    from pipeline.quality.coherence import fold_of
    from pipeline.quality.lmscore import LMParams, fit_lm, text_keys

    texts = _zh_splice_set()
    keys = text_keys(texts)
    s = len(texts) - 1
    before, _ = fit_lm(texts, keys, LMParams(num_folds=4, min_reference_docs=10))
    after, _ = fit_lm(texts, keys, LMParams(num_folds=4, min_reference_docs=10, copy_folds=True))
    folds = fold_of(keys, 4, 0)
    src = [i for i in range(3) if folds[i] != folds[s]]
    ex = copies.copier_exclusions(tokenize(texts, 100_000), folds)
    assert src and after.info["copier_exclusions"] == len(ex[0]) > 0
    assert {int(folds[i]) for i in src} <= {f for d, f in zip(*ex, strict=True) if d == s}
    lp_before = before.features([texts[i] for i in src], keys[src])[0][:, 0]
    lp_after = after.features([texts[i] for i in src], keys[src])[0][:, 0]
    assert (lp_after < lp_before).all()  # less predictable: the model no longer saw the copy


def test_copy_folds_leave_latin_sources_as_they_were():
    """COPY_FOLD_SCRIPTS: the same splice in English clears no model (same scores)."""
    from pipeline.quality.lmscore import LMParams, fit_lm, text_keys

    texts = _splice_set()
    keys = text_keys(texts)
    before, _ = fit_lm(texts, keys, LMParams(num_folds=4, min_reference_docs=10))
    after, _ = fit_lm(texts, keys, LMParams(num_folds=4, min_reference_docs=10, copy_folds=True))
    assert after.info["copier_exclusions"] == 0
    np.testing.assert_array_equal(before.features(texts, keys)[0], after.features(texts, keys)[0])
