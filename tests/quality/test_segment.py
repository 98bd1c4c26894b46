"""quality.segment (the one numpy pass) and the statistics built on it: the same numbers as
the per-document definitions (features.doc_stats), on text chosen to hit the class edges."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.quality import segment
from pipeline.quality.features import STAT_NAMES, doc_stats, stats_and_script_share, stats_matrix
from pipeline.quality.ngram import char_script_share
from synth_text import docs, salad, zh_docs

EDGES = [
    "",
    "   \n\t ",
    "Hello, World 2024! x_y __init__ e-mail: a@b.c 3.14 ½² ３４ ٣٤",
    "我们喜欢 ok 日本語のテキスト",
    "Привет мир, ΣΑΣ σς. İstanbul ǅ a\u0e31b \u0e01\u0e32",
    "emoji 🙂🙂 and \U0001d400\U0001d401 math, \ud800 lone surrogate",
    "line\r\nbreaks\x1c\x85\u2028end\x1f no break",
    "a.\nb\n\nb\n  a.  \nThe end\nthe end",
    "123 456 !!! ### the the the the the the",
    "x\r\n\r\ny. 'quoted' (paren) \u201cq\u201d \u2026",
    "word " * 300,
]


def _reference(texts: list[str], max_chars: int) -> np.ndarray:
    return np.array([doc_stats(t, max_chars) for t in texts], np.float32).reshape(-1, 9)


@pytest.mark.parametrize("max_chars", [5, 60, 100_000])
def test_stats_matrix_equals_doc_stats_row_for_row(max_chars):
    texts = EDGES + docs(15, 1) + salad(docs(3, 2), 2) + zh_docs(3, 4)
    got, want = stats_matrix(texts, max_chars), _reference(texts, max_chars)
    for i in range(len(texts)):
        assert got[i].tolist() == want[i].tolist(), (i, texts[i][:40], STAT_NAMES)


@pytest.mark.parametrize(("max_chars", "window"), [(100_000, 2000), (100_000, 9), (5, 2000)])
def test_script_share_from_the_batch_equals_char_script_share(max_chars, window, monkeypatch):
    """The share of unspaced-script characters from the batch's classes is ngram's per-text
    regex value exactly, over batch edges and when the window reads past max_chars."""
    import pipeline.quality.features as features

    monkeypatch.setattr(features, "STATS_BATCH", 4)
    texts = EDGES + zh_docs(3, 4) + ["我们 " * 700 + "ok " * 900] + docs(3, 1)
    stats, share = stats_and_script_share(texts, max_chars, window)
    assert share.tolist() == [char_script_share(t, window) for t in texts]
    assert stats.tolist() == stats_matrix(texts, max_chars).tolist()


@pytest.mark.parametrize("batch", [1, 2, 3, 4096])
def test_empty_texts_at_the_end_of_a_batch(batch, monkeypatch):
    """A batch may end with empty texts (no "\n" after the last one, so it starts past the
    joined array's end): their rows are zeros and the other rows do not move."""
    import pipeline.quality.features as features

    monkeypatch.setattr(features, "STATS_BATCH", batch)
    for texts in (["", ""], ["a b c.", ""], ["中文 字", "", ""], [*EDGES, "", *docs(2, 1), "", ""]):
        stats, share = stats_and_script_share(texts, 100_000)
        assert stats.tolist() == _reference(texts, 100_000).tolist()
        assert share.tolist() == [char_script_share(t, 2000) for t in texts]


def test_stats_matrix_batches_and_empty_input(monkeypatch):
    """Batches of 3 texts give the rows of one batch; no text gives a [0, 9] matrix."""
    import pipeline.quality.features as features

    texts = EDGES + docs(5, 2)
    whole = stats_matrix(texts, 1000)
    monkeypatch.setattr(features, "STATS_BATCH", 3)
    assert stats_matrix(texts, 1000).tolist() == whole.tolist()
    monkeypatch.setattr(features, "STATS_BATCH_CHARS", 40)  # batches by characters too
    assert stats_matrix(texts, 1000).tolist() == whole.tolist()
    assert stats_matrix([], 1000).shape == (0, len(STAT_NAMES))
    assert stats_matrix([""], 1000).tolist() == [[0.0] * len(STAT_NAMES)]


def _fp(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """Every whitespace-separated run of the texts and its fingerprint."""
    big, cps, _ = segment.join(texts)
    start, end = segment.runs((segment.classes(cps) & segment.SPACE) == 0)
    runs = [big[a:b] for a, b in zip(start.tolist(), end.tolist(), strict=True)]
    return runs, segment.fingerprints(cps, start, end)


@pytest.mark.parametrize("window", [segment.WINDOW, 7])
def test_fingerprints_name_equal_runs_alike_and_distinct_runs_apart(monkeypatch, window):
    """Equal runs anywhere (start of the batch, later, in another window, long runs on the
    per-offset path) share a fingerprint; distinct ones (anagrams, one character changed,
    one longer) do not."""
    monkeypatch.setattr(segment, "WINDOW", window)
    long_a, long_b = "ab" * 50, "ab" * 49 + "ba"
    texts = ["stop pots tops stop", f"x {long_a} y {long_b} {long_a}", "stop stopp tops"]
    runs, fp = _fp(texts)
    for i in range(len(runs)):
        for j in range(len(runs)):
            assert (fp[i] == fp[j]) == (runs[i] == runs[j]), (runs[i], runs[j])
