"""Runs datatrove's heuristic filters for bench_clean.py, inside .bench-venv-clean (not ours).

Usage: python clean_datatrove_worker.py DOCS.jsonl OUT.json REPEATS
Times the FineWeb chain (GopherRepetition -> GopherQuality -> C4Quality -> FineWebQuality, each
doc stops at its first failing filter) and the same four filters on every doc; then runs each
shared rule alone (every other rule of its filter disabled) to get per-rule drop decisions.
Thresholds are set to the published values our `clean` defaults use (see docs/clean.md).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings

from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)

warnings.filterwarnings("ignore")
NO_GQ = dict(
    min_doc_words=None,
    max_doc_words=None,
    min_avg_word_length=None,
    max_avg_word_length=None,
    max_symbol_word_ratio=None,
    max_bullet_lines_ratio=None,
    max_ellipsis_lines_ratio=None,
    max_non_alpha_words_ratio=None,
    min_stop_words=None,
)
NO_GR = dict(
    dup_line_frac=None,
    dup_para_frac=None,
    dup_line_char_frac=None,
    dup_para_char_frac=None,
    top_n_grams=(),
    dup_n_grams=(),
)
C4_BASE = dict(remove_citations=False, min_num_sentences=3, min_words_per_line=5)
NO_C4 = dict(C4_BASE, filter_lorem_ipsum=False, filter_curly_bracket=False, min_num_sentences=-1)
NO_FW = dict(line_punct_thr=0.0, short_line_thr=1.0, char_duplicates_ratio=1.0, new_line_ratio=1e9)


def isolated() -> dict[str, object]:
    """Our rule name -> a datatrove filter with only that rule enabled."""
    rules = {
        "gopher_min_words_v1": GopherQualityFilter(**{**NO_GQ, "min_doc_words": 50}),
        "gopher_max_words_v1": GopherQualityFilter(**{**NO_GQ, "max_doc_words": 100000}),
        "gopher_min_mean_word_length_v1": GopherQualityFilter(
            **{**NO_GQ, "min_avg_word_length": 3}
        ),
        "gopher_max_mean_word_length_v1": GopherQualityFilter(
            **{**NO_GQ, "max_avg_word_length": 10}
        ),
        "gopher_hash_ratio_v1": GopherQualityFilter(**{**NO_GQ, "max_symbol_word_ratio": 0.1}),
        "gopher_bullet_lines_v1": GopherQualityFilter(**{**NO_GQ, "max_bullet_lines_ratio": 0.9}),
        "gopher_ellipsis_lines_v1": GopherQualityFilter(
            **{**NO_GQ, "max_ellipsis_lines_ratio": 0.3}
        ),
        "gopher_alpha_words_v1": GopherQualityFilter(**{**NO_GQ, "max_non_alpha_words_ratio": 0.8}),
        "gopher_stop_words_v1": GopherQualityFilter(**{**NO_GQ, "min_stop_words": 2}),
        "gopher_dup_lines_v1": GopherRepetitionFilter(**{**NO_GR, "dup_line_frac": 0.3}),
        "gopher_dup_paragraphs_v1": GopherRepetitionFilter(**{**NO_GR, "dup_para_frac": 0.3}),
        "gopher_dup_line_chars_v1": GopherRepetitionFilter(**{**NO_GR, "dup_line_char_frac": 0.2}),
        "gopher_dup_paragraph_chars_v1": GopherRepetitionFilter(
            **{**NO_GR, "dup_para_char_frac": 0.2}
        ),
        "c4_lorem_ipsum_v1": C4QualityFilter(**{**NO_C4, "filter_lorem_ipsum": True}),
        "c4_curly_bracket_v1": C4QualityFilter(**{**NO_C4, "filter_curly_bracket": True}),
        "c4_min_sentences_v1": C4QualityFilter(**{**NO_C4, "min_num_sentences": 3}),
        "fineweb_line_punct_v1": FineWebQualityFilter(**{**NO_FW, "line_punct_thr": 0.12}),
        "fineweb_short_lines_v1": FineWebQualityFilter(**{**NO_FW, "short_line_thr": 0.67}),
        "fineweb_dup_line_chars_v1": FineWebQualityFilter(
            **{**NO_FW, "char_duplicates_ratio": 0.01}
        ),
        "fineweb_list_ratio_v1": FineWebQualityFilter(**{**NO_FW, "new_line_ratio": 0.3}),
    }
    for n, frac in ((2, 0.2), (3, 0.18), (4, 0.16)):
        rules[f"gopher_top_{n}gram_v1"] = GopherRepetitionFilter(
            **{**NO_GR, "top_n_grams": ((n, frac),)}
        )
    for n, frac in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)):
        rules[f"gopher_dup_{n}gram_v1"] = GopherRepetitionFilter(
            **{**NO_GR, "dup_n_grams": ((n, frac),)}
        )
    return rules


def chain() -> list[object]:
    return [
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(**C4_BASE),
        FineWebQualityFilter(),
    ]


def dropped(flt: object, text: str) -> tuple[bool, str]:
    try:
        res = flt.filter(Document(text=text, id="x"))
    except Exception as exc:  # datatrove divides by zero on some inputs
        return True, f"error:{type(exc).__name__}"
    if isinstance(res, tuple):
        return not res[0], res[1]
    return not res, ""


def time_run(texts: list[str], filters: list[object], stop_early: bool) -> float:
    t0 = time.perf_counter()
    for text in texts:
        doc = Document(text=text, id="x")
        for f in filters:
            try:
                res = f.filter(doc if stop_early else Document(text=text, id="x"))
            except Exception:
                res = False
            ok = res[0] if isinstance(res, tuple) else res
            if stop_early and not ok:
                break
    return time.perf_counter() - t0


def main() -> None:
    docs_path, out_path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    texts = [json.loads(line)["text"] for line in open(docs_path, encoding="utf-8")]
    filters = chain()
    time_run(texts[:5], filters, False)  # warm up: loads the spaCy tokenizer
    chain_s = [time_run(texts, filters, True) for _ in range(repeats)]
    all_s = [time_run(texts, filters, False) for _ in range(repeats)]
    decisions, reasons = {}, {}
    for name, flt in isolated().items():
        out = [dropped(flt, t) for t in texts]
        decisions[name] = [d for d, _ in out]
        reasons[name] = [r for _, r in out]
    # ellipsis shares max_symbol_word_ratio with '#': only its own reason counts
    decisions["gopher_ellipsis_ratio_v1"] = [
        r == "gopher_too_many_ellipsis" for r in reasons["gopher_hash_ratio_v1"]
    ]
    decisions["gopher_hash_ratio_v1"] = [
        r == "gopher_too_many_hashes" for r in reasons["gopher_hash_ratio_v1"]
    ]
    json.dump(
        {
            "chain_seconds": statistics.median(chain_s),
            "all_filters_seconds": statistics.median(all_s),
            "decisions": decisions,
        },
        open(out_path, "w"),
    )


if __name__ == "__main__":
    main()
