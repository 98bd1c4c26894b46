"""The straightforward per-document statistics that pipeline.clean.textstats computed before
its batch path (issue 27), kept as the reference tests/clean/test_fastpath.py compares with.
The line statistics come from textstats itself: its per-document line code is unchanged (the
batch path's fallback), and what the test checks is clean/lines.py against it.

"""

from __future__ import annotations

import numpy as np

from pipeline.clean.charclass import (
    CJ,
    DIGIT,
    LATIN,
    MARK,
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
from pipeline.clean.pii import _URL_RE
from pipeline.clean.textstats import (  # shared constants; the per-document line code
    _NGRAM_COLS,
    _STRIP,
    DUP_NGRAMS,
    GOPHER_STOP_WORDS,
    NUM_STATS,
    STAT_INDEX,
    TOP_NGRAMS,
    UNSPACED_CHAR_WEIGHT,
    UNSPACED_NGRAM_SCALE,
    _line_stats,
    _script_words,
)
from pipeline.hashing import GOLDEN64, span_hashes


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
