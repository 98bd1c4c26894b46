"""Filter rules: a versioned name, the statistic it reads, its config key and direction.

`evaluate` turns a [docs, stats] matrix into a [docs, rules] failure matrix (NaN never fails),
and `summarize` counts, per rule, first-failing, all-failing and alone-failing documents plus a
fixed-bin histogram of its statistic with the threshold as a bin edge. Rule order decides which
rule is "first"; it runs from cheap and broad (size, script) to specific (repetition, C4, FineWeb).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.clean.textstats import STAT_INDEX
from pipeline.config import recipe_key


@dataclass(frozen=True)
class Rule:
    name: str  # stable reason string, versioned: bump _vN when the statistic's meaning changes
    stat: str  # a name in textstats.FILTER_STAT_NAMES
    key: str  # CleanConfig field holding the threshold (None disables) or a bool switch
    direction: str  # "max": drop when stat > threshold; "min": drop when stat < threshold
    gate: str | None = None  # CleanConfig field that must be set (not null) for the rule to run


_FRAC = [round(x, 2) for x in np.linspace(0, 1, 21)]
_COUNT = [
    0,
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    10_000_000,
]
_LEN = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 30, 50, 100, 1000, 10_000]
_SMALL = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 50, 100, 1000]
BINS = {
    "num_chars": _COUNT,
    "num_words": _COUNT,
    "mean_word_length": _LEN,
    "max_word_length": _LEN,
    "stop_words": _SMALL,
    "c4_sentences": _SMALL,
    "c4_lorem_ipsum": [0, 1],
    "c4_curly_bracket": [0, 1],
    "hash_ratio": _FRAC,
    "ellipsis_ratio": _FRAC,
    "newlines_per_word": _FRAC,
}

RULES: tuple[Rule, ...] = (
    Rule("empty_doc_v1", "num_chars", "drop_empty", "min"),
    # lang_score where the language is one of clean.languages, -1 where it is not (langid.py)
    Rule("language", "lang_score", "min_lang_score", "min", gate="languages"),
    Rule("max_chars_v1", "num_chars", "max_chars", "max"),
    Rule("min_chars_v1", "num_chars", "min_chars", "min"),
    Rule("gopher_min_words_v1", "num_words", "min_words", "min"),
    Rule("gopher_max_words_v1", "num_words", "max_words", "max"),
    Rule("script_consistency_v1", "script_share", "min_script_share", "min"),
    Rule("gopher_min_mean_word_length_v1", "mean_word_length", "min_mean_word_length", "min"),
    Rule("gopher_max_mean_word_length_v1", "mean_word_length", "max_mean_word_length", "max"),
    Rule("gopher_hash_ratio_v1", "hash_ratio", "max_hash_ratio", "max"),
    Rule("gopher_ellipsis_ratio_v1", "ellipsis_ratio", "max_ellipsis_ratio", "max"),
    Rule("gopher_bullet_lines_v2", "bullet_lines_frac", "max_bullet_lines_frac", "max"),
    Rule("gopher_ellipsis_lines_v2", "ellipsis_lines_frac", "max_ellipsis_lines_frac", "max"),
    Rule("gopher_alpha_words_v2", "alpha_words_frac", "min_alpha_words_frac", "min"),
    Rule("gopher_stop_words_v1", "stop_words", "min_stop_words", "min"),
    Rule("symbol_chars_v2", "non_alnum_chars_frac", "max_non_alnum_chars_frac", "max"),
    Rule("digit_chars_v2", "digit_chars_frac", "max_digit_chars_frac", "max"),
    Rule("url_chars_v1", "url_chars_frac", "max_url_chars_frac", "max"),
    Rule("max_word_length_v1", "max_word_length", "max_word_length", "max"),
    Rule("gopher_dup_lines_v2", "dup_lines_frac", "max_dup_lines_frac", "max"),
    Rule("gopher_dup_paragraphs_v1", "dup_paragraphs_frac", "max_dup_paragraphs_frac", "max"),
    Rule("gopher_dup_line_chars_v2", "dup_line_chars_frac", "max_dup_line_chars_frac", "max"),
    Rule(
        "gopher_dup_paragraph_chars_v1",
        "dup_paragraph_chars_frac",
        "max_dup_paragraph_chars_frac",
        "max",
    ),
    *(
        Rule(
            f"gopher_top_{n}gram_v2",
            f"top_{n}gram_chars_frac",
            f"max_top_{n}gram_chars_frac",
            "max",
        )
        for n in (2, 3, 4)
    ),
    *(
        Rule(
            f"gopher_dup_{n}gram_v2",
            f"dup_{n}gram_chars_frac",
            f"max_dup_{n}gram_chars_frac",
            "max",
        )
        for n in (5, 6, 7, 8, 9, 10)
    ),
    Rule("c4_lorem_ipsum_v2", "c4_lorem_ipsum", "drop_lorem_ipsum", "max"),
    Rule("c4_curly_bracket_v2", "c4_curly_bracket", "drop_curly_bracket", "max"),
    Rule("c4_min_sentences_v2", "c4_sentences", "min_sentences", "min"),
    Rule("fineweb_line_punct_v2", "line_punct_frac", "min_line_punct_frac", "min"),
    Rule("fineweb_short_lines_v2", "short_lines_frac", "max_short_lines_frac", "max"),
    Rule(
        "fineweb_dup_line_chars_v2",
        "fineweb_dup_line_chars_frac",
        "max_fineweb_dup_line_chars_frac",
        "max",
    ),
    Rule("fineweb_list_ratio_v2", "newlines_per_word", "max_newlines_per_word", "max"),
)
RULE_NAMES = tuple(r.name for r in RULES)


def threshold(rule: Rule, cfg: Any) -> float | None:
    """The rule's threshold from the config; None when the rule is off. Switches map to 0.5."""
    if rule.gate is not None and getattr(cfg, rule.gate) is None:
        return None
    value = getattr(cfg, rule.key)
    if isinstance(value, bool):
        # empty_doc: num_chars < 0.5; lorem/curly flags: stat > 0.5
        return 0.5 if value else None
    return None if value is None else float(value)


def evaluate(stats: np.ndarray, cfg: Any) -> np.ndarray:
    """bool [docs, rules]: True where the document fails the rule. NaN statistics never fail."""
    fails = np.zeros((stats.shape[0], len(RULES)), bool)
    with np.errstate(invalid="ignore"):
        for j, rule in enumerate(RULES):
            thr = threshold(rule, cfg)
            if thr is None:
                continue
            col = stats[:, STAT_INDEX[rule.stat]]
            fails[:, j] = col > thr if rule.direction == "max" else col < thr
    return fails


def bin_edges(rule: Rule, thr: float | None) -> list[float]:
    """Fixed edges for the rule's statistic, with the threshold inserted as an edge."""
    base = BINS.get(rule.stat, _FRAC)
    edges = sorted(set(base) | ({thr} if thr is not None and base[0] <= thr <= base[-1] else set()))
    return [float(e) for e in edges]


def histogram_counts(stats: np.ndarray, cfg: Any) -> np.ndarray:
    """int64 [rules, max_bins]: per-rule histogram counts of this batch (values clipped into
    the outer bins; NaN skipped). Counts from different parts add up."""
    width = max(len(bin_edges(r, threshold(r, cfg))) for r in RULES)
    out = np.zeros((len(RULES), width), np.int64)
    for j, rule in enumerate(RULES):
        edges = np.asarray(bin_edges(rule, threshold(rule, cfg)))
        col = stats[:, STAT_INDEX[rule.stat]]
        col = np.clip(col[~np.isnan(col)], edges[0], edges[-1])
        counts, _ = np.histogram(col, bins=edges)
        out[j, : len(counts)] = counts
    return out


def attribution(fails: np.ndarray) -> dict[str, np.ndarray]:
    """int64 [rules] each: first (drop counted under the first failing rule), all, alone."""
    any_fail = fails.any(axis=1)
    first_idx = np.argmax(fails, axis=1)[any_fail]
    alone = fails & (fails.sum(axis=1) == 1)[:, None]
    return {
        "first": np.bincount(first_idx, minlength=len(RULES)),
        "all": fails.sum(axis=0),
        "alone": alone.sum(axis=0),
    }


def summarize(
    first: np.ndarray, all_: np.ndarray, alone: np.ndarray, hist: np.ndarray, cfg: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(rules: {name: {first, all, alone, threshold, key, direction}}, histograms: {name: {...}});
    `key` is the recipe key that sets the threshold (`clean.min_words`)."""
    rules, hists = {}, {}
    for j, rule in enumerate(RULES):
        thr = threshold(rule, cfg)
        edges = bin_edges(rule, thr)
        key = recipe_key(cfg, rule.key)
        rules[rule.name] = {
            "first": int(first[j]),
            "all": int(all_[j]),
            "alone": int(alone[j]),
            "stat": rule.stat,
            "threshold": thr,
            "key": key,
            "direction": rule.direction,
        }
        hists[rule.name] = {
            "stat": rule.stat,
            "bins": edges,
            "counts": [int(c) for c in hist[j, : len(edges) - 1]],
            "threshold": thr,
            "key": key,
            "direction": rule.direction,
        }
    return rules, hists
