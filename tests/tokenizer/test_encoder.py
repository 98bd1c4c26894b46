"""Byte-level BPE: pre-tokenizer, trainer (vs a brute-force reference), encode/decode, HF parity."""

from __future__ import annotations

import random
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tokenizer import (
    Tokenizer,
    batch,
    bpe,
    encoder,
)
from pipeline.tokenizer.batch import NO_RANK, PairRanks, bpe_many
from pipeline.tokenizer.model import _bpe_long
from pipeline.tokenizer.pretokenize import (
    COARSE,
    GPT2_PATTERN,
    SPLIT_PATTERN,
)
from tokenizer_cases import MIXED, WORDY


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=80) | st.text("the cat sa", min_size=1), max_size=40)
)
def test_bpe_many_equals_the_one_piece_loop(tok, pieces):
    """All pieces at once in numpy == each piece alone (lowest rank first, leftmost on ties)."""
    raws = [p if isinstance(p, bytes) else p.encode() for p in pieces]
    if not raws:
        return
    expect = [_bpe_long(list(r), tok.ranks, tok.merged_ids) for r in raws]
    for few in (1, 8):  # numpy rounds to the end; the last pieces finished in Python
        with patch.object(batch, "FEW", few):
            table = PairRanks(tok.merges, tok.merged_ids)
            ids, counts = bpe_many(raws, table, np.arange(256), tok._finish)
        ends = np.cumsum(counts).tolist()
        got = [ids[e - c : e].tolist() for e, c in zip(ends, counts.tolist(), strict=True)]
        assert got == expect


def test_pair_ranks_lookup_with_clashing_slots():
    """Hash table lookups, hits and misses, equal a dict's, also where keys share slots."""
    rng = random.Random(3)
    merges = list({(rng.randrange(300), rng.randrange(300)) for _ in range(2000)})
    table = PairRanks(merges, list(range(300, 300 + len(merges))))
    left = np.array([rng.randrange(300) for _ in range(20000)] + [a for a, _ in merges])
    right = np.array([rng.randrange(300) for _ in range(20000)] + [b for _, b in merges])
    ranks = {m: r for r, m in enumerate(merges)}
    expect = [ranks.get(p, NO_RANK) for p in zip(left.tolist(), right.tolist(), strict=True)]
    assert table.lookup(left, right).tolist() == expect
    slots = table._home(np.array([a * table.width + b for a, b in merges]))
    assert len(set(slots.tolist())) < len(merges)  # the test did exercise probing


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(WORDY, max_size=30).map("".join), max_size=12))
def test_encode_batch_equals_encode(tok, texts):
    """Groups of a few texts, every cold chunk vectorised: the ids of encode(), cold and warm,
    for both patterns (specials, long words and all of WORDY's shapes included)."""
    texts = [*texts, "x" * 70 + "!!", " " + "é" * 40 + ".", "y" * 300, "<|pad|>a<|pad|>"]
    with patch.object(encoder, "MIN_VECTOR", 1), patch.object(encoder, "BATCH_CHARS", 64):
        for pattern in (SPLIT_PATTERN, GPT2_PATTERN):
            one = Tokenizer(tok.merges, pattern=pattern)
            expect = [one.encode(t) for t in texts]
            many = Tokenizer(tok.merges, pattern=pattern)
            assert many.encode_batch(texts) == expect
            assert many.encode_batch(texts) == expect  # warm


def test_encode_batch_when_the_caches_overflow(tok):
    """A cache that fills up is cleared and refilled between groups: ids unchanged."""
    rng = random.Random(4)
    texts = [" ".join(rng.choice(MIXED).split()[::-1]) + f" w{i}x!" for i in range(300)]
    texts += [t + " <|pad|>" for t in texts[:20]]  # the dictionary path too
    expect = [tok.encode(t) for t in texts]
    distinct = len({c for t in texts for c in COARSE.findall(t)})
    with (
        patch.object(bpe, "MAX_CACHE_ENTRIES", 50),  # the tokenizer's piece and chunk caches
        patch.object(encoder, "MAX_CACHE_ENTRIES", 50),  # the batch encoder's chunk store
        patch.object(encoder, "MIN_VECTOR", 1),
        patch.object(encoder, "BATCH_CHARS", 500),
    ):
        fresh = Tokenizer(tok.merges)
        assert fresh.encode_batch(texts) == expect
        assert len(fresh._batch._store) < distinct and len(fresh._chunks) < distinct  # were cleared


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(WORDY, max_size=20).map("".join), min_size=1, max_size=6))
def test_numpy_chunker_equals_coarse(texts):
    """vector.chunk_starts finds COARSE's chunks, documents never sharing one."""
    from pipeline.tokenizer.vector import chunk_starts, code_points

    docs = [t for t in texts if t]
    if not docs:
        return
    text = "".join(docs)
    end = np.cumsum([len(t) for t in docs])
    starts = chunk_starts(code_points(text), end - [len(t) for t in docs], end).tolist()
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    assert chunks == [c for t in docs for c in COARSE.findall(t)]


def test_encode_batch_falls_back_when_hashes_collide(tok):
    """Every chunk and piece given the same hash: the stored code points do not match, and the
    group is encoded through the dictionary path instead, with the right ids (its new chunks
    made one by one when the pieces' hashes collide too)."""
    from pipeline.tokenizer import vector

    texts = ["the cat sat", "", "on the mat, again and again", "x" * 5]
    expect = [tok.encode(t) for t in texts]
    same = lambda cp, starts, ends: np.full(len(starts), 7, np.uint64)  # noqa: E731
    for min_vector in (1, encoder.MIN_VECTOR):  # the new chunks' pieces in numpy, or not
        with (
            patch.object(vector, "chunk_hashes", same),
            patch.object(encoder, "MIN_VECTOR", min_vector),
        ):
            fresh = Tokenizer(tok.merges)
            assert fresh.encode_batch(texts) == expect
            assert fresh.encode_batch(texts) == expect


def test_chunk_store_grows_and_finds_everything():
    """Hashes added in batches (the table doubles several times) are all found; others not."""
    from pipeline.tokenizer.vector import ChunkStore

    rng = np.random.default_rng(5)
    keys = np.unique(rng.integers(1, 1 << 63, 200_000, dtype=np.uint64))
    rng.shuffle(keys)
    store = ChunkStore()
    for part in np.array_split(keys, 7):
        n = len(part)
        ids = np.arange(n, dtype=np.int64)
        store.add(part, ids, np.ones(n, np.int64), ids.astype(np.uint32), np.ones(n, np.int64))
    found = store.lookup(keys)
    assert sorted(found.tolist()) == list(range(len(keys)))
    assert (store.hashes.data[found] == keys).all()
    others = np.setdiff1d(keys[:1000] ^ np.uint64(1 << 62), keys)
    assert len(others) and (store.lookup(others) == -1).all()
    assert len(store.keys) >= 4 * len(keys)  # grew from 2^16 slots, load <= 1/4


def test_encode_batch_group_of_one_piece_chunks_only(tok):
    """A group whose new chunks are all single pieces (no regex split at all)."""
    texts = ["the cat", " sat on", "mat\n\n  "]
    with patch.object(encoder, "MIN_VECTOR", 1):
        assert Tokenizer(tok.merges).encode_batch(texts) == [tok.encode(t) for t in texts]


PIECE_PARTS = st.sampled_from(
    ["'s", "'t", "'m", "'d", "'re", "'ve", "'ll", "'S", "'r", "'l", "''", "n't", "ll", "re"]
    + ["1", "12", "1234", "²", "٣", " 7", " '", "e", "s", "  ", "\t", ".", "\ud800", "😀"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(PIECE_PARTS | WORDY, max_size=25).map("".join), min_size=1, max_size=5))
def test_numpy_pieces_equal_findall(texts):
    """pieces.piece_starts splits distinct COARSE chunks, laid end to end in any order, exactly
    as the pattern splits each chunk alone, for both patterns; vector.utf8 is str.encode's."""
    from pipeline.tokenizer.pieces import piece_starts
    from pipeline.tokenizer.pretokenize import DIGIT_RUN, compile_pattern
    from pipeline.tokenizer.vector import code_points, utf8

    chunks = list(dict.fromkeys(c for t in texts for c in COARSE.findall(t)))[::-1]
    if not chunks:
        return
    joined = "".join(chunks)
    cp = code_points(joined)
    first = np.zeros(len(cp), bool)
    first[np.cumsum([len(c) for c in chunks]) - [len(c) for c in chunks]] = True
    for pattern in (SPLIT_PATTERN, GPT2_PATTERN):
        starts = piece_starts(cp, first, DIGIT_RUN[pattern]).tolist()
        got = [joined[a:b] for a, b in zip(starts, [*starts[1:], len(joined)], strict=True)]
        assert got == [p for c in chunks for p in compile_pattern(pattern).findall(c)]
    data, width = utf8(cp)
    assert data.tobytes() == joined.encode("utf-8", "surrogatepass")
    assert width.tolist() == [len(c.encode("utf-8", "surrogatepass")) for c in joined]


def test_long_texts_are_cut_where_no_piece_crosses(tok):
    """Texts over BATCH_CHARS are encoded in segments cut between non-whitespace and
    whitespace: the ids of the whole text (one without whitespace stays whole; so does one
    with a special token), as lists and as encode_batch_flat's (ids, counts)."""
    rng = random.Random(6)
    words = [w for t in MIXED[:3] for w in t.replace("<|", "").split(" ")]
    long = "".join(
        rng.choice(words) + rng.choice([" ", "  ", "\n", "\t", "", "\n\n "]) for _ in range(400)
    )
    texts = ["short one", long, "x" * 900, long + "<|pad|>" + long[:300], " " * 700, long[::-1]]
    with patch.object(encoder, "BATCH_CHARS", 256), patch.object(encoder, "MIN_VECTOR", 1):
        fresh = Tokenizer(tok.merges)
        assert len(fresh._batch._cut(long)) > 4
        expect = [tok.encode(t) for t in texts]
        assert fresh.encode_batch(texts) == expect
        texts, expect = ["", *texts, ""], [[], *expect, []]  # the numpy output, warm and cold
        for flat, counts in (
            fresh.encode_batch_flat(texts),
            Tokenizer(tok.merges).encode_batch_flat(texts),
        ):
            assert counts.tolist() == [len(e) for e in expect]
            assert flat.tolist() == [i for e in expect for i in e]
    assert [a.tolist() for a in Tokenizer(tok.merges).encode_batch_flat([])] == [[], []]
