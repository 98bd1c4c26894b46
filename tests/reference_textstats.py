"""The straightforward per-document statistics that pipeline.clean.textstats computed before
its batch path (issue 27), kept as the reference tests/clean/test_fastpath.py compares with.

Per-document filter statistics, all from one pass over the text's code points.

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
    word_spans,
)
from pipeline.clean.normalize import BOILERPLATE_RE, may_have_boilerplate
from pipeline.clean.pii import _URL_RE
from pipeline.hashing import GOLDEN64, span_hashes

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


def _top_ngram_chars(
    g: np.ndarray, s: np.ndarray, cum_len: np.ndarray, n: int, sep: int = 1
) -> int:
    """Chars of the most frequent n-gram (words joined by spaces) times its count.

    `s` is g sorted. Ties go to the n-gram seen first, as Counter.most_common does in datatrove.
    """
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    if len(starts) == len(s):
        best, i = 1, 0
    else:
        lengths = np.diff(np.concatenate((starts, [len(s)])))
        best = int(lengths.max())
        vals = s[starts[lengths == best]]
        i = int(np.flatnonzero(np.isin(g, vals))[0])
    return best * int(cum_len[i + n] - cum_len[i] + sep * (n - 1))


def _dup_ngram_chars(g: np.ndarray, cum_len: np.ndarray, n: int) -> int:
    """Gopher's duplicated n-gram chars, exactly as datatrove's left-to-right scan: a position
    whose n-gram was seen at an earlier *visited* position counts its n words' chars and skips
    them (skipped positions are not visited). Only positions of repeated n-grams are looked at.
    """
    order = np.argsort(g, kind="stable")
    s = g[order]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    lengths = np.diff(np.concatenate((starts, [len(s)])))
    multi = lengths > 1
    if not multi.any():
        return 0
    pos = order[np.repeat(multi, lengths)]  # grouped by n-gram, ascending inside a group
    gid = np.repeat(np.arange(int(multi.sum())), lengths[multi])
    first = np.concatenate(([True], gid[1:] != gid[:-1]))
    cand = np.flatnonzero(~first)
    cand = cand[np.argsort(pos[cand], kind="stable")]  # later occurrences, by position
    pos_l, gid_l = pos.tolist(), gid.tolist()
    gstart_l = np.flatnonzero(first).tolist()
    chars = (cum_len[pos + n] - cum_len[pos]).tolist()
    skipped = bytearray(len(g))
    total = skip_until = 0
    for k in cand.tolist():
        c = pos_l[k]
        if c < skip_until:
            continue  # not visited: neither counted nor added to the seen set
        for e in range(gstart_l[gid_l[k]], k):  # earlier occurrences of the same n-gram
            if not skipped[pos_l[e]]:
                total += chars[k]
                skip_until = c + n
                skipped[c + 1 : c + n] = b"\x01" * (n - 1)
                break
    return total


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


def _word_stats(
    text: str,
    cp: np.ndarray,
    cls: np.ndarray,
    spans: tuple[np.ndarray, np.ndarray],
    scale: int,
    out: np.ndarray,
) -> None:
    """Fill the word-based statistics. `scale` multiplies the n of the n-gram rules (2 where the
    dominant script is unspaced: one character is not one word there)."""
    n = len(text)
    starts, ends = spans
    n_tok = len(starts)
    lengths = ends - starts
    is_letter = cls >= LATIN
    is_punct = (cls == PUNCT) | (cls == SYMBOL)
    letter_cum = np.concatenate(([0], np.cumsum(is_letter)))
    punct_cum = np.concatenate(([0], np.cumsum(is_punct)))
    pure_cum = np.concatenate(([0], np.cumsum(cls == PUNCT)))
    tok_letters = letter_cum[ends] - letter_cum[starts]
    tok_punct = punct_cum[ends] - punct_cum[starts]
    non_symbol = tok_punct < lengths
    num_words = int(non_symbol.sum())
    out[STAT_INDEX["num_words"]] = num_words
    if num_words:
        out[STAT_INDEX["mean_word_length"]] = (
            float((lengths - tok_punct)[non_symbol].sum()) / num_words
        )
    if n_tok:
        out[STAT_INDEX["hash_ratio"]] = text.count("#") / n_tok
        out[STAT_INDEX["ellipsis_ratio"]] = (text.count("...") + text.count("\u2026")) / n_tok
        # v2: a token of punctuation marks only (` , `, ` @-@ ` in tokenised text) is a detached
        # mark of the word before it, not a word without a letter; symbols (= | $) still count
        detached = (pure_cum[ends] - pure_cum[starts]) == lengths
        words = n_tok - int(detached.sum())
        if words:
            out[STAT_INDEX["alpha_words_frac"]] = float((tok_letters > 0).sum()) / words
        out[STAT_INDEX["max_word_length"]] = int(lengths.max())
    h = span_hashes(cp, starts, ends)  # content hash per word, wherever it sits
    cum_len = np.concatenate(([0], np.cumsum(lengths)))
    out[_NGRAM_COLS] = 0.0  # stays 0 with too few words or no repeats: nothing repeats
    rule_n = {scale * m: m for m in (*TOP_NGRAMS, *DUP_NGRAMS)}  # k-gram read -> rule's n
    g = h
    for k in range(2, scale * max(DUP_NGRAMS) + 1):
        if n_tok < k:
            break
        g = g[:-1] * GOLDEN64 + h[k - 1 :]  # hash of the k-gram starting at each word
        srt = np.sort(g)
        repeats = bool((srt[1:] == srt[:-1]).any())
        m = rule_n.get(k)
        if m in TOP_NGRAMS:
            sep = 0 if scale > 1 else 1  # spaces between the words, none between characters
            top = _top_ngram_chars(g, srt, cum_len, k, sep)
            out[STAT_INDEX[f"top_{m}gram_chars_frac"]] = top / n
        elif m is not None and repeats:
            out[STAT_INDEX[f"dup_{m}gram_chars_frac"]] = _dup_ngram_chars(g, cum_len, k) / n
        if not repeats and k >= scale * (min(DUP_NGRAMS) - 1):
            break  # no repeated k-gram: no repeated longer one either


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
    out = np.full(NUM_STATS, np.nan)
    n = len(text)
    out[STAT_INDEX["num_chars"]] = n
    if n == 0:
        return out
    cp, cls = char_classes(text)
    counts = class_counts(cls)
    num_letters = int(counts[LATIN:].sum())
    visible = n - int(counts[SPACE])  # whitespace is layout, not a symbol (v2)
    symbols = visible - num_letters - counts[DIGIT] - counts[MARK]
    out[STAT_INDEX["non_alnum_chars_frac"]] = symbols / visible if visible else 1.0
    # an unspaced letter (Han, kana, Thai) carries about what a spaced word and its space do:
    # weighted so, "1998年5月" is as digit-heavy as "in May 1998" (v2)
    unspaced_letters = int(counts[CJ] + counts[SEA])
    weighted = n + UNSPACED_CHAR_WEIGHT * unspaced_letters
    out[STAT_INDEX["digit_chars_frac"]] = counts[DIGIT] / weighted
    if max_chars is not None and n > max_chars:
        return out
    url_chars = 0
    if "://" in text or "www." in text:
        url_chars = sum(len(m) for m in _URL_RE.findall(text))
    out[STAT_INDEX["url_chars_frac"]] = url_chars / n
    starts, ends = word_spans(cp, cls)
    dominant = OTHER
    if num_letters and text.isascii():
        dominant, out[STAT_INDEX["script_share"]] = LATIN, 1.0
    elif num_letters:
        per_script, words = _script_words(cls, starts)
        dominant = LATIN + int(per_script.argmax())
        out[STAT_INDEX["script_share"]] = per_script.max() / words
    out[STAT_INDEX["dominant_script"]] = dominant - LATIN if num_letters else len(SCRIPTS) - 1
    scale = UNSPACED_NGRAM_SCALE if dominant in UNSPACED else 1
    _word_stats(text, cp, cls, (starts, ends), scale, out)
    if dominant in UNSPACED:
        out[STAT_INDEX["mean_word_length"]] = np.nan  # a character is not a word there
    stop = GOPHER_STOP_WORDS.get(dominant)
    if stop is not None:  # distinct stop words present, as Gopher ("at least two of")
        words = {w.strip(_STRIP) for w in set(text.lower().split())}
        out[STAT_INDEX["stop_words"]] = sum(w in words for w in stop)
    _line_stats(text, out, dominant, c4_args, len(starts))
    return out
