"""Per-document filter statistics, all from one pass over the text's code points.

Every character gets a class (whitespace, digit, punctuation, symbol, mark, or a letter of a
script) from one lookup table; words, their lengths and 64-bit content hashes then come from
numpy array ops, and lines/paragraphs from a few C-level splits. `filter_stats` returns one
float per name in FILTER_STAT_NAMES; NaN means "does not apply" (e.g. stop words in Chinese) and
never fails a rule. Words are whitespace tokens, except that each Han/kana/Thai-like character
is one word. (Not the quality score's statistics: those are pipeline.quality.features.)
"""

from __future__ import annotations

import re

import numpy as np

from pipeline.clean.charclass import (
    CJ,
    CYRILLIC,
    DIGIT,
    LATIN,
    MARK,
    NUM_CLASSES,
    OTHER,
    PUNCT,
    SCRIPTS,
    SEA,
    SPACE,
    SYMBOL,
    UNSPACED,
    char_classes,
    class_counts,
)
from pipeline.clean.lines import line_stats_batch
from pipeline.clean.ngrams import ngram_stats
from pipeline.clean.normalize import BOILERPLATE_RE, may_have_boilerplate
from pipeline.clean.pii import _URL_RE
from pipeline.clean.segment import Segments, chunks, doc_sums, segment
from pipeline.clean.words import stop_word_counts

GOPHER_STOP_WORDS = {  # Gopher's 8 English words; the 8 most frequent Russian words for Cyrillic
    LATIN: ("the", "be", "to", "of", "and", "that", "have", "with"),
    CYRILLIC: ("и", "в", "не", "на", "что", "с", "он", "как"),
}
_STRIP = ".,;:!?\"'()[]{}\u00ab\u00bb\u201c\u201d\u2018\u2019-"
_PARA_SPLIT_RE = re.compile(r"\n(?:[^\S\n]*\n)+")
_UNSPACED_CHAR_RE = re.compile(
    r"[\u2e80-\u2fdf\u3005-\u3007\u3040-\u30ff\u3100-\u312f\u31f0-"
    r"\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\u0e00-"
    r"\u0eff\u1000-\u109f\u1780-\u17ff\U00020000-\U0003ffff]"
)
_TERM = r"[.!?\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]\u300d\u300f]*"
_SENT_END_RE = re.compile(_TERM + r"(?=\s|$)")
# unspaced text: no space follows a mark, and a comma or semicolon after >= 4 characters ends
# what a spaced language would write as a sentence (Chinese runs clauses on with ，)
_SENT_END_UNSPACED_RE = re.compile(
    _TERM + r"(?![0-9])|(?<=[^\s,;\uff0c\uff1b]{4})[,;\uff0c\uff1b](?![0-9])"
)
_WIKI_CONV_RE = re.compile(r"-\{[^{}\n]*\}-")  # MediaWiki language conversion -{zh-hans:…}-
_BULLETS = ("\u2022", "-")
WRAP_MIN_LINES = 3
WRAP_MIN_WIDTH = 40  # narrower: menus and lists, never judged as wrapped prose
WRAP_MAX_WIDTH = 100  # wider lines are soft-wrapped paragraphs, not a fixed-width layout
WRAP_FULL = 0.6  # a line this share of the wrap width or longer was broken by the wrap
C4_END = (".", "?", "!", '"', "\u201d", "\u3002", "\uff01", "\uff1f")  # TFDS c4_utils + CJK marks
FINEWEB_END = (".", "?", "!", '"', "'", "\u201d", "\u2019", "\u3002", "\uff01", "\uff1f", "\u2026")
UNSPACED_CHAR_WEIGHT = 3  # extra characters an unspaced letter counts for in digit_chars_v2
UNSPACED_NGRAM_SCALE = 2  # n-gram rules read 2n characters in unspaced scripts (~1.5-2 per word)
TOP_NGRAMS = (2, 3, 4)
DUP_NGRAMS = (5, 6, 7, 8, 9, 10)

FILTER_STAT_NAMES = (
    "num_chars",
    "num_words",
    "mean_word_length",
    "hash_ratio",
    "ellipsis_ratio",
    "bullet_lines_frac",
    "ellipsis_lines_frac",
    "alpha_words_frac",
    "stop_words",
    "non_alnum_chars_frac",
    "digit_chars_frac",
    "url_chars_frac",
    "max_word_length",
    "script_share",
    "dup_lines_frac",
    "dup_paragraphs_frac",
    "dup_line_chars_frac",
    "dup_paragraph_chars_frac",
    *(f"top_{n}gram_chars_frac" for n in TOP_NGRAMS),
    *(f"dup_{n}gram_chars_frac" for n in DUP_NGRAMS),
    "c4_sentences",
    "c4_lorem_ipsum",
    "c4_curly_bracket",
    "line_punct_frac",
    "short_lines_frac",
    "fineweb_dup_line_chars_frac",
    "newlines_per_word",
    "dominant_script",  # index into SCRIPTS; not a filter statistic (for docs_per_script)
    "lang_score",  # filled by clean.langid when languages are filtered; NaN here
)
STAT_INDEX = {name: i for i, name in enumerate(FILTER_STAT_NAMES)}
_NGRAM_COLS = [STAT_INDEX[f"top_{n}gram_chars_frac"] for n in TOP_NGRAMS] + [
    STAT_INDEX[f"dup_{n}gram_chars_frac"] for n in DUP_NGRAMS
]
NUM_STATS = len(FILTER_STAT_NAMES)


def find_duplicates(items: list[str]) -> tuple[int, int]:
    """Gopher/datatrove: (#items seen before, #chars of those items), first copy not counted."""
    seen: set[str] = set()
    dup = dup_chars = 0
    for item in items:
        if item in seen:
            dup += 1
            dup_chars += len(item)
        else:
            seen.add(item)
    return dup, dup_chars


def _script_words(cls: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, int]:
    """(words per script float64 [len(SCRIPTS)], words holding a letter).

    Each word weighs 1, split over scripts by its letters: a Han character and a 9-letter Latin
    word weigh the same, so a Korean or Chinese page quoting "Prometheus" stays Hangul or CJK,
    while Cyrillic words with Latin look-alikes ("Утрoм") still lose part of their weight.
    """
    letters = np.flatnonzero(cls >= LATIN)
    tok = np.searchsorted(starts, letters, side="right") - 1  # word of each letter
    keys, counts = np.unique(tok * NUM_CLASSES + cls[letters], return_counts=True)
    ktok = keys // NUM_CLASSES
    first = np.concatenate(([True], ktok[1:] != ktok[:-1]))
    word_of = np.cumsum(first) - 1
    frac = counts / np.bincount(word_of, weights=counts)[word_of]
    per_script = np.bincount(keys % NUM_CLASSES, weights=frac, minlength=NUM_CLASSES)[LATIN:]
    return per_script, int(first.sum())


def _script_words_batch(seg: Segments, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_script_words of each of the documents `docs` (ascending, with letters), all at once:
    (float64 [k, len(SCRIPTS)], int64 [k]). The same sums in the same order (np.bincount adds
    its weights in order, and each document's (word, class) keys keep their order), so the
    same floats. The documents' characters and words are laid end to end and renumbered from
    0: a letter's word is a prefix count of word starts, and np.unique(key, return_counts=True)
    is a bincount (no sort, no search)."""
    k = len(docs)
    starts, lens = seg.doc_starts[docs], seg.doc_ends[docs] - seg.doc_starts[docs]
    w0, nw = seg.word_offsets[docs], seg.word_offsets[docs + 1] - seg.word_offsets[docs]
    base, wbase = np.zeros(k, np.int64), np.zeros(k, np.int64)
    np.cumsum(lens[:-1], out=base[1:])
    np.cumsum(nw[:-1], out=wbase[1:])
    shift = starts - base  # batch position = laid-out position + shift
    cls = seg.cls[np.arange(int(lens.sum())) + np.repeat(shift, lens)]
    words = np.repeat(w0 - wbase, nw) + np.arange(int(nw.sum()))  # the words, in the batch
    mark = np.zeros(len(cls), np.int32)
    mark[seg.word_starts[words] - np.repeat(shift, nw)] = 1
    word = np.cumsum(mark, dtype=np.int32)  # 1 + the word of each character
    is_letter = cls >= LATIN
    full = np.bincount((word[is_letter] - 1).astype(np.int64) * NUM_CLASSES + cls[is_letter])
    keys = np.flatnonzero(full)
    counts = full[keys]
    kword = keys // NUM_CLASSES
    first = np.concatenate(([True], kword[1:] != kword[:-1]))
    word_of = np.cumsum(first) - 1
    frac = counts / np.bincount(word_of, weights=counts)[word_of]
    krow = np.searchsorted(wbase, kword, side="right") - 1  # index into docs
    bins = krow * NUM_CLASSES + keys % NUM_CLASSES
    per = np.bincount(bins, weights=frac, minlength=k * NUM_CLASSES)
    return per.reshape(k, NUM_CLASSES)[:, LATIN:], np.bincount(krow[first], minlength=k)


def logical_lines(text: str) -> tuple[list[str], int]:
    """(non-empty lines with hard-wrapped paragraphs joined, number of joins).

    A hard-wrapped text (Reuters, mail, Project Gutenberg, verse) breaks its lines at a fixed
    width, not at sentence ends, so every line rule would judge fragments. The text counts as
    hard-wrapped when it has >= WRAP_MIN_LINES lines, its wrap width W (the 90th percentile of
    line lengths) is in [WRAP_MIN_WIDTH, WRAP_MAX_WIDTH], and at least half (and >= 2) of the
    lines that go on in their paragraph without a terminal mark reach WRAP_FULL * W: a line
    broken mid-sentence was broken by the wrap, not by the writer. Then such a full line
    is joined to the next one unless a blank line or a bullet comes between: a line that stops
    short ended its paragraph (a table row, a heading, a sign-off stays a line of its own).
    In any text, a short label line (`ROMEO:`, `Q:`) is joined to the line it introduces.
    """
    raw = [ln.strip() for ln in text.split("\n")]
    lines = [ln for ln in raw if ln]
    # a line "continues" when its paragraph goes on (the next raw line is not blank)
    cont = [bool(raw[i]) and i + 1 < len(raw) and bool(raw[i + 1]) for i in range(len(raw))]
    label = [c and _is_label(ln) for c, ln in zip(cont, raw, strict=True)]
    wrapped_doc = False
    if len(lines) >= WRAP_MIN_LINES:
        lens = sorted(map(len, lines))
        width = lens[(len(lens) - 1) * 9 // 10]
        full = WRAP_FULL * width
        if WRAP_MIN_WIDTH <= width <= WRAP_MAX_WIDTH:
            open_lines = wrapped = 0  # lines going on in their paragraph with no end mark
            for i, ln in enumerate(raw):
                if cont[i] and not ln.endswith(FINEWEB_END):
                    open_lines += 1
                    wrapped += len(ln) >= full
            wrapped_doc = wrapped >= 2 and 2 * wrapped >= open_lines
    if not wrapped_doc and not any(label):
        return lines, 0
    out: list[str] = []
    joins = 0
    joining = False
    for i, ln in enumerate(raw):
        if not ln:
            joining = False
            continue
        if joining and not ln.startswith(_BULLETS):
            out[-1] = f"{out[-1]} {ln}"
            joins += 1
        else:
            out.append(ln)
        joining = label[i] or (
            wrapped_doc and cont[i] and len(ln) >= full and not ln.endswith(FINEWEB_END)
        )
    return out, joins


def _is_label(line: str) -> bool:
    """A speaker or field label heading its paragraph: `ROMEO:`, `First Citizen:`, `Q:`."""
    return line.endswith(":") and len(line) <= 40 and line.count(" ") < 4


def _sentence_ends(line: str, unspaced: bool) -> int:  # unspaced: the dominant script
    """Sentence ends in a line (v2): runs of . ! ? (and CJK 。！？) followed by a space, a closing
    quote or bracket or the line's end; in unspaced text also before the next character, and
    a clause comma or semicolon (not one between digits, not right after another mark)."""
    if unspaced:
        return len(_SENT_END_UNSPACED_RE.findall(line))
    return len(_SENT_END_RE.findall(line))


def _c4_stats(
    text: str,
    lines: list[str],
    unspaced: bool,
    min_words_per_line: int,
    max_word_length: int,
    clauses: bool = False,
) -> tuple[int, int, int]:
    """C4 (TFDS c4_utils) over the lines it would keep: (sentences, has lorem ipsum, has '{').

    `lines` are logical lines (hard wraps joined). A line is kept when no word exceeds
    max_word_length, it ends in a terminal mark (not "...") - or it is the text's only
    paragraph (a one-paragraph review or passage needs no final mark) -, has >=
    min_words_per_line words and mentions no javascript/policy phrase. Sentences are counted
    from terminal marks (C4 uses a sentence tokenizer); a MediaWiki `-{zh-hans:…}-` language
    conversion is not a curly bracket of code.
    """
    low = text.lower()
    check_lorem = "lorem ipsum" in low
    check_curly = "{" in text
    check_policy = may_have_boilerplate(low)
    check_long = len(text) > max_word_length
    single = len(lines) == 1
    sentences = lorem = curly = 0
    for line in lines:
        ended = line.endswith(C4_END) and not line.endswith("...")
        if not ended and not single:
            continue
        words = line.split()
        num = len(words)
        if unspaced:  # count each Han/kana/Thai char as a word
            num += len(_UNSPACED_CHAR_RE.findall(line)) - sum(
                1 for w in words if _UNSPACED_CHAR_RE.search(w)
            )
        if num < min_words_per_line or (check_long and max(map(len, words)) > max_word_length):
            continue
        if check_lorem or check_policy:
            line_low = line.lower()
            if check_lorem and "lorem ipsum" in line_low:
                lorem = 1
            if check_policy and BOILERPLATE_RE.search(line_low):
                continue
        if check_curly and "{" in line and _WIKI_CONV_RE.sub("", line).count("{"):
            curly = 1
        sentences += _sentence_ends(line, clauses) + (not ended)
    return sentences, lorem, curly


def _line_stats(
    text: str, out: np.ndarray, dominant: int, c4_args: tuple[int, int], n_tok: int
) -> None:
    n = len(text)
    # every line rule reads logical lines (hard wraps joined, a label joined to its speech), so
    # a wrapped paragraph is judged as the one line it is (v2)
    logical, joins = logical_lines(text)
    if not logical:
        return
    nlog = len(logical)
    bullets = sum(ln.startswith(_BULLETS) for ln in logical)
    out[STAT_INDEX["bullet_lines_frac"]] = bullets / nlog
    # v2: the text's last line may trail off ("..."): only earlier lines count as truncated
    ellipsis = sum(ln.endswith(("...", "\u2026")) for ln in logical[:-1])
    out[STAT_INDEX["ellipsis_lines_frac"]] = ellipsis / nlog
    dup, dup_chars = find_duplicates(logical)  # v2: a wrapped paragraph or a labelled speech
    out[STAT_INDEX["dup_lines_frac"]] = dup / nlog
    out[STAT_INDEX["dup_line_chars_frac"]] = dup_chars / n
    body = n - text.count("\n")
    out[STAT_INDEX["fineweb_dup_line_chars_frac"]] = dup_chars / body if body else 0.0
    paras = [p for p in _PARA_SPLIT_RE.split(text.strip()) if p]
    pdup, pdup_chars = find_duplicates(paras)
    out[STAT_INDEX["dup_paragraphs_frac"]] = pdup / max(1, len(paras))
    out[STAT_INDEX["dup_paragraph_chars_frac"]] = pdup_chars / n
    if nlog == 1:  # one paragraph: its end is a sentence end, mark or not (v2)
        out[STAT_INDEX["line_punct_frac"]] = 1.0
    else:
        out[STAT_INDEX["line_punct_frac"]] = sum(ln.endswith(FINEWEB_END) for ln in logical) / nlog
    if dominant not in UNSPACED:  # 30 chars of Chinese is a long line, not a short one
        out[STAT_INDEX["short_lines_frac"]] = sum(len(ln) <= 30 for ln in logical) / nlog
    if n_tok:
        out[STAT_INDEX["newlines_per_word"]] = (text.count("\n") - joins) / n_tok
    unspaced = bool(_UNSPACED_CHAR_RE.search(text)) if not text.isascii() else False
    s, lorem, curly = _c4_stats(text, logical, unspaced, *c4_args, dominant in UNSPACED)
    out[STAT_INDEX["c4_sentences"]] = s
    out[STAT_INDEX["c4_lorem_ipsum"]] = lorem
    out[STAT_INDEX["c4_curly_bracket"]] = curly


def filter_stats(
    text: str, max_chars: int | None = None, c4_args: tuple[int, int] = (5, 1000)
) -> np.ndarray:
    """All statistics of one normalised document: float64 [NUM_STATS], NaN = not applicable.

    An empty text only has num_chars (0). A text longer than max_chars only gets num_chars and
    the cheap character ratios, so a 50 MB document costs one pass, not an n-gram count.
    c4_args = (min words per line, max word length) for the C4 sentence count.
    """
    return filter_stats_batch([text], max_chars, c4_args)[0]


def filter_stats_batch(
    texts: list[str], max_chars: int | None = None, c4_args: tuple[int, int] = (5, 1000)
) -> np.ndarray:
    """filter_stats of every text: float64 [len(texts), NUM_STATS], the same numbers, computed
    a batch of ~1M characters at a time (pipeline.clean.segment) instead of one text at a time."""
    out = np.full((len(texts), NUM_STATS), np.nan)
    lengths = [len(t) for t in texts]
    out[:, STAT_INDEX["num_chars"]] = lengths
    big = [i for i, n in enumerate(lengths) if max_chars is not None and n > max_chars]
    for i in big:
        _char_ratios(texts[i], out[i])
    todo = [i for i, n in enumerate(lengths) if n and not (max_chars is not None and n > max_chars)]
    for lo, hi in chunks([lengths[i] for i in todo]):
        idx = todo[lo:hi]
        out[idx] = _batch_stats([texts[i] for i in idx], c4_args)
    return out


def _char_ratios(text: str, out: np.ndarray) -> None:
    """The cheap character ratios of one text (the only statistics of a text over max_chars)."""
    _, cls = char_classes(text)
    _ratios(len(text), class_counts(cls)[None, :], out[None, :])


def _ratios(n: np.ndarray | int, counts: np.ndarray, out: np.ndarray) -> None:
    num_letters = counts[:, LATIN:].sum(axis=1)
    visible = n - counts[:, SPACE]  # whitespace is layout, not a symbol (v2)
    symbols = visible - num_letters - counts[:, DIGIT] - counts[:, MARK]
    with np.errstate(invalid="ignore", divide="ignore"):
        out[:, STAT_INDEX["non_alnum_chars_frac"]] = np.where(visible > 0, symbols / visible, 1.0)
    # an unspaced letter (Han, kana, Thai) carries about what a spaced word and its space do:
    # weighted so, "1998年5月" is as digit-heavy as "in May 1998" (v2)
    weighted = n + UNSPACED_CHAR_WEIGHT * (counts[:, CJ] + counts[:, SEA])
    out[:, STAT_INDEX["digit_chars_frac"]] = counts[:, DIGIT] / weighted


def _batch_stats(texts: list[str], c4_args: tuple[int, int]) -> np.ndarray:
    """Statistics of non-empty texts, none over max_chars: float64 [len(texts), NUM_STATS]."""
    d = len(texts)
    out = np.full((d, NUM_STATS), np.nan)
    seg = segment(texts)
    n = seg.doc_ends - seg.doc_starts
    out[:, STAT_INDEX["num_chars"]] = n
    counts = seg.class_counts()
    _ratios(n, counts, out)
    for i, text in enumerate(texts):
        url_chars = 0
        if "://" in text or "www." in text:
            url_chars = sum(len(m) for m in _URL_RE.findall(text))
        out[i, STAT_INDEX["url_chars_frac"]] = url_chars / len(text)
    dominant = _dominant_scripts(seg, counts, out)
    scale = np.where(np.isin(dominant, UNSPACED), UNSPACED_NGRAM_SCALE, 1)
    n_tok = np.diff(seg.word_offsets)
    _batch_word_stats(seg, texts, scale, out)
    out[np.isin(dominant, UNSPACED), STAT_INDEX["mean_word_length"]] = np.nan
    for script, stop in GOPHER_STOP_WORDS.items():  # distinct stop words, as Gopher's "2 of"
        docs = np.flatnonzero(dominant == script)
        if len(docs):
            out[docs, STAT_INDEX["stop_words"]] = stop_word_counts(seg, docs, stop, _STRIP)
    done = line_stats_batch(seg, texts, out, STAT_INDEX, dominant, c4_args)
    for i in np.flatnonzero(~done).tolist():  # texts C4 must search line by line
        _line_stats(texts[i], out[i], int(dominant[i]), c4_args, int(n_tok[i]))
    return out


def _dominant_scripts(seg: Segments, counts: np.ndarray, out: np.ndarray) -> np.ndarray:
    """int64 [d]: each text's dominant script class (OTHER without letters); fills
    script_share and dominant_script. A text whose letters are all of one script is that
    script's with share 1.0; only mixed texts weigh their words (_script_words)."""
    letters = counts[:, LATIN:]
    present = (letters > 0).sum(axis=1)
    dominant = np.where(present > 0, LATIN + letters.argmax(axis=1), OTHER)
    out[:, STAT_INDEX["script_share"]] = np.where(present > 0, 1.0, np.nan)
    mixed = np.flatnonzero(present > 1)
    if len(mixed):
        per_script, words = _script_words_batch(seg, mixed)
        dominant[mixed] = LATIN + per_script.argmax(axis=1)
        out[mixed, STAT_INDEX["script_share"]] = per_script.max(axis=1) / words
    out[:, STAT_INDEX["dominant_script"]] = np.where(
        present > 0, dominant - LATIN, len(SCRIPTS) - 1
    )
    return dominant


def _cum(mask: np.ndarray, dtype: type) -> np.ndarray:
    """[n + 1]: prefix sums of a bool array, 0 first."""
    out = np.zeros(len(mask) + 1, dtype)
    np.cumsum(mask, dtype=dtype, out=out[1:])
    return out


def _batch_word_stats(seg: Segments, texts: list[str], scale: np.ndarray, out: np.ndarray) -> None:
    """The word statistics of every text (as _word_stats), from the batch's word arrays."""
    starts, ends, cls = seg.word_starts, seg.word_ends, seg.cls
    n_tok = np.diff(seg.word_offsets)
    lengths = ends - starts
    # int32 prefix sums (a batch holds < 2^31 characters): ~3x faster than int64 ones
    ctype = np.int32 if len(cls) < 1 << 31 else np.int64
    letter_cum = _cum(cls >= LATIN, ctype)
    punct_cum = _cum((cls == PUNCT) | (cls == SYMBOL), ctype)
    pure_cum = _cum(cls == PUNCT, ctype)
    tok_letters = letter_cum[ends] - letter_cum[starts]
    tok_punct = punct_cum[ends] - punct_cum[starts]
    non_symbol = tok_punct < lengths

    def per_doc(values: np.ndarray) -> np.ndarray:
        return doc_sums(values, seg.word_offsets)

    num_words = per_doc(non_symbol)
    out[:, STAT_INDEX["num_words"]] = num_words
    has = num_words > 0
    chars = per_doc(np.where(non_symbol, lengths - tok_punct, 0))
    out[has, STAT_INDEX["mean_word_length"]] = chars[has] / num_words[has]
    tok = n_tok > 0
    marks = np.array([(t.count("#"), t.count("...") + t.count("\u2026")) for t in texts])
    out[tok, STAT_INDEX["hash_ratio"]] = marks[tok, 0] / n_tok[tok]
    out[tok, STAT_INDEX["ellipsis_ratio"]] = marks[tok, 1] / n_tok[tok]
    # v2: a token of punctuation marks only (` , `, ` @-@ ` in tokenised text) is a detached
    # mark of the word before it, not a word without a letter; symbols (= | $) still count
    detached = (pure_cum[ends] - pure_cum[starts]) == lengths
    words = n_tok - per_doc(detached)
    alpha = per_doc(tok_letters > 0)
    ok = tok & (words > 0)
    out[ok, STAT_INDEX["alpha_words_frac"]] = alpha[ok] / words[ok]
    if tok.any():
        out[tok, STAT_INDEX["max_word_length"]] = np.maximum.reduceat(
            lengths, seg.word_offsets[:-1][tok]
        )
    top, dup = ngram_stats(
        seg.word_hashes, seg.word_offsets, lengths, scale, TOP_NGRAMS, DUP_NGRAMS
    )
    n = (seg.doc_ends - seg.doc_starts)[:, None]
    out[:, _NGRAM_COLS] = np.concatenate((top / n, dup / n), axis=1)
