"""An offline, seeded synthetic corpus: English-like prose plus ~15% junk of known kinds.

Each document has a `label`: `good`, or `junk:<kind>` with kind one of html, spam, repeated,
symbols, short, lorem, pii, exact_dup, near_dup. Later stages are tested on what they remove and
keep. The same (num_docs, seed) always gives the same corpus.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from pipeline.sources.records import Record

JUNK_KINDS = (
    "html",
    "spam",
    "repeated",
    "symbols",
    "short",
    "lorem",
    "pii",
    "exact_dup",
    "near_dup",
)

_NOUNS = """river garden teacher village market window mountain letter student forest kitchen
engine harbor painter library farmer journey question answer morning evening winter summer
bridge island doctor machine station lantern castle valley friend neighbor country language
history science picture story ocean desert meadow festival museum workshop orchard captain
traveler musician carpenter baker soldier merchant scholar gardener sailor council theater
railway lighthouse notebook blanket basket mirror ladder candle compass harvest pathway""".split()
_ADJS = """quiet bright ancient gentle narrow crowded distant golden heavy careful curious
patient silent busy humble steady clever modest sudden simple honest wooden rusty dusty
broken hidden northern southern eastern western little large small young old early late
warm cold calm wild rough smooth""".split()
_VERBS = """watched carried opened followed painted visited crossed repaired studied described
discovered collected remembered answered explained gathered noticed finished prepared
borrowed measured planted admired ignored welcomed""".split()
_ADVS = """slowly quietly carefully suddenly happily eagerly rarely often nearly gently
patiently finally quickly proudly softly""".split()
_PREPS = "near behind beyond across under above beside toward inside along".split()
_SUBJ = "she he they we the captain the old farmer the children our teacher my neighbor".split(" ")
_CONN = [
    "Later that day,",
    "In the morning,",
    "After a while,",
    "For many years,",
    "Even so,",
    "Because of this,",
    "At the same time,",
    "Without a word,",
    "Once again,",
    "By evening,",
]


def _pick(rng: np.random.Generator, words: list[str]) -> str:
    return words[int(rng.integers(len(words)))]


def _sentence(rng: np.random.Generator) -> str:
    form = int(rng.integers(4))
    n1, n2 = _pick(rng, _NOUNS), _pick(rng, _NOUNS)
    a1, a2 = _pick(rng, _ADJS), _pick(rng, _ADJS)
    v, adv, p = _pick(rng, _VERBS), _pick(rng, _ADVS), _pick(rng, _PREPS)
    if form == 0:
        s = f"The {a1} {n1} {v} the {n2} {p} the {a2} {_pick(rng, _NOUNS)}"
    elif form == 1:
        s = f"{_pick(rng, _CONN)} the {n1} {adv} {v} a {a1} {n2}"
    elif form == 2:
        n3 = _pick(rng, _NOUNS)
        s = f"It was {a1} and {a2} when the {n1} {v} what the {n2} had left {p} the {n3}"
    else:
        s = (
            f"Nobody knew why the {n1} {v} that {a1} {n2}, but {_pick(rng, _SUBJ)} {adv} "
            f"{_pick(rng, _VERBS)} it {p} the {_pick(rng, _NOUNS)}"
        )
    s = s[0].upper() + s[1:]
    return s + ("?" if rng.random() < 0.05 else ".")


def good_doc(rng: np.random.Generator) -> str:
    paras = []
    for _ in range(int(rng.integers(2, 6))):
        paras.append(" ".join(_sentence(rng) for _ in range(int(rng.integers(3, 7)))))
    return "\n\n".join(paras)


def _junk(kind: str, rng: np.random.Generator, earlier_good: list[str]) -> str:
    if kind == "html":
        body = " ".join(_sentence(rng) for _ in range(2))
        return (
            "<html><head><script>var javascript = 1;</script></head><body>\n"
            "<nav>Home | About | Contact | Login</nav>\n"
            '<div class="cookie">This site uses cookies. Read our cookie policy.</div>\n'
            f"<p>{body}</p>\n<footer>&copy; 2024 &amp; privacy policy | terms of use</footer>\n"
            "</body></html>"
        )
    if kind == "spam":
        words = ["buy", "cheap", "best", "price", "free", "casino", "deal", "click", "now", "win"]
        return " ".join(_pick(rng, words) for _ in range(int(rng.integers(80, 200))))
    if kind == "repeated":
        line = _sentence(rng)
        return "\n".join([line] * int(rng.integers(15, 40)))
    if kind == "symbols":
        chars = list("#$%&*@!^~<>{}[]|\\/=+_-") + ["..."]
        return " ".join(
            "".join(_pick(rng, chars) for _ in range(int(rng.integers(2, 8))))
            for _ in range(int(rng.integers(60, 150)))
        )
    if kind == "short":
        return _sentence(rng)
    if kind == "lorem":
        return (
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. "
            + good_doc(rng)
        )
    if kind == "pii":
        n = int(rng.integers(1000, 9999))
        return (
            f"Contact the {_pick(rng, _NOUNS)} office at jane.doe{n}@example.com or call "
            f"+1 (555) 201-{n:04d}. Server 192.168.{n % 256}.{(n * 7) % 256} logs show key "
            f"sk_live_{n:04d}a8f3c9d2e1b7a6f5c4d3e2f1a0b9. " + good_doc(rng)
        )
    if kind == "exact_dup":
        return earlier_good[int(rng.integers(len(earlier_good)))]
    if kind == "near_dup":
        words = earlier_good[int(rng.integers(len(earlier_good)))].split(" ")
        for _ in range(max(1, len(words) // 40)):  # ~2.5% of words replaced: Jaccard well above 0.8
            words[int(rng.integers(len(words)))] = _pick(rng, _NOUNS)
        return " ".join(words)
    raise ValueError(kind)


def generate(num_docs: int, seed: int, junk_fraction: float = 0.15) -> Iterator[Record]:
    """`num_docs` documents; each is junk with probability `junk_fraction`, kinds uniform."""
    rng = np.random.default_rng(seed)
    good: list[str] = []
    for i in range(num_docs):
        if good and rng.random() < junk_fraction:
            kind = JUNK_KINDS[int(rng.integers(len(JUNK_KINDS)))]
            yield Record(f"toy-{i:06d}", _junk(kind, rng, good), "toy", f"junk:{kind}")
        else:
            text = good_doc(rng)
            good.append(text)
            yield Record(f"toy-{i:06d}", text, "toy", "good")


ABOUT = "offline synthetic prose with ~15% labelled junk (download.max_docs, default 2,000)"
DEFAULT_DOCS = 2000


def read_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record]:
    """The registered `toy` source: download.max_docs documents (default 2,000)."""
    return generate(cfg.max_docs or DEFAULT_DOCS, seed, cfg.toy_junk_fraction)
