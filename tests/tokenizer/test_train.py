"""Byte-level BPE: pre-tokenizer, trainer (vs a brute-force reference), encode/decode, HF parity."""

from __future__ import annotations

from collections import Counter
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tokenizer import (
    DEFAULT_SPECIALS,
    EOS,
    Tokenizer,
    train_bpe,
)
from pipeline.tokenizer import train as train_module


def _reference_train(
    counts: dict[str, int], num_merges: int, min_frequency: int = 1
) -> list[tuple[int, int]]:
    """Brute force: recount every pair after each merge (minbpe style), same tie-break."""
    words = {tuple(w.encode()): c for w, c in counts.items()}
    vocab = [bytes([i]) for i in range(256)]
    merges = []
    for _ in range(num_merges):
        pc: Counter = Counter()
        for w, c in words.items():
            for p in zip(w, w[1:], strict=False):
                pc[p] += c
        if not pc:
            break
        best = min(pc, key=lambda p: (-pc[p], vocab[p[0]], vocab[p[1]]))
        if pc[best] < min_frequency:
            break
        new = len(vocab)
        vocab.append(vocab[best[0]] + vocab[best[1]])
        merges.append(best)
        nw: Counter = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] += c
        words = nw
    return merges


def test_train_worked_example():
    """{ab: 3, abc: 2, bc: 1}: (a,b)=5 merges first -> 256; then (256,c)=2 -> 257; (b,c)=1 is
    below min_frequency=2, so training stops early with reason min_frequency."""
    res = train_bpe({"ab": 3, "abc": 2, "bc": 1}, num_merges=10, min_frequency=2)
    assert res.merges == [(97, 98), (256, 99)]
    assert res.vocab[257] == b"abc"
    assert res.stop_reason == "min_frequency"


def test_train_tie_break_is_lexicographic_and_order_free():
    """All pairs count 1: merged in byte order (a,b) < (c,d) < (x,y), whatever the dict order."""
    counts = {"xy": 1, "cd": 1, "ab": 1}
    res = train_bpe(counts, num_merges=10, min_frequency=1)
    assert res.merges == [(97, 98), (99, 100), (120, 121)]
    assert res.stop_reason == "no_pairs"
    assert train_bpe(dict(reversed(counts.items())), 10, 1).merges == res.merges


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text("aab c", min_size=1, max_size=9), st.integers(1, 5), max_size=12))
def test_incremental_training_matches_brute_force(counts):
    """Incremental pair counts + lazy heap == recount-everything, incl. overlaps like 'aaaa'."""
    assert train_bpe(counts, 30, 1).merges == _reference_train(counts, 30)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.text("aab cd", min_size=1, max_size=9), st.integers(1, 60), max_size=14),
    st.integers(1, 4),
    st.integers(0, 3),
)
def test_binned_sums_and_waiting_pairs_match_brute_force(counts, min_frequency, shift):
    """The paths real corpora take, forced on small ones: every merge's pair changes summed by
    bincount (not argsort), and pairs below the top count >> `shift` waiting outside the heap
    (the floor falling as the top does). Same merges and stop reason as the brute force."""
    with (
        mock.patch.object(train_module, "_BIN_MIN", 0),
        mock.patch.object(train_module, "_FLOOR_SHIFT", shift),
        mock.patch.object(train_module, "_FLOOR_STEP", 1),
    ):
        res = train_bpe(counts, 30, min_frequency)
    ref = _reference_train(counts, 30, min_frequency)
    assert res.merges == ref
    if len(ref) < 30:  # stopped early: below min_frequency if any pair is left, else none left
        left = any(len(w.encode()) > 1 for w in counts) and (
            _reference_train(counts, len(ref) + 1) != ref
        )
        assert res.stop_reason == ("min_frequency" if left else "no_pairs")


def test_tiny_corpus_stops_early():
    res = train_bpe({"ab": 5}, num_merges=100, min_frequency=1)
    assert len(res.merges) == 1 and res.stop_reason == "no_pairs"
    tok = Tokenizer(res.merges)
    assert tok.vocab_size == 256 + 1 + len(DEFAULT_SPECIALS) and tok.eos_id == 257
    assert tok.specials[EOS] == 257
