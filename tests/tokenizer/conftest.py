"""The tokenizer tests' shared fixture: a small tokenizer trained on mixed text."""

from __future__ import annotations

import random

import pytest

from pipeline.tokenizer import Tokenizer
from tokenizer_cases import MIXED, train_tokenizer


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    rng = random.Random(0)
    words = "the cat sat on a mat and then it ran off to see the dog 2024 1999".split()
    texts = [" ".join(rng.choice(words) for _ in range(50)) for _ in range(40)] + MIXED * 3
    return train_tokenizer(texts, vocab=500, min_frequency=2)
