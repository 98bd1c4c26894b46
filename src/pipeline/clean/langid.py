"""Language identification for clean: a `lang` code and a `lang_score` per document.

The model is py3langid's naive Bayes over byte n-grams (142 classes, 134 languages once folded
into macrolanguages; shipped inside its wheel: nothing downloads). Chosen over
lingua-language-detector by measurement (benchmarks/bench_langid.py, docs/clean.md): 2.8x
faster, ~100 MB per process instead of ~1 GB, as accurate on Russian, Chinese and web pages,
1.3 points below on English. The optional `langid` extra; absent, a recipe naming
`clean.languages` stops at validation with one line (no silent fallback to script detection).

Scores are computed here, in float64 with a fixed summation order, from the package's model
arrays (py3langid's own softmax goes through a float32 matmul whose rounding may depend on the
BLAS build and its threads): the same text gets the same bits in every worker. Only the first
LANG_MAX_CHARS characters are read (the DFA walk is a Python loop per byte).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import unicodedata
from collections import Counter
from typing import Any

import numpy as np

from pipeline.clean.charclass import CYRILLIC, LATIN
from pipeline.clean.textstats import GOPHER_STOP_WORDS

PACKAGE = "py3langid"
INSTALL_HINT = "pip install 'pipeline[langid]' (py3langid)"
LANG_MAX_CHARS = 2_000  # characters read per document: accuracy flat beyond ~1k (benchmark)
UNDETERMINED = "und"  # no letters to judge: lang_score 0
# A language with no ISO 639-1 code of its own counts as its ISO 639-1 macrolanguage, when
# py3langid knows that one too: Wu and Cantonese are Chinese (`zh`), Egyptian and Moroccan
# Arabic are `ar`. Folded, 300 of 300 Chinese documents of the corpora are `zh` (296 before:
# Hong Kong Wikipedia and food reviews went to wuu/yue) and all score >= 0.65 (263 before).
MACROLANGUAGE = {"wuu": "zh", "yue": "zh", "arz": "ar", "ary": "ar", "uzs": "uz", "sdh": "ku"}
# per language, the stop words of the Gopher rule: it judges a document only in its language
STOP_WORDS = {"en": GOPHER_STOP_WORDS[LATIN], "ru": GOPHER_STOP_WORDS[CYRILLIC]}
_STRIP = ".,;:!?\"'()[]{}\u00ab\u00bb\u201c\u201d\u2018\u2019-"


def available() -> bool:
    return importlib.util.find_spec(PACKAGE) is not None


class LanguageModel:
    """py3langid's model arrays, scored deterministically (see the module doc)."""

    def __init__(self) -> None:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier, visit_counts

        ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        self._walk = functools.partial(
            visit_counts, ident.tk_nextmove, [r << 8 for r in ident.tk_row], ident.tk_output
        )
        self._ptc = np.asarray(ident.nb_ptc)  # float16 [features, classes]
        self._pc = np.asarray(ident.nb_pc, np.float64)  # [classes]
        classes = [MACROLANGUAGE.get(c, c) for c in ident.nb_classes]
        # a label appearing twice (script variants, srl -> sr; a folded language) sums its columns
        self.labels = tuple(dict.fromkeys(classes))
        index = {lab: i for i, lab in enumerate(self.labels)}
        self._column_label = np.array([index[c] for c in classes], np.int64)

    def score(self, text: str, max_chars: int = LANG_MAX_CHARS) -> tuple[str, float]:
        """(language code, posterior probability) of the text's first `max_chars` characters;
        UNDETERMINED, 0.0 without letters (digits, symbols, empty)."""
        text = text[:max_chars]
        if not any(ch.isalpha() for ch in text):
            return UNDETERMINED, 0.0
        if text.isupper():
            text = text.lower()  # py3langid's input contract
        data = unicodedata.normalize("NFC", text).encode("utf8", errors="surrogatepass")
        visits = self._walk(data)
        if not visits:
            return UNDETERMINED, 0.0
        idx = np.fromiter(visits.keys(), np.intp, len(visits))
        weights = np.log1p(np.fromiter(visits.values(), np.float64, len(visits)))
        # row by row in feature order: a fixed order of float64 additions
        raw = (self._ptc[idx].astype(np.float64) * weights[:, None]).sum(axis=0) + self._pc
        raw /= math.sqrt(len(data))  # py3langid's temperature: calibrated across lengths
        probs = np.exp(raw - raw.max())
        per_label = np.bincount(self._column_label, weights=probs, minlength=len(self.labels))
        best = int(per_label.argmax())
        return self.labels[best], float(per_label[best] / probs.sum())


@functools.cache
def model() -> LanguageModel:
    """The process's model (~1 s to load, ~130 MB), loaded on first use."""
    return LanguageModel()


def identify(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """(language code per text, lang_score float64 [n] in [0, 1])."""
    m = model()
    langs, scores = [], np.zeros(len(texts))
    for i, text in enumerate(texts):
        lang, scores[i] = m.score(text)
        langs.append(lang)
    return langs, scores


def stop_word_count(text: str, lang: str) -> float:
    """Distinct Gopher stop words of `lang` in the text; NaN for a language without a list
    (the rule does not judge it)."""
    stop = STOP_WORDS.get(lang)
    if stop is None:
        return math.nan
    words = {w.strip(_STRIP) for w in set(text.lower().split())}
    return float(sum(w in words for w in stop))


def allowed_score(langs: list[str], scores: np.ndarray, languages: list[str]) -> np.ndarray:
    """The `language` rule's statistic, float64 [n]: lang_score where the language is one of
    `languages`, -1 where it is not (below any min_lang_score, 0 included)."""
    ok = np.isin(np.array(langs, dtype=object), np.array(languages, dtype=object))
    return np.where(ok, scores, -1.0)


def apply_to_stats(
    stats: np.ndarray,
    index: dict[str, int],
    texts: list[str],
    langs: list[str],
    scores: np.ndarray,
    languages: list[str] | None,
) -> None:
    """Make a batch's statistics (float64 [n, stats], in place) language-aware: the stop-word
    count by each document's own language (NaN, never failing, for a language without a list,
    where the script decided before), and the `language` rule's statistic when filtering."""
    stop, words = index["stop_words"], index["num_words"]
    for i, (text, lang) in enumerate(zip(texts, langs, strict=True)):
        if not np.isnan(stats[i, words]):  # word statistics were computed for this text
            stats[i, stop] = stop_word_count(text, lang)
    if languages is not None:
        stats[:, index["lang_score"]] = allowed_score(langs, scores, languages)


def language_counts(langs: list[str], keep: np.ndarray) -> tuple[Counter, Counter]:
    """(documents per language, kept documents per language)."""
    return Counter(langs), Counter(lang for lang, k in zip(langs, keep, strict=True) if k)


def check_languages(languages: list[str]) -> tuple[int, str, Any] | None:
    """(index, code, closest known code) of the first code the model does not know, or None."""
    import difflib

    known = model().labels
    for i, code in enumerate(languages):
        if code in MACROLANGUAGE:
            return i, code, MACROLANGUAGE[code]  # counted as its macrolanguage
        if code not in known:
            close = difflib.get_close_matches(code, known, n=1)
            return i, code, close[0] if close else None
    return None
