"""clean: normalise text, drop documents that fail heuristic quality rules, redact PII.

Per part: normalise each text (control chars, HTML, NFKC, C4 boilerplate lines, whitespace),
compute every filter statistic in one pass (pipeline.clean.textstats), evaluate all rules (a
dropped document records every rule it fails), redact PII in kept documents, write kept rows to
part-NNNNN.parquet and dropped rows (original text + `reasons`) to rejected/part-NNNNN.parquet.
Parts are independent, so outputs are byte-identical for any worker count.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.clean import langid, urls
from pipeline.clean.charclass import SCRIPTS
from pipeline.clean.normalize import NORMALIZE_COUNTERS, NormalizeOptions, normalize_text
from pipeline.clean.pii import PII_KINDS, digit_hints, redact
from pipeline.clean.rules import (
    RULE_NAMES,
    RULES,
    attribution,
    evaluate,
    histogram_counts,
    summarize,
)
from pipeline.clean.textstats import STAT_INDEX, filter_stats_batch
from pipeline.config import bounded, input_path, option
from pipeline.errors import DataError, RecipeError
from pipeline.parts import np_array, part_name, read_table, write_kept_and_rejected, write_table
from pipeline.sources.files import expand_paths
from pipeline.stage import DocCounts, PartItem, Stage, StageContext, StageResult

WAVE_PARTS = 256  # parts per map call at least: their summaries are summed, then dropped


@dataclass(frozen=True)
class CleanConfig:
    # normalisation, applied in this order (each switchable)
    remove_control: bool = option(
        True, "drop C0/C1 control chars (not \\t \\n), BOM, non-characters"
    )
    strip_html: bool = option(True, "drop script/style blocks and known tags, unescape &entities;")
    nfkc: bool = option(True, "Unicode NFKC (full-width -> ASCII, ligatures split, NBSP -> space)")
    remove_boilerplate_lines: bool = option(
        True, 'C4: drop lines with "javascript" or policy phrases'
    )
    fold_whitespace: bool = option(
        True, "space runs -> one space, <= 1 blank line between paragraphs"
    )
    redact_pii: list[str] = option(
        factory=lambda: list(PII_KINDS),
        doc="PII redaction in kept documents: any of url, email, key, ip, phone",
    )
    # filters: a threshold of null turns its rule off (see docs/clean.md for each source)
    drop_empty: bool = option(True, "empty or whitespace-only after normalisation")
    languages: list[str] | None = option(
        None,
        "keep these languages (py3langid codes: en, de, zh, ...); adds lang, lang_score; "
        "null: no language ID (the `langid` extra)",
    )
    min_lang_score: float = bounded(
        0.65, ge=0.0, le=1.0, doc="with languages: drop below this lang_score (datatrove's 0.65)"
    )
    detect_language: bool = option(
        False, "lang, lang_score and per-language counts without filtering (on with languages)"
    )
    min_chars: int | None = bounded(None, ge=0, doc="characters; no published rule, off")
    max_chars: int | None = bounded(1_000_000, ge=1, doc="characters; guard, ~Gopher 100k words")
    min_words: int | None = bounded(50, ge=0, doc="Gopher: words (char = word in Chinese/Japanese)")
    max_words: int | None = bounded(100_000, ge=1, doc="Gopher: words")
    min_script_share: float | None = bounded(0.8, ge=0.0, le=1.0, doc="letters in dominant script")
    min_mean_word_length: float | None = bounded(3.0, ge=0.0, doc="Gopher: chars/word, punct excl.")
    max_mean_word_length: float | None = bounded(10.0, ge=0.0, doc="Gopher: chars/word")
    max_hash_ratio: float | None = bounded(0.1, ge=0.0, doc="Gopher: '#' per word")
    max_ellipsis_ratio: float | None = bounded(0.1, ge=0.0, doc="Gopher: '...' or '…' per word")
    max_bullet_lines_frac: float | None = bounded(0.9, ge=0.0, le=1.0, doc="Gopher: lines '•'/'-'")
    max_ellipsis_lines_frac: float | None = bounded(
        0.3, ge=0.0, le=1.0, doc="Gopher: lines end '...'"
    )
    min_alpha_words_frac: float | None = bounded(
        0.8, ge=0.0, le=1.0, doc="Gopher: words w/ a letter"
    )
    min_stop_words: int | None = bounded(
        2, ge=0, doc="Gopher: distinct stop words (Latin/Cyrillic)"
    )
    max_non_alnum_chars_frac: float | None = bounded(0.25, ge=0.0, le=1.0, doc="NeMo: incl. spaces")
    max_digit_chars_frac: float | None = bounded(0.15, ge=0.0, le=1.0, doc="NeMo: digits/chars")
    max_url_chars_frac: float | None = bounded(0.2, ge=0.0, le=1.0, doc="NeMo: URL chars/chars")
    max_word_length: int | None = bounded(1000, ge=1, doc="C4/NeMo: chars in the longest word")
    max_dup_lines_frac: float | None = bounded(0.3, ge=0.0, le=1.0, doc="Gopher: repeated lines")
    max_dup_paragraphs_frac: float | None = bounded(0.3, ge=0.0, le=1.0, doc="Gopher")
    max_dup_line_chars_frac: float | None = bounded(0.2, ge=0.0, le=1.0, doc="Gopher")
    max_dup_paragraph_chars_frac: float | None = bounded(0.2, ge=0.0, le=1.0, doc="Gopher")
    max_top_2gram_chars_frac: float | None = bounded(0.20, ge=0.0, le=1.0, doc="Gopher Table A1")
    max_top_3gram_chars_frac: float | None = bounded(0.18, ge=0.0, le=1.0, doc="Gopher")
    max_top_4gram_chars_frac: float | None = bounded(0.16, ge=0.0, le=1.0, doc="Gopher")
    max_dup_5gram_chars_frac: float | None = bounded(0.15, ge=0.0, le=1.0, doc="Gopher")
    max_dup_6gram_chars_frac: float | None = bounded(0.14, ge=0.0, le=1.0, doc="Gopher")
    max_dup_7gram_chars_frac: float | None = bounded(0.13, ge=0.0, le=1.0, doc="Gopher")
    max_dup_8gram_chars_frac: float | None = bounded(0.12, ge=0.0, le=1.0, doc="Gopher")
    max_dup_9gram_chars_frac: float | None = bounded(0.11, ge=0.0, le=1.0, doc="Gopher")
    max_dup_10gram_chars_frac: float | None = bounded(0.10, ge=0.0, le=1.0, doc="Gopher")
    drop_lorem_ipsum: bool = option(True, 'C4: "lorem ipsum" in a kept line drops the page')
    drop_curly_bracket: bool = option(
        True, 'C4: "{" in a kept line drops the page (code, templates)'
    )
    # C4 (TFDS) asks 3 with no word floor; over Gopher's 50-word floor 2 keeps the two-sentence
    # news brief (see docs/clean.md)
    min_sentences: int | None = bounded(2, ge=0, doc="C4: sentences in C4-kept lines")
    min_words_per_line: int = bounded(5, ge=0, doc="C4 (TFDS): a line with fewer is not kept")
    min_line_punct_frac: float | None = bounded(
        0.12, ge=0.0, le=1.0, doc='FineWeb: lines ending .!?"'
    )
    max_short_lines_frac: float | None = bounded(
        0.67, ge=0.0, le=1.0, doc="FineWeb: lines <= 30 chars"
    )
    max_fineweb_dup_line_chars_frac: float | None = bounded(
        0.01, ge=0.0, le=1.0, doc="FineWeb code"
    )
    max_newlines_per_word: float | None = bounded(0.3, ge=0.0, doc="FineWeb list_ratio")
    # URL filters (pipeline.clean.urls), checked before any text rule: a blocked page is not
    # measured; files of one entry per line, `#` comments (docs/clean.md)
    domain_blocklist: str | list[str] | None = input_path(
        doc="files of domains (example.com: it and its subdomains); null: off"
    )
    url_blocklist: str | list[str] | None = input_path(
        doc="files of URL patterns (host/path-prefix, * in the path); null: off"
    )
    url_field: str = option("url", "the column holding each document's URL (warc: url)")

    def validate(self, path: str) -> None:
        self._validate_languages(path)
        for i, kind in enumerate(self.redact_pii):
            if kind not in PII_KINDS:
                raise RecipeError(
                    f"{path}.redact_pii[{i}]",
                    f"got {kind!r}, expected one of {', '.join(PII_KINDS)}",
                )
        for lo, hi in (
            ("min_words", "max_words"),
            ("min_chars", "max_chars"),
            ("min_mean_word_length", "max_mean_word_length"),
        ):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise RecipeError(f"{path}.{lo}", f"must be <= {hi} ({b}), got {a}")
        load_blocklist(self, path)  # a bad list file stops the run before it starts

    def _validate_languages(self, path: str) -> None:
        if not self.language_id:
            return
        key = f"{path}.languages" if self.languages is not None else f"{path}.detect_language"
        if not langid.available():
            raise RecipeError(key, f"language ID needs the langid extra: {langid.INSTALL_HINT}")
        if self.languages is None:
            return
        if not self.languages:
            raise RecipeError(key, "an empty list would drop every document; null keeps all")
        bad = langid.check_languages(self.languages)
        if bad is not None:
            i, code, close = bad
            if code in langid.MACROLANGUAGE:
                raise RecipeError(
                    f"{key}[{i}]", f"got {code!r}, which counts as its macrolanguage: list {close}"
                )
            raise RecipeError(
                f"{key}[{i}]", f"got {code!r}, not a language code py3langid knows", close
            )

    @property
    def language_id(self) -> bool:
        """Whether documents get a `lang` and `lang_score`."""
        return self.languages is not None or self.detect_language

    @property
    def normalize_options(self) -> NormalizeOptions:
        return NormalizeOptions(
            self.remove_control,
            self.strip_html,
            self.nfkc,
            self.remove_boilerplate_lines,
            self.fold_whitespace,
        )


@dataclass
class CleanedBatch:
    """What clean_texts decides for a batch of texts (pure; no I/O)."""

    texts: list[str]  # output text per input doc (normalised, PII-redacted when kept)
    keep: np.ndarray  # bool [n]
    fails: np.ndarray  # bool [n, rules]
    stats: np.ndarray  # float64 [n, stats]
    normalize_counts: np.ndarray  # int64 [len(NORMALIZE_COUNTERS)]
    pii_counts: dict[str, int]
    scripts: Counter  # dominant script of each input document
    langs: list[str] | None = None  # language code per input doc (with language ID)
    lang_scores: np.ndarray | None = None  # float64 [n]: its score in [0, 1]


def clean_texts(texts: list[str | None], cfg: CleanConfig) -> CleanedBatch:
    """Normalise, measure, filter and redact a batch of texts; None counts as empty."""
    opts = cfg.normalize_options
    out_texts: list[str] = []
    norm_counts = np.zeros(len(NORMALIZE_COUNTERS), np.int64)
    scripts: Counter[str] = Counter()
    c4_args = (cfg.min_words_per_line, cfg.max_word_length or 1 << 62)
    for raw in texts:
        text, counts = normalize_text(raw or "", opts)
        norm_counts += counts
        out_texts.append(text)
    stats = filter_stats_batch(out_texts, cfg.max_chars, c4_args)
    codes = stats[:, STAT_INDEX["dominant_script"]]
    scripts.update(SCRIPTS[int(c)] for c in codes[~np.isnan(codes)])
    langs = lang_scores = None
    if cfg.language_id:
        langs, lang_scores = langid.identify(out_texts)
        langid.apply_to_stats(stats, STAT_INDEX, out_texts, langs, lang_scores, cfg.languages)
    fails = evaluate(stats, cfg)
    keep = ~fails.any(axis=1)
    pii: Counter[str] = Counter(dict.fromkeys(cfg.redact_pii, 0))
    if cfg.redact_pii:
        pii.update(redact_rows(out_texts, stats, np.flatnonzero(keep), tuple(cfg.redact_pii)))
    return CleanedBatch(
        out_texts, keep, fails, stats, norm_counts, dict(pii), scripts, langs, lang_scores
    )


def redact_rows(
    texts: list[str], stats: np.ndarray, rows: np.ndarray, kinds: tuple[str, ...]
) -> Counter:
    """Redact `kinds` of PII in texts[rows] (in place), with the hints the batch's statistics
    (float64 [n, stats]) give; returns the replacements made per kind. A text's result depends
    on it alone (the hints only skip patterns that cannot match)."""
    pii: Counter[str] = Counter()
    longest, digits = (
        stats[:, STAT_INDEX["max_word_length"]],
        stats[:, STAT_INDEX["digit_chars_frac"]],
    )
    rows_ = rows.tolist()
    near = digit_hints([texts[i] for i in rows_]) if {"ip", "phone"} & set(kinds) else None
    for j, i in enumerate(rows_):
        hint = None if np.isnan(longest[i]) else int(longest[i])
        may = (True, True) if near is None else (bool(near[j, 0]), bool(near[j, 1]))
        texts[i], counts = redact(texts[i], kinds, hint, bool(digits[i] != 0), *may)
        if any(counts.values()):  # most texts hold none: Counter.update costs ~2 us
            pii.update(counts)
    return pii


# ------------------------------------------------ the default rule's verdicts (`default_rule/`)

DEFAULT_CLEAN = CleanConfig()
DEFAULT_RULE_DIR = "default_rule"
# fields that only decide which documents are kept: a rule's threshold or switch, read by
# `evaluate` alone. Not here, since they change a text or the statistics a rule reads:
# normalisation, redact_pii, max_chars (stats of a longer text are skipped), max_word_length and
# min_words_per_line (the C4 line filter behind c4_* stats), languages / detect_language (stop
# words by language), the URL lists (rows dropped before any text rule)
_DECISION_ONLY = frozenset(r.key for r in RULES) - {"max_chars", "max_word_length"}


def shares_default_stats(cfg: CleanConfig) -> bool:
    """Whether `cfg` differs from clean's defaults only in fields that decide which documents
    are kept (`_DECISION_ONLY`), and does differ: then one pass's texts and statistics are the
    defaults' too, and clean writes which documents the defaults keep (`default_rule_table`)."""
    if cfg.domain_blocklist is not None or cfg.url_blocklist is not None:
        return False
    diff = [
        f.name
        for f in dataclasses.fields(CleanConfig)
        if f.name != "url_field" and getattr(cfg, f.name) != getattr(DEFAULT_CLEAN, f.name)
    ]
    return bool(diff) and all(name in _DECISION_ONLY for name in diff)


def default_rule_table(batch: CleanedBatch) -> pa.Table:
    """The documents of `batch` that clean's defaults keep, in row order: `row` (int64, the
    input row), `kept_row` (int64, its row in the kept part, -1 when this config dropped it)
    and `text` (its cleaned text where kept_row is -1, else null: the kept part holds it).
    Valid only where `shares_default_stats` holds for the batch's config."""
    ok = ~evaluate(batch.stats, DEFAULT_CLEAN).any(axis=1)
    rows = np.flatnonzero(ok)
    kept_row = np.where(batch.keep, np.cumsum(batch.keep) - 1, -1)[rows]
    extra = rows[kept_row < 0]  # normalised, not yet redacted: this config dropped them
    texts: list[str | None] = [None] * len(rows)
    if len(extra):
        own = [batch.texts[i] for i in extra.tolist()]
        kinds = tuple(DEFAULT_CLEAN.redact_pii)
        if kinds:
            redact_rows(own, batch.stats[extra], np.arange(len(extra)), kinds)
        for j, t in zip(np.flatnonzero(kept_row < 0).tolist(), own, strict=True):
            texts[j] = t
    return pa.table(
        {
            "row": np_array(rows.astype(np.int64)),
            "kept_row": np_array(kept_row.astype(np.int64)),
            "text": pa.array(texts, pa.string()),
        }
    )


def with_language(table: pa.Table, langs: list[str], scores: np.ndarray) -> pa.Table:
    """The table with `lang` (string) and `lang_score` (float32) columns, replacing any the
    input had (a re-cleaned part)."""
    for name in ("lang", "lang_score"):
        if name in table.column_names:
            table = table.drop_columns([name])
    table = table.append_column("lang", pa.array(langs, pa.string()))
    return table.append_column("lang_score", pa.array(scores.astype(np.float32), pa.float32()))


def _reasons(fails: np.ndarray) -> list[list[str]]:
    return [[RULE_NAMES[j] for j in np.flatnonzero(row)] for row in fails]


def load_blocklist(cfg: CleanConfig, path: str = "clean") -> urls.Blocklist | None:
    """The URL and domain lists the config names, parsed (None: no list). A list file that is
    missing or not UTF-8 is a RecipeError; a bad line a DataError naming file:line."""
    lists = []
    for key, parse in (("domain_blocklist", urls.parse_domains), ("url_blocklist", None)):
        value = getattr(cfg, key)
        for name in [value] if isinstance(value, str) else value or []:
            files = expand_paths(name)
            if not files:
                raise RecipeError(f"{path}.{key}", f"no file matches {name!r}")
            for f in files:
                try:
                    lines = f.read_text(encoding="utf-8").splitlines()
                except (OSError, UnicodeDecodeError) as exc:
                    raise DataError(str(f), f"cannot read the {key} file ({exc})") from None
                if parse is None:
                    lists.append(urls.Blocklist(urls=urls.parse_url_patterns(lines, str(f))))
                else:
                    lists.append(urls.Blocklist(domains=parse(lines, str(f))))
    return urls.merge(lists) if lists else None


def _url_reasons(
    table: pa.Table, cfg: CleanConfig, blocklist: urls.Blocklist | None, where: str
) -> tuple[list[str | None] | None, int]:
    """Per row, the URL rule that blocks it (or None), and how many rows have no URL."""
    if blocklist is None:
        return None, 0
    if cfg.url_field not in table.column_names:
        raise DataError(
            where,
            f"no '{cfg.url_field}' column for the URL block lists (clean.url_field); "
            f"columns: {', '.join(table.column_names)}",
        )
    values = table.column(cfg.url_field).to_pylist()
    return urls.block_reasons(values, blocklist), sum(not v for v in values)


def clean_part(
    item: PartItem, cfg: CleanConfig, out_dir: str, blocklist: urls.Blocklist | None = None
) -> dict[str, Any]:
    """Clean one input part; writes part-i (kept) and rejected/part-i (if any were dropped).
    A row a URL list blocks is dropped with that reason alone, before the text rules."""
    index, in_path = item.index, item.path
    try:
        table = read_table(Path(in_path))
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise DataError(in_path, f"cannot read Parquet part ({exc})") from None
    if "text" not in table.column_names:
        raise DataError(in_path, f"no 'text' column; columns: {', '.join(table.column_names)}")
    url_reasons, no_url = _url_reasons(table, cfg, blocklist, in_path)
    full = table
    if url_reasons is not None:
        table = table.filter(pa.array([r is None for r in url_reasons]))
    texts = table.column("text").to_pylist()
    batch = clean_texts(texts, cfg)
    if batch.langs is not None:
        table = with_language(table, batch.langs, batch.lang_scores)
        if url_reasons is None:
            full = table
        else:  # rows a URL list blocked were never identified: null lang, NaN score
            through = np.array([r is None for r in url_reasons])
            langs: list[str | None] = [None] * len(url_reasons)
            for i, lang in zip(np.flatnonzero(through).tolist(), batch.langs, strict=True):
                langs[i] = lang
            scores = np.full(len(url_reasons), np.nan, np.float32)
            scores[through] = batch.lang_scores
            full = with_language(full, langs, scores)  # type: ignore[arg-type]
    elif url_reasons is None:
        full = table
    kept = table.filter(pa.array(batch.keep))
    kept_texts = [t for t, k in zip(batch.texts, batch.keep, strict=True) if k]
    text_col = kept.column_names.index("text")
    kept = kept.set_column(text_col, "text", pa.array(kept_texts, pa.string()))
    reasons = _reasons(batch.fails[~batch.keep])  # every failed rule, the first one counted
    keep = batch.keep
    if url_reasons is not None:
        keep, reasons = _with_url_reasons(url_reasons, batch.keep, reasons)
    outputs, counts = write_kept_and_rejected(Path(out_dir), index, full, keep, reasons, kept=kept)
    if shares_default_stats(cfg):  # for the quality stage's self reference (docs/clean.md)
        rel = f"{DEFAULT_RULE_DIR}/{part_name(index)}"
        write_table(Path(out_dir) / rel, default_rule_table(batch))
        outputs.append(rel)
    att = attribution(batch.fails)
    return {
        "outputs": outputs,
        "counts": counts,
        "first": att["first"],
        "all": att["all"],
        "alone": att["alone"],
        "hist": histogram_counts(batch.stats, cfg),
        "normalize": batch.normalize_counts,
        "pii": batch.pii_counts,
        "scripts": batch.scripts,
        "stats_skipped": int(np.isnan(batch.stats[:, 1]).sum() - (batch.stats[:, 0] == 0).sum()),
        "no_url": no_url,
        "langs": (
            langid.language_counts(batch.langs, batch.keep) if batch.langs is not None else None
        ),
    }


def _with_url_reasons(
    url_reasons: list[str | None], keep: np.ndarray, reasons: list[list[str]]
) -> tuple[np.ndarray, list[list[str]]]:
    """The whole part's keep mask and dropped rows' reasons, from the URL verdicts of every row
    and the text rules' (`keep`, `reasons`) of the rows the URL lists let through."""
    full = np.zeros(len(url_reasons), bool)
    out: list[list[str]] = []
    passed = iter(keep.tolist())
    rule_reasons = iter(reasons)
    for i, r in enumerate(url_reasons):
        if r is not None:
            out.append([r])
        elif next(passed):
            full[i] = True
        else:
            out.append(next(rule_reasons))
    return full, out


class _Sums:
    """Running sums of the per-part summaries: the driver folds each wave of parts into these
    and drops the summaries (a part's histograms are ~10 KB: held for every part, they were the
    driver's one per-part term that mattered at 10^5 parts)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.pii: Counter[str] = Counter()
        self.scripts: Counter[str] = Counter()
        self.stats_skipped = 0
        self.no_url = 0
        self.langs_in: Counter[str] = Counter()
        self.langs_kept: Counter[str] = Counter()

    def add(self, r: dict[str, Any]) -> None:
        for key in ("first", "all", "alone", "hist", "normalize"):
            self.arrays[key] = self.arrays[key] + r[key] if key in self.arrays else r[key]
        self.pii.update(r["pii"])
        self.scripts.update(r["scripts"])
        self.stats_skipped += r["stats_skipped"]
        self.no_url += r.get("no_url", 0)
        if r["langs"] is not None:
            self.langs_in.update(r["langs"][0])
            self.langs_kept.update(r["langs"][1])


def _reduce(sums: _Sums, counts: list[DocCounts], cfg: CleanConfig) -> dict[str, Any]:
    """The stage's flat stats (+ nested rules/histograms) from the summed part summaries."""
    a = sums.arrays
    total = DocCounts.total(counts)  # the runner reports the counts
    stats: dict[str, Any] = {}
    stats["kept_frac"] = round(total.docs_out / total.docs_in, 4) if total.docs_in else 0.0
    stats.update({name: int(a["normalize"][i]) for i, name in enumerate(NORMALIZE_COUNTERS)})
    stats.update({f"pii_{k}_replaced": int(sums.pii[k]) for k in cfg.redact_pii})
    stats["docs_stats_skipped_too_long"] = sums.stats_skipped
    stats["docs_per_script"] = {s: sums.scripts[s] for s in SCRIPTS if sums.scripts[s]}
    if cfg.domain_blocklist or cfg.url_blocklist:
        stats["docs_without_url"] = sums.no_url  # kept by the URL lists: nothing to match
    if cfg.language_id:  # most documents first, ties by code
        order = sorted(sums.langs_in, key=lambda k: (-sums.langs_in[k], k))
        stats["docs_per_language"] = {k: sums.langs_in[k] for k in order}
        stats["kept_per_language"] = {k: sums.langs_kept[k] for k in order}
    rules, hists = summarize(a["first"], a["all"], a["alone"], a["hist"], cfg)
    stats["rules"] = rules  # per rule: first-failing, all-failing, alone-failing counts
    stats["histograms"] = hists  # per rule: its statistic over the stage input, threshold marked
    return stats


def run(cfg: CleanConfig, ctx: StageContext) -> StageResult:
    if not ctx.input_parts:
        raise DataError(str(ctx.run_dir), "clean needs an upstream stage with parts (download)")
    blocklist = load_blocklist(cfg)
    fn = functools.partial(clean_part, cfg=cfg, out_dir=str(ctx.out_dir), blocklist=blocklist)
    items = [PartItem(i, str(p)) for i, p in enumerate(ctx.input_parts)]
    sums, outputs, counts = _Sums(), [], []
    wave = max(WAVE_PARTS, 8 * ctx.executor.workers)  # summaries held at once
    for w in range(0, len(items), wave):
        for r in ctx.executor.map(fn, items[w : w + wave], desc="clean"):
            outputs += r["outputs"]
            counts.append(r["counts"])
            sums.add(r)
    return StageResult(outputs=outputs, stats=_reduce(sums, counts, cfg), counts=counts)


# 2: v2 rules; 3: keys from 15 chars; 4: parts at zstd level 1 (io.PARQUET_KW)
STAGE = Stage("clean", CleanConfig, run, version="4", needs=("download",))
