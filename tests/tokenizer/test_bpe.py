"""Byte-level BPE: pre-tokenizer, trainer (vs a brute-force reference), encode/decode, HF parity."""

from __future__ import annotations

import random
from collections import Counter
from unittest.mock import patch

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import DataError
from pipeline.tokenizer import DEFAULT_SPECIALS, EOS, Tokenizer, batch, bpe, load, save, train_bpe
from pipeline.tokenizer.batch import NO_RANK, PairRanks, bpe_many
from pipeline.tokenizer.bpe import _bpe_long, _bpe_short
from pipeline.tokenizer.pretokenize import (
    COARSE,
    GPT2_PATTERN,
    SPLIT_PATTERN,
    TAIL,
    WHITESPACE,
    compile_pattern,
    count_words,
    pretokenize,
)

MIXED = [
    "Hello world! It's a test: they'll say 12345 apples cost $3.50.\n",
    "naïve café – “quotes” and emoji 😀🎉 and CJK 漢字かなカナ 한국어",
    "e\u0301 combining, tabs\t\tand   runs of spaces   \r\nwindows lines\r\n\r\n",
    "mail <|email|> at <|url|>, eos<|endoftext|>then <|pad|><|pad|> end",
    "   leading and trailing   ",
    "code: def f(x):\n    return x**2  # comment\n",
]


def _train(texts: list[str], vocab: int = 400, min_frequency: int = 1) -> Tokenizer:
    counts = count_words(texts, compile_pattern(), None)
    res = train_bpe(counts, vocab - 256 - len(DEFAULT_SPECIALS), min_frequency)
    return Tokenizer(res.merges)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    rng = random.Random(0)
    words = "the cat sat on a mat and then it ran off to see the dog 2024 1999".split()
    texts = [" ".join(rng.choice(words) for _ in range(50)) for _ in range(40)] + MIXED * 3
    return _train(texts, vocab=500, min_frequency=2)


def test_pretokenize_pieces():
    """GPT-2 split, digits in runs of <= 3, whitespace attached to the next word."""
    text = "It's 12345 cats!  Hi\n"
    assert pretokenize(text) == ["It", "'s", " 123", "45", " cats", "!", " ", " Hi", "\n"]
    assert "".join(pretokenize(MIXED[2])) == MIXED[2]


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


def _reference_train(counts: dict[str, int], num_merges: int) -> list[tuple[int, int]]:
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


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text("aab c", min_size=1, max_size=9), st.integers(1, 5), max_size=12))
def test_incremental_training_matches_brute_force(counts):
    """Incremental pair counts + lazy heap == recount-everything, incl. overlaps like 'aaaa'."""
    assert train_bpe(counts, 30, 1).merges == _reference_train(counts, 30)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=0, max_size=60))
def test_long_piece_bpe_equals_simple_bpe(ids):
    res = train_bpe({"".join("abcdef"[i] for i in ids) * 2: 1, "abab": 3}, 20, 1)
    tok = Tokenizer(res.merges)
    seq = [97 + i for i in ids]
    assert _bpe_long(list(seq), tok.ranks, tok.merged_ids) == _bpe_short(
        list(seq), tok.ranks, tok.merged_ids
    )


UNICODE = st.one_of(
    st.characters(),  # everything, lone surrogates included
    st.sampled_from(["😀", "👩‍👩‍👧", "漢", "字", "\u0301", "\u0308"]),  # emoji, CJK, combining
    st.sampled_from([" ", "  ", "\t", "\r\n", "\n"]),
    st.sampled_from(["'s", "'ll", "123", "4567", "<|endoftext|>", "<|email|>", "<|", "|>"]),
)


def test_whitespace_class_equals_regex_backslash_s():
    """The chunker's stdlib-`re` class must be exactly `regex`'s \\s, on every code point."""
    import re

    import regex

    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert re.findall(f"[{WHITESPACE}]", chars) == regex.findall(r"\s", chars)


def test_isalpha_implies_letter_class():
    """The chunk fast path treats an isalpha() word as one \\p{L}+ piece: never wrong here."""
    import regex

    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    letters = set(regex.findall(r"\p{L}", chars))
    assert all(c in letters for c in chars if c.isalpha())


@settings(max_examples=300, deadline=None)
@given(st.lists(UNICODE, max_size=40).map("".join))
def test_chunks_never_split_a_piece(text):
    """findall(text) == findall over each coarse chunk: what makes the chunk cache exact.
    The faster reordered patterns match exactly as the canonical ones."""
    import regex

    for canonical in (SPLIT_PATTERN, GPT2_PATTERN):
        pattern = compile_pattern(canonical)  # the reordered, faster equivalent
        whole = regex.findall(canonical, text)
        assert pattern.findall(text) == whole
        assert whole == [p for c in COARSE.findall(text) for p in pattern.findall(c)]


# Words, ASCII punctuation (the chunk cache's shortcut) and its look-alikes, and anything.
WORDY = st.one_of(
    st.sampled_from(["the", " cat", "é", "Ж", "ǅ", " ", "'", "'s", "n't", "1", "²", "_", "\n"]),
    st.sampled_from(list(TAIL) + ["…", "«", "»", "*", "$", "\u0301"]),
    UNICODE,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDY, max_size=30).map("".join))
def test_chunk_cache_equals_bpe_piece_by_piece(tok, text):
    """The chunk cache's regex-free paths (one word; a word + TAIL punctuation) give the ids
    of the full split, for both patterns, with a cold cache and a warm one."""
    for pattern in (SPLIT_PATTERN, GPT2_PATTERN):
        fresh = Tokenizer(tok.merges, pattern=pattern)
        expect = [i for p in regex.findall(pattern, text) for i in fresh.encode_piece(p)]
        assert fresh.encode_ordinary(text) == expect
        assert fresh.encode_ordinary(text) == expect
        for chunk in COARSE.findall(text):
            head = chunk.rstrip(TAIL)
            if head != chunk and (head[1:] if head[:1] == " " else head).isalpha():
                assert regex.findall(pattern, chunk) == [head, chunk[len(head) :]]


@settings(max_examples=300, deadline=None)
@given(st.lists(UNICODE, max_size=40).map("".join))
def test_decode_encode_roundtrip(tok, text):
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode_ordinary(text)) == text


def test_lone_surrogates_roundtrip_via_surrogatepass(tok):
    text = "a\ud800b\udfff \udc00"
    ids = tok.encode(text)
    assert tok.decode_bytes(ids) == text.encode("utf-8", "surrogatepass")
    assert tok.decode(ids) == text


def test_specials_are_single_tokens(tok):
    ids = tok.encode("hi<|endoftext|>there<|email|>")
    assert ids.count(tok.eos_id) == 1 and tok.specials["<|email|>"] in ids
    assert tok.eos_id not in tok.encode_ordinary("hi<|endoftext|>there")


def test_decode_of_cut_multibyte_uses_replacement():
    """No merges: 😀 is its 4 UTF-8 bytes; its first byte alone is not text -> U+FFFD."""
    raw = Tokenizer([])
    ids = raw.encode("😀")
    assert ids == list("😀".encode())
    assert raw.decode(ids[:1]) == "\ufffd" and raw.decode(ids) == "😀"


def test_huge_word_is_linear(tok):
    """200 kB of letters with no space: one piece, heap BPE (no quadratic blow-up)."""
    rng = random.Random(1)
    text = "".join(rng.choice("thecatsdog") for _ in range(200_000))
    assert tok.decode(tok.encode(text)) == text
    assert Tokenizer(tok.merges).encode_batch([text, "x"]) == [tok.encode(text), tok.encode("x")]
    res = train_bpe({text: 1}, 50, 1, max_word_bytes=256)  # chunked: 782 words of <= 256 B
    assert res.num_words <= 782 and len(res.merges) == 50


def test_hf_tokenizers_loads_our_file_with_identical_ids(tok, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    save(tok, path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    corpus = MIXED + ["the cat sat on the mat 2024", "x" * 3000, "\n\n\n  \t"]
    for text in corpus:
        assert hf.encode(text).ids == tok.encode(text), text
        assert hf.decode(tok.encode(text), skip_special_tokens=False) == text
    back = load(path)
    assert back.vocab_size == tok.vocab_size
    assert all(back.encode(t) == tok.encode(t) for t in corpus)
    assert path.read_bytes() == (
        save(back, tmp_path / "again.json") and (tmp_path / "again.json").read_bytes()
    )


def test_load_rejects_non_bpe_file(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": {"type": "WordPiece", "vocab": {}}}')
    with pytest.raises(DataError, match="model.type must be 'BPE'"):
        load(bad)
    bad.write_text("not json")
    with pytest.raises(DataError, match="tokenizer.json is not valid JSON"):
        load(bad)


def test_tiny_corpus_stops_early():
    res = train_bpe({"ab": 5}, num_merges=100, min_frequency=1)
    assert len(res.merges) == 1 and res.stop_reason == "no_pairs"
    tok = Tokenizer(res.merges)
    assert tok.vocab_size == 256 + 1 + len(DEFAULT_SPECIALS) and tok.eos_id == 257
    assert tok.specials[EOS] == 257


@pytest.mark.slow
def test_one_megabyte_word(tok):
    """The issue's case: 1 MB of letters, no space. Encode is O(n log n), training chunks it."""
    rng = random.Random(2)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1_000_000))
    assert tok.decode(tok.encode(text)) == text
    res = train_bpe({text: 1}, 20, 1, max_word_bytes=256)
    assert res.num_words == 3907 and len(res.merges) == 20  # ceil(1e6 / 256) chunks


def test_load_a_tokenizer_trained_by_hf(tmp_path):
    """A file HF's BpeTrainer wrote (stock ByteLevel pre-tokenizer, specials first, its own
    byte ids): we load it and give HF's ids, including for specials in the text."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(MIXED * 5, trainer=trainer)
    path = tmp_path / "hf.json"
    hf.save(str(path))
    ours = load(path)
    assert ours.eos_id == hf.token_to_id("<|endoftext|>")
    for text in [*MIXED, "numbers 1234567 and 'quotes' \r\n"]:
        assert ours.encode(text) == hf.encode(text).ids, text
        assert ours.decode(ours.encode(text)) == text
    with patch.object(bpe, "MIN_VECTOR", 1):  # HF's own byte ids through the vectorised path
        texts = [*MIXED, "numbers 1234567 and 'quotes' \r\n"]
        assert load(path).encode_batch(texts) == [hf.encode(t).ids for t in texts]


def test_custom_specials_without_a_common_prefix():
    tok = Tokenizer([], specials=[EOS, "<|pad|>", "[SEP]"])
    ids = tok.encode("a[SEP]b<|endoftext|>")
    assert ids == [97, tok.specials["[SEP]"], 98, tok.eos_id]
    assert tok.decode(ids) == "a[SEP]b<|endoftext|>"


# --- encode_batch: the vectorised cold-cache path -------------------------------------------


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
    with patch.object(bpe, "MIN_VECTOR", 1), patch.object(bpe, "BATCH_CHARS", 64):
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
        patch.object(bpe, "MAX_CACHE_ENTRIES", 50),
        patch.object(bpe, "MIN_VECTOR", 1),
        patch.object(bpe, "BATCH_CHARS", 500),
    ):
        fresh = Tokenizer(tok.merges)
        assert fresh.encode_batch(texts) == expect
        assert len(fresh._store) < distinct and len(fresh._chunks) < distinct  # were cleared


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
    """Every chunk given the same hash: the stored code points do not match, and the group is
    encoded through the dictionary path instead, with the right ids."""
    from pipeline.tokenizer import vector

    texts = ["the cat sat", "", "on the mat, again and again", "x" * 5]
    expect = [tok.encode(t) for t in texts]
    same = lambda cp, starts, ends: np.full(len(starts), 7, np.uint64)  # noqa: E731
    with patch.object(vector, "chunk_hashes", same):
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
    assert len(store.keys) >= 2 * len(keys)  # grew from 2^16 slots, load <= 1/2


def test_encode_batch_group_of_one_piece_chunks_only(tok):
    """A group whose new chunks are all single pieces (no regex split at all)."""
    texts = ["the cat", " sat on", "mat\n\n  "]
    with patch.object(bpe, "MIN_VECTOR", 1):
        assert Tokenizer(tok.merges).encode_batch(texts) == [tok.encode(t) for t in texts]
