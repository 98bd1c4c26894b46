"""quality.copies: documents stitched from the sentences of several other documents."""

from __future__ import annotations

import numpy as np

from pipeline.quality import copies
from pipeline.quality.ngram import tokenize
from synth_text import docs


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
