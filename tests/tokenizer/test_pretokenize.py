"""Byte-level BPE: pre-tokenizer, trainer (vs a brute-force reference), encode/decode, HF parity."""

from __future__ import annotations

from collections import Counter

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tokenizer import DEFAULT_SPECIALS
from pipeline.tokenizer.pretokenize import (
    COARSE,
    GPT2_PATTERN,
    SPLIT_PATTERN,
    WHITESPACE,
    compile_pattern,
    pretokenize,
    special_splitter,
)
from pipeline.tokenizer.wordcount import count_words
from tokenizer_cases import MIXED, UNICODE


def test_pretokenize_pieces():
    """GPT-2 split, digits in runs of <= 3, whitespace attached to the next word."""
    text = "It's 12345 cats!  Hi\n"
    assert pretokenize(text) == ["It", "'s", " 123", "45", " cats", "!", " ", " Hi", "\n"]
    assert "".join(pretokenize(MIXED[2])) == MIXED[2]


def test_whitespace_class_equals_regex_backslash_s():
    """The chunker's stdlib-`re` class must be exactly `regex`'s \\s, on every code point."""
    import re

    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert re.findall(f"[{WHITESPACE}]", chars) == regex.findall(r"\s", chars)


def test_isalpha_implies_letter_class():
    """The chunk fast path treats an isalpha() word as one \\p{L}+ piece: never wrong here."""

    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    letters = set(regex.findall(r"\p{L}", chars))
    assert all(c in letters for c in chars if c.isalpha())


@settings(max_examples=300, deadline=None)
@given(st.lists(UNICODE, max_size=40).map("".join))
def test_chunks_never_split_a_piece(text):
    """findall(text) == findall over each coarse chunk: what makes the chunk cache exact.
    The faster reordered patterns match exactly as the canonical ones."""

    for canonical in (SPLIT_PATTERN, GPT2_PATTERN):
        pattern = compile_pattern(canonical)  # the reordered, faster equivalent
        whole = regex.findall(canonical, text)
        assert pattern.findall(text) == whole
        assert whole == [p for c in COARSE.findall(text) for p in pattern.findall(c)]


def _reference_counts(texts, pattern, splitter):
    out: Counter = Counter()
    for text in texts:
        segs = [text] if splitter is None else splitter.split(text)[::2]
        for seg in segs:
            out.update(pattern.findall(seg))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(UNICODE, max_size=30).map("".join), max_size=8),
    st.sampled_from([1, 8, 1 << 20]),
)
def test_count_words_equals_findall_counts(texts, group_chars):
    """Chunk-first counting (Arrow value_counts, pieces of distinct chunks only) gives exactly
    the findall counts, specials cut out, with any group size (texts never share a chunk);
    lone surrogates take the dictionary fallback."""
    import pipeline.tokenizer.wordcount as wc

    splitter = special_splitter(DEFAULT_SPECIALS)
    old, wc.GROUP_CHARS = wc.GROUP_CHARS, group_chars
    try:
        for pattern in (compile_pattern(), compile_pattern(GPT2_PATTERN)):
            want = _reference_counts(texts, pattern, splitter)
            assert count_words(texts, pattern, splitter) == want
        assert count_words(texts, compile_pattern(), None) == _reference_counts(
            texts, compile_pattern(), None
        )
    finally:
        wc.GROUP_CHARS = old


def test_count_words_other_pattern_takes_the_plain_path():
    """A pattern without the chunk identity (here: pairs of characters) is counted by findall."""
    pattern = regex.compile(r"..?", regex.S)
    texts = ["ab cd", " e", "", "ab cd"]
    assert count_words(texts, pattern, None) == Counter(["ab", " c", "d", " e", "ab", " c", "d"])
