"""Synthetic text with its own grammar for the quality tests: real-looking prose (templated
sentences over a small vocabulary, so n-grams repeat across documents), word salad made from it,
and Chinese sentences over a two-character vocabulary. Never real corpora."""

from __future__ import annotations

import numpy as np

ADJ = "old young quiet bright small large green cold warm dark heavy gentle".split()
NOUN = "farmer river bridge teacher garden window market letter village forest doctor road".split()
VERB = "watched crossed painted visited opened closed found carried followed built".split()
PLACE = "hill station harbour church school kitchen valley".split()
TEMPLATES = (
    "The {a} {n} {v} the {n2} near the {p}.",
    "A {n} was {a} because the {n2} {v} it.",
    "Every morning the {n} {v} a {a} {n2} by the {p}.",
    "When the {n} {v} the {n2}, it was {a}.",
    "They said the {a} {n} had {v} the {n2} before.",
)
ZH = "我们 喜欢 学校 老师 朋友 今天 天气 很好 城市 公园 早上 晚上 吃饭 工作 学习 电影".split()


def sentence(rng: np.random.Generator) -> str:
    def pick(words: list[str]) -> str:
        return words[int(rng.integers(len(words)))]

    t = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
    return t.format(a=pick(ADJ), n=pick(NOUN), n2=pick(NOUN), v=pick(VERB), p=pick(PLACE))


def docs(n: int, seed: int, sentences: int = 10) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(sentence(rng) for _ in range(sentences)) for _ in range(n)]


def salad(texts: list[str], seed: int) -> list[str]:
    """Word salad at the sources' sentence lengths, from the words of all of them."""
    rng = np.random.default_rng(seed)
    pool = [w.strip(".,") for t in texts for w in t.split()]
    out = []
    for t in texts:
        sents = [s for s in t.split(".") if s.strip()]
        words = [
            [pool[int(i)] for i in rng.integers(len(pool), size=len(s.split()))] for s in sents
        ]
        out.append(" ".join(" ".join(w).capitalize() + "." for w in words))
    return out


def zh_docs(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sents = []
        for _ in range(8):
            a, b, c = (ZH[int(i)] for i in rng.integers(len(ZH), size=3))
            sents.append(f"{a}的{b}在{c}里很好。")
        out.append("".join(sents))
    return out
