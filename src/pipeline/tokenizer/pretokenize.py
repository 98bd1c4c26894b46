"""Pre-tokenization: split text into the pieces BPE merges never cross (GPT-2 style).

The split pattern is GPT-2's with one change: digits go in runs of at most 3 (as GPT-4/Llama 3),
so numbers don't become thousands of one-off tokens. Whitespace before a word stays attached to
that word, so concatenating the pieces gives back the text exactly. Special tokens are cut out
first and never split. Nothing here knows about bytes or merges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import regex

# GPT-2's pattern (openai/gpt-2 encoder.py) with \p{N}+ -> \p{N}{1,3}. The same string goes into
# tokenizer.json (a `Split` pre-tokenizer), so Hugging Face `tokenizers` splits identically.
SPLIT_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# The unmodified GPT-2 pattern, used by `ByteLevel(use_regex=True)` in files made elsewhere.
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# `regex`'s \s (the Unicode White_Space set), spelled out for the stdlib `re`, whose own \s
# also matches U+001C..U+001F. A test checks the two agree on every code point.
WHITESPACE = "\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Coarse chunks: whitespace split exactly as the patterns above split it, and each run of
# non-whitespace with its optional leading space. Both patterns above never put a piece across
# a chunk boundary, so findall(text) == [p for c in chunks(text) for p in findall(c)] (tested),
# and a cache keyed by chunk is exact. The stdlib `re` runs this ~2x faster than `regex` runs
# the full pattern, and there are ~20% fewer chunks than pieces.
# The alternatives match at disjoint positions, so their order is free: the common one first.
COARSE = re.compile(rf" ?[^{WHITESPACE}]+|[{WHITESPACE}]+(?![^{WHITESPACE}])|[{WHITESPACE}]+")
CHUNKABLE = (SPLIT_PATTERN, GPT2_PATTERN)  # patterns for which the chunk identity holds
# the longest run of \p{N} in one piece under each (pieces.piece_starts), None: no limit
DIGIT_RUN = {SPLIT_PATTERN: 3, GPT2_PATTERN: None}
# ASCII punctuation (no letter, digit or whitespace): a chunk `[ ]letters` + a run of these is
# exactly two pieces under both CHUNKABLE patterns, so it needs no regex (tested).
TAIL = ".,;:!?\"')]}-"

# The same matches as the two patterns above (tested): a word is tried first, contractions are
# one alternative; ~10% faster with `regex`. tokenizer.json keeps the canonical strings.
_FAST = {
    SPLIT_PATTERN: r" ?\p{L}+| ?\p{N}{1,3}|'(?:[stmd]|re|ve|ll)| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    GPT2_PATTERN: r" ?\p{L}+| ?\p{N}+|'(?:[stmd]|re|ve|ll)| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
}
_COMPILED: dict[str, regex.Pattern] = {}


def compile_pattern(pattern: str = SPLIT_PATTERN) -> regex.Pattern:
    """The compiled split regex (cached per process: compiling costs ~1 ms)."""
    pat = _COMPILED.get(pattern)
    if pat is None:
        pat = _COMPILED[pattern] = regex.compile(_FAST.get(pattern, pattern))
    return pat


def special_splitter(specials: Iterable[str]) -> regex.Pattern | None:
    """A regex whose `split` keeps each special token as its own item; None if there are none.

    Longest first, so `<|a|>` never shadows `<|a|>x|>`-like longer specials.
    """
    toks = sorted(set(specials), key=lambda s: (-len(s), s))
    if not toks:
        return None
    return regex.compile("(" + "|".join(regex.escape(t) for t in toks) + ")")


def pretokenize(text: str, pattern: regex.Pattern | None = None) -> list[str]:
    """The pieces of `text` (no special-token handling); "".join(pieces) == text."""
    return (pattern or compile_pattern()).findall(text)


def chunk_piece(piece: bytes, max_bytes: int) -> Iterator[bytes]:
    """Cut an over-long piece into `max_bytes` slices: training cost stays linear in its length."""
    for start in range(0, len(piece), max_bytes):
        yield piece[start : start + max_bytes]
