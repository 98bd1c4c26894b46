"""Inputs the tokenizer tests share: mixed texts, a small trainer, hypothesis text strategies."""

from __future__ import annotations

from hypothesis import strategies as st

from pipeline.tokenizer import DEFAULT_SPECIALS, Tokenizer, train_bpe
from pipeline.tokenizer.pretokenize import TAIL, compile_pattern
from pipeline.tokenizer.wordcount import count_words

MIXED = [
    "Hello world! It's a test: they'll say 12345 apples cost $3.50.\n",
    "naïve café – “quotes” and emoji 😀🎉 and CJK 漢字かなカナ 한국어",
    "e\u0301 combining, tabs\t\tand   runs of spaces   \r\nwindows lines\r\n\r\n",
    "mail <|email|> at <|url|>, eos<|endoftext|>then <|pad|><|pad|> end",
    "   leading and trailing   ",
    "code: def f(x):\n    return x**2  # comment\n",
]


def train_tokenizer(texts: list[str], vocab: int = 400, min_frequency: int = 1) -> Tokenizer:
    counts = count_words(texts, compile_pattern(), None)
    res = train_bpe(counts, vocab - 256 - len(DEFAULT_SPECIALS), min_frequency)
    return Tokenizer(res.merges)


UNICODE = st.one_of(
    st.characters(),  # everything, lone surrogates included
    st.sampled_from(["😀", "👩‍👩‍👧", "漢", "字", "\u0301", "\u0308"]),  # emoji, CJK, combining
    st.sampled_from([" ", "  ", "\t", "\r\n", "\n"]),
    st.sampled_from(["'s", "'ll", "123", "4567", "<|endoftext|>", "<|email|>", "<|", "|>"]),
)


# Words, ASCII punctuation (the chunk cache's shortcut) and its look-alikes, and anything.
WORDY = st.one_of(
    st.sampled_from(["the", " cat", "é", "Ж", "ǅ", " ", "'", "'s", "n't", "1", "²", "_", "\n"]),
    st.sampled_from(list(TAIL) + ["…", "«", "»", "*", "$", "\u0301"]),
    UNICODE,
)
