"""Byte-level BPE: pre-tokenizer, trainer (vs a brute-force reference), encode/decode, HF parity."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.tokenizer.pretokenize import (
    COARSE,
    GPT2_PATTERN,
    SPLIT_PATTERN,
    WHITESPACE,
    compile_pattern,
    pretokenize,
)
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
