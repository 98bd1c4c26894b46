"""quality.corrupt: seeded token-level corruptions keep what they claim to keep."""

from __future__ import annotations

import numpy as np

from pipeline.quality import corrupt
from pipeline.quality.ngram import token_hash, tokenize
from synth_text import docs


def test_corruptions_are_seeded_and_keep_what_they_claim():
    toks = tokenize(docs(12, 3), 10_000)
    a, kinds = corrupt.corrupt_tokens(toks, corrupt.KINDS, seed=5)
    b, _ = corrupt.corrupt_tokens(toks, corrupt.KINDS, seed=5)
    assert (a.ids == b.ids).all() and kinds[: len(corrupt.KINDS)] == list(corrupt.KINDS)
    starts = np.concatenate([[0], np.cumsum(toks.lengths)])
    bstarts = np.concatenate([[0], np.cumsum(a.lengths)])
    bigrams = {(int(x), int(y)) for x, y in zip(toks.ids[:-1], toks.ids[1:], strict=True)}
    ends = np.array([token_hash(s) for s in corrupt.SENTENCE_ENDS], np.uint64)
    for i, kind in enumerate(kinds):
        src = toks.ids[starts[i] : starts[i + 1]]
        bad = a.ids[bstarts[i] : bstarts[i + 1]]
        if kind in ("word_shuffle", "sentence_shuffle", "block_shuffle"):
            assert sorted(bad.tolist()) == sorted(src.tolist()) and not (bad == src).all()
        elif kind == "unigram_salad":  # same length, sentence ends where they were
            at_end = np.isin(src, ends)
            assert len(bad) == len(src) and at_end.any() and (bad[at_end] == src[at_end]).all()
            assert (bad[~at_end] != src[~at_end]).mean() > 0.5
        elif kind == "word_drop":
            assert 0 < len(bad) < len(src)
        elif kind == "salad_block":
            changed = (bad != src).mean()
            assert len(bad) == len(src) and 0.1 < changed <= 0.6
        else:  # bigram_chain: every adjacent pair is a real bigram
            assert all((int(x), int(y)) in bigrams for x, y in zip(bad[:-1], bad[1:], strict=True))
