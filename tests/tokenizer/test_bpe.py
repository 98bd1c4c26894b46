"""Byte-level BPE: pre-tokenizer, trainer (vs a brute-force reference), encode/decode, HF parity."""

from __future__ import annotations

import random

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tokenizer import (
    EOS,
    Tokenizer,
    train_bpe,
)
from pipeline.tokenizer.model import _bpe_long, _bpe_short
from pipeline.tokenizer.pretokenize import (
    COARSE,
    GPT2_PATTERN,
    SPLIT_PATTERN,
    TAIL,
)
from tokenizer_cases import UNICODE, WORDY


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=0, max_size=60))
def test_long_piece_bpe_equals_simple_bpe(ids):
    res = train_bpe({"".join("abcdef"[i] for i in ids) * 2: 1, "abab": 3}, 20, 1)
    tok = Tokenizer(res.merges)
    seq = [97 + i for i in ids]
    assert _bpe_long(list(seq), tok.ranks, tok.merged_ids) == _bpe_short(
        list(seq), tok.ranks, tok.merged_ids
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


@pytest.mark.slow
def test_one_megabyte_word(tok):
    """The issue's case: 1 MB of letters, no space. Encode is O(n log n), training chunks it."""
    rng = random.Random(2)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1_000_000))
    assert tok.decode(tok.encode(text)) == text
    res = train_bpe({text: 1}, 20, 1, max_word_bytes=256)
    assert res.num_words == 3907 and len(res.merges) == 20  # ceil(1e6 / 256) chunks


def test_custom_specials_without_a_common_prefix():
    tok = Tokenizer([], specials=[EOS, "<|pad|>", "[SEP]"])
    ids = tok.encode("a[SEP]b<|endoftext|>")
    assert ids == [97, tok.specials["[SEP]"], 98, tok.eos_id]
    assert tok.decode(ids) == "a[SEP]b<|endoftext|>"
