"""The quality stage's language-model step: choose the reference, fit the fold LMs and the
coherence classifiers on it, write them to `lm.npz`, and score every part with them.

I/O glue around the pure cores (reference, lmscore, lmfile); the stage (stages/quality/__init__.py)
calls `reference_texts` once on the driver, then fits and scores: when workers score, the LM fit
is the first task of its stats pass (`fit_task`) and the classifiers' fit the first task of the
LM scoring pass (`classifiers_task`), so both run in a worker beside the other parts' tasks and
the driver only waits; inline (one worker), `fit_inline`, `score_part` over the parts, then
`fit_coherence`.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.clean.normalize import normalize_text
from pipeline.clean.pii import redact
from pipeline.errors import DataError
from pipeline.io import atomic_write_bytes
from pipeline.parts import np_array, numeric_column, part_name, read_table
from pipeline.permute import splitmix64
from pipeline.quality import copies
from pipeline.quality import reference as refmod
from pipeline.quality.coherence import FEATURE_NAMES, Coherence
from pipeline.quality.features import (
    DEFAULT_WEIGHTS,
    STAT_NAMES,
    heuristic_score,
    stats_and_script_share,
)
from pipeline.quality.lmfile import load_scorer, scorer_bytes
from pipeline.quality.lmscore import (
    LMParams,
    LMScorer,
    Reference,
    coherence_of,
    fit_classifiers,
    fit_lm,
    text_keys,
)
from pipeline.quality.ngram import SCRIPTS, Tokens
from pipeline.stages.clean import (
    DEFAULT_CLEAN,
    DEFAULT_RULE_DIR,
    CleanConfig,
    clean_texts,
    shares_default_stats,
)
from pipeline.stages.quality import partcols

TMP_LM_FILE = ".lm-scorer.npz"  # only while worker processes score; not an output
TMP_REF_FILE = ".lm-reference.npz"  # the tokenised reference, for the classifiers' task
# self reference: the first draw reads this many times the budget's characters of raw input;
# later rounds aim at the budget from the eligible characters per unit of draw range seen so far
# (times REF_MARGIN). The rounds never change the result (see `self_reference`), only the cost:
# each round re-reads the parts' ids, each document read is cleaned and scored once. Real text
# passes ~80%: 1.25x is one round, where 4x cleaned ~3x the documents the reference keeps.
REF_OVERSAMPLE = 1.25
REF_MARGIN = 1.2
# the self reference's own fixed clean rule: clean's published defaults, whatever the recipe's
# clean block says, so tuning clean moves no reference document (and no score)
REFERENCE_CLEAN = DEFAULT_CLEAN  # = CleanConfig(); clean's default_rule/ parts use it too
UNSPACED_SHARE = 0.3  # a document this much Han/Kana/Thai/... is scored without the heuristic
FEATS_DIR = ".lm-features"  # per-part LM features between the scoring and coherence passes


@dataclass
class LMResult:
    scorer: LMScorer | None  # None: no LM (fallback, see info["why"])
    info: dict[str, Any]
    reference: Reference | None = None
    is_self: bool = False
    scorer_file: Path | None = None  # the scorer for worker processes (`fit_task`)
    ref_file: Path | None = None  # and the tokenised reference, for the classifiers' fit

    @property
    def has_lm(self) -> bool:
        """Whether there is an LM: in the driver (`scorer`) or in its file (`scorer_file`)."""
        return self.scorer is not None or self.scorer_file is not None


def _raw_size(path: Path) -> int:
    """Characters of a download part's text column."""
    col = read_table(path, columns=["text"]).column("text")
    return int(pc.sum(pc.utf8_length(col)).as_py() or 0)


@dataclass(frozen=True, slots=True)
class DrawPart:
    """Download part `index` at `path`: one self-reference draw task. `cleaned`: clean's kept
    part of it when clean ran with REFERENCE_CLEAN (`clean_is_reference`): its rows are the
    part's documents that the reference's rule keeps, with their cleaned texts."""

    index: int
    path: Path
    cleaned: Path | None = None
    default_rule: Path | None = None  # clean's default_rule/ part: which rows the rule keeps


def clean_is_reference(clean: Any) -> bool:
    """Whether clean's outputs were written with the reference's rule (REFERENCE_CLEAN): every
    field that moves a text or a verdict equal to clean's default (`url_field` moves none
    without a block list). Then a kept part holds exactly the documents of its download part
    that the rule keeps, each with the text `clean_texts(.., REFERENCE_CLEAN)` gives it (a
    document's text and verdict depend on it alone), and the draw reads them there."""
    if not isinstance(clean, CleanConfig):  # unknown (a stage run by hand): clean again
        return False
    if clean.domain_blocklist is None and clean.url_blocklist is None:
        clean = dataclasses.replace(clean, url_field=REFERENCE_CLEAN.url_field)
    return clean == REFERENCE_CLEAN


def _draw_parts(ctx: Any, parts: list[Path]) -> list[DrawPart]:
    """One draw task per download part, with clean's kept part where it can stand in: as is
    (`clean_is_reference`), or with its `default_rule/` part (clean wrote one where its config
    differs from REFERENCE_CLEAN in thresholds and switches only: `shares_default_stats`)."""
    clean = ctx.inputs.get("clean")
    if clean is None or not isinstance(clean.config, CleanConfig):
        return [DrawPart(i, p) for i, p in enumerate(parts)]
    files = set(clean.files)  # clean writes part i's kept rows to part_name(i), always
    if clean_is_reference(clean.config):
        return [
            DrawPart(i, p, clean.dir / part_name(i) if part_name(i) in files else None)
            for i, p in enumerate(parts)
        ]
    if not shares_default_stats(clean.config):
        return [DrawPart(i, p) for i, p in enumerate(parts)]
    out = []
    for i, p in enumerate(parts):  # a part without one (clean run by older code): clean again
        rule = f"{DEFAULT_RULE_DIR}/{part_name(i)}"
        if part_name(i) in files and rule in files:
            out.append(DrawPart(i, p, clean.dir / part_name(i), clean.dir / rule))
        else:
            out.append(DrawPart(i, p))
    return out


def _drawn_by_rule(item: DrawPart, lo: float, hi: float, seed: int) -> tuple | None:
    """(draw keys, cleaned texts) of the download part's rows that REFERENCE_CLEAN keeps and
    whose draw position is in [lo, hi), in row order, from clean's kept part and its
    default_rule/ part (`default_rule_table`): what `clean_texts` on the drawn rows gives.
    None when the kept rows' ids are not the download rows' (clean read another input)."""
    assert item.cleaned is not None and item.default_rule is not None
    rule = read_table(item.default_rule, columns=["row", "kept_row"])
    rows = np_array_of(rule.column("row"))
    names = pq.read_schema(item.path).names
    if "id" in names:
        ids = read_table(item.path, columns=["id"]).column("id").take(np_array(rows)).to_pylist()
        keys = draw_keys([str(i) for i in ids], seed)
    else:
        keys = draw_keys([f"{item.index}:{r}" for r in rows.tolist()], seed)
    u = (keys >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    sel = np.flatnonzero((u >= lo) & (u < hi))
    if not len(sel):
        return keys[sel], []
    kept_row = np_array_of(rule.column("kept_row"))[sel]
    mine = kept_row >= 0
    texts: list[str] = [""] * len(sel)
    if mine.any():
        cols = ["id", "text"] if "id" in names else ["text"]
        kept = read_table(item.cleaned, columns=cols)
        if int(kept_row.max()) >= kept.num_rows:
            return None  # clean's input was not this download part (a stage between): clean
        kept = kept.take(np_array(kept_row[mine]))
        if "id" in names and kept.column("id").to_pylist() != [ids[j] for j in sel[mine]]:
            return None
        for j, t in zip(
            np.flatnonzero(mine).tolist(), kept.column("text").to_pylist(), strict=True
        ):
            texts[j] = t or ""
    if not mine.all():
        col = read_table(item.default_rule, columns=["text"]).column("text")
        extra = col.take(np_array(sel[~mine])).to_pylist()
        for j, t in zip(np.flatnonzero(~mine).tolist(), extra, strict=True):
            texts[j] = t or ""
    return keys[sel], texts


def np_array_of(col: Any) -> np.ndarray:
    """int64 [n]: a non-null integer column as numpy (no pandas import: parts.numeric_column)."""
    return numeric_column(col, np.int64)


def _drawn_cleaned(path: Path, lo: float, hi: float, seed: int) -> tuple | None:
    """(draw keys, cleaned texts) of clean's kept rows at `path` whose draw position is in
    [lo, hi), or None when the part has no `id` column (keys then come from download rows)."""
    if "id" not in pq.read_schema(path).names:
        return None
    ids = read_table(path, columns=["id"]).column("id").to_pylist()
    keys = draw_keys([str(i) for i in ids], seed)
    u = (keys >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    sel = np.flatnonzero((u >= lo) & (u < hi))
    if not len(sel):
        return keys[sel], []
    texts = read_table(path, columns=["text"]).column("text").take(np_array(sel)).to_pylist()
    return keys[sel], [t or "" for t in texts]


def _eligible_part(
    item: DrawPart,
    lo: float,
    hi: float,
    seed: int,
    min_heuristic: float,
    max_chars: int,
    weights: dict[str, float],
    bias: float,
    with_clean: bool,
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """A download part's documents whose draw position (a seeded hash of the id, in [0, 1)) is
    in [lo, hi) and that pass the reference's fixed rule: clean's default normalisation, rules
    and PII redaction (when the run has a clean stage), then heuristic >= min_heuristic (1 for
    unspaced scripts). With `item.cleaned` (clean ran with that rule) the candidates are read
    there, already cleaned (`_drawn_cleaned`). Returns
    (positions as uint64 keys, cleaned texts, characters read)."""
    part, path = item.index, item.path
    drawn = None
    if with_clean and item.cleaned and item.default_rule:
        drawn = _drawn_by_rule(item, lo, hi, seed)
    elif with_clean and item.cleaned:
        drawn = _drawn_cleaned(item.cleaned, lo, hi, seed)
    if drawn is not None:  # clean's kept rows: already cleaned by the reference's rule
        keys, out = drawn
        return _eligible(keys, out, min_heuristic, max_chars, weights, bias)
    names = pq.read_schema(path).names
    table = read_table(path, columns=["id"] if "id" in names else ["text"])
    n = table.num_rows
    ids = table.column("id").to_pylist() if "id" in names else None
    keys = draw_keys([str(i) for i in ids] if ids else [f"{part}:{r}" for r in range(n)], seed)
    u = (keys >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    sel = np.flatnonzero((u >= lo) & (u < hi))
    if len(sel) and "text" not in table.column_names:  # the text only when a row is drawn
        table = read_table(path, columns=["text"])
    texts = table.column("text").take(np_array(sel)).to_pylist() if len(sel) else []
    if with_clean:
        batch = clean_texts(texts, REFERENCE_CLEAN)
        kept = np.flatnonzero(batch.keep)
        out = [batch.texts[i] for i in kept]
    else:  # no clean stage: the corpus is scored as downloaded, so is the reference
        kept = np.arange(len(texts))
        out = [t or "" for t in texts]
    return _eligible(keys[sel[kept]], out, min_heuristic, max_chars, weights, bias)


def _eligible(
    keys: np.ndarray,
    out: list[str],
    min_heuristic: float,
    max_chars: int,
    weights: dict[str, float],
    bias: float,
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """The cleaned candidates (`keys`, `out`) whose heuristic passes (`_eligible_part`)."""
    stats, share = stats_and_script_share(out, max_chars)
    heur = heuristic_score(stats, weights, bias) if out else np.zeros(0)
    unspaced = share >= UNSPACED_SHARE
    ok = np.where(unspaced, 1.0, heur) >= min_heuristic
    ok &= stats[:, STAT_NAMES.index("length")] > 0  # has a word (length = words / 50)
    out = [t for t, k in zip(out, ok, strict=True) if k]
    chars = np.fromiter((min(len(t), max_chars) for t in out), np.int64, len(out))
    return keys[ok], out, chars


def draw_keys(ids: list[str], seed: int) -> np.ndarray:
    """uint64 [n]: a document's place in the self reference's draw, a seeded hash of its id
    (not of its row: a document keeps its place whatever else is in the corpus)."""
    h = text_keys(ids)
    return splitmix64(h ^ splitmix64(np.array([seed & (2**64 - 1)], np.uint64))[0])


def self_reference(cfg: Any, ctx: Any) -> list[str]:
    """The `self` reference, drawn from the download stage's output before clean's recipe
    thresholds apply: every document that passes the fixed rule (`_eligible_part`), in draw
    order, exact copies once, until reference_max_chars characters (+ the document that crosses
    it). Bounded: each round reads only the draw positions [lo, hi) it has not read, starting
    with REF_OVERSAMPLE x the budget's share of the input and growing until the budget is
    full (REF_OVERSAMPLE, REF_MARGIN); the result does not depend on the rounds, the parts or
    the workers: a draw key orders the documents, every round adds the next keys, and the
    reference is a prefix in key order."""
    source = ctx.inputs.get("download") or ctx.inputs[ctx.upstream]  # by hand: the upstream
    parts = source.parts
    total = sum(ctx.executor.map(_raw_size, parts, desc="quality reference size"))
    budget = cfg.reference_max_chars
    lo, hi = 0.0, min(1.0, REF_OVERSAMPLE * budget / max(total, 1))
    keys, texts, chars = [], [], []
    distinct: set[str] = set()
    got = 0  # characters of the distinct eligible texts read so far
    weights = {**DEFAULT_WEIGHTS, **cfg.heuristic_weights}
    draws = _draw_parts(ctx, parts)
    while True:
        fn = functools.partial(
            _eligible_part,
            lo=lo,
            hi=hi,
            seed=ctx.seed,
            min_heuristic=cfg.reference_min_heuristic,
            max_chars=cfg.max_chars,
            weights=weights,
            bias=cfg.heuristic_bias,
            with_clean="clean" in ctx.inputs,
        )
        for k, t, c in ctx.executor.map(fn, draws, desc="quality reference"):
            keys.append(k)
            texts += t
            chars.append(c)
            for text, n in zip(t, c.tolist(), strict=True):
                if text not in distinct:  # exact copies count once, as in the reference
                    distinct.add(text)
                    got += n
        if hi >= 1.0 or got >= budget:
            break
        # aim at the budget from what the range read so far yielded, growing the range 1.25x
        # to 4x a round (4x when nothing was eligible yet): what the driver holds stays a few
        # budgets even when the estimate is poor
        aim = REF_MARGIN * budget * hi / got if got else 4 * hi
        lo, hi = hi, min(1.0, 4 * hi, max(aim, 1.25 * hi))
    key = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    size = np.concatenate(chars) if chars else np.zeros(0, np.int64)
    out, seen, used = [], set(), 0
    for i in np.argsort(key, kind="stable").tolist():  # ties keep part order: deterministic
        if texts[i] in seen:
            continue
        seen.add(texts[i])
        out.append(texts[i])
        used += int(size[i])
        if used >= budget:
            break
    return out


def reference_texts(cfg: Any, ctx: Any) -> list[str]:
    """The reference documents: drawn from the run (`self`, executor maps) or read. A file or
    builtin reference is normalised and redacted as the self reference is (clean's defaults)
    when the run has a clean stage, so that a corpus document and its copy in the file have
    one text, hence one fold key: the fold model that scores the document never saw it."""
    if cfg.reference == refmod.SELF:
        return self_reference(cfg, ctx)
    texts = refmod.read_reference(cfg.reference, cfg.reference_max_chars, ctx.progress)
    return as_cleaned(texts) if "clean" in ctx.inputs else texts


def as_cleaned(texts: list[str]) -> list[str]:
    """`texts` through clean's default normalisation and PII redaction (no rule drops a
    text: a reference is the user's choice of good text), empty results left out."""
    opts, kinds = REFERENCE_CLEAN.normalize_options, tuple(REFERENCE_CLEAN.redact_pii)
    out = []
    for raw in texts:
        text = normalize_text(raw, opts)[0]
        if kinds:
            text = redact(text, kinds)[0]
        if text.strip():
            out.append(text)
    return out


def fit_texts(cfg: Any, seed: int, texts: list[str]) -> LMResult:
    """Fit the fold LMs on the reference `texts` (the classifiers come after, see
    `fit_coherence`); pure compute, no executor and no log (a task of the stats pass when
    workers score, `fit_task`). A document's fold is a hash of its text, so the model that
    scores a text never saw it, nor any exact copy of it. A too-small `self` reference falls
    back (on_no_spread: heuristic; `fitted` logs it) or stops (error); a too-small
    file/builtin always stops."""
    params = LMParams(
        order=cfg.lm_order,
        num_folds=cfg.lm_folds,
        min_reference_docs=cfg.min_reference_docs,
        max_train_docs=cfg.coherence_train_docs,
        feature_set=cfg.coherence_features,
        detector_keep=cfg.coherence_detector_keep,
        detector_lift=cfg.coherence_detector_lift,
        chain_docs=cfg.coherence_chain_docs,
        folds=cfg.coherence_folds,
        copy_folds=cfg.copy_folds,
        max_chars=cfg.max_chars,
        seed=seed,
    )
    kind = refmod.describe(cfg.reference)
    scorer, ref = fit_lm(texts, text_keys(texts), params, cfg.splice_gate)
    if isinstance(scorer, str):
        where = "quality.reference" if cfg.reference == refmod.SELF else cfg.reference
        if cfg.reference != refmod.SELF or cfg.on_no_spread == "error":
            raise DataError(
                where,
                f"reference {kind} too small to train the LM: {scorer} "
                "(use a larger reference or lower quality.min_reference_docs)",
            )
        return LMResult(None, {"reference": kind, "status": "fallback_heuristic", "why": scorer})
    info = {"reference": kind, "status": "trained", **scorer.info}
    return LMResult(scorer, info, ref, cfg.reference == refmod.SELF)


def workers_score(ctx: Any) -> bool:
    """Whether the scoring pass runs in worker processes (they read the scorer from a file);
    then the fits run in tasks too (`fit_task`, `classifiers_task`)."""
    return ctx.executor.workers > 1 and len(ctx.input_parts) > 1


def fit_inline(ctx: Any, cfg: Any, texts: list[str]) -> LMResult:
    """`fit_texts` in the driver (one worker or one part: everything runs in this process)."""
    return fitted(ctx, fit_texts(cfg, ctx.seed, texts))


def log_reference(cfg: Any, ctx: Any, texts: list[str]) -> None:
    ctx.log.info("[quality] reference %s: %d documents", refmod.describe(cfg.reference), len(texts))


def fitted(ctx: Any, lm: LMResult) -> LMResult:
    """`lm` as the driver gets it, its fallback logged."""
    if lm.info.get("status") == "fallback_heuristic":
        ctx.log.warning("[quality] no LM: %s; using the heuristic score", lm.info["why"])
    return lm


def fit_coherence(lm: LMResult, extra: tuple | None) -> dict[int, Coherence]:
    """Train the classifiers on the reference and return them (inline path)."""
    assert lm.scorer is not None and lm.reference is not None
    fit_classifiers(lm.scorer, lm.reference, None, extra)
    lm.info["classifiers"] = lm.scorer.info["classifiers"]
    return lm.scorer.classifiers


# ---------------------------------------------------------------- the fits as tasks


@dataclass(frozen=True, slots=True)
class FitJob:
    """The fold LMs' fit as the first task of the stats pass (when workers score): the
    reference texts, and the files the scorer (for the scoring workers) and the tokenised
    reference (for the classifiers' fit) go to. Temporary files, not outputs."""

    texts: list[str]
    scorer_file: Path
    ref_file: Path


def fit_job(ctx: Any, texts: list[str]) -> FitJob:
    return FitJob(texts, ctx.out_dir / TMP_LM_FILE, ctx.out_dir / TMP_REF_FILE)


def fit_task(job: FitJob, cfg: Any, seed: int) -> LMResult:
    """`fit_texts` in a worker: the scorer and the reference go to `job`'s files, the driver
    gets the LMResult without them (its info, the files' paths): ~0.4 GB of tables never
    cross a process boundary, and the driver's own CPU stays free."""
    lm = fit_texts(cfg, seed, job.texts)
    if lm.scorer is None or lm.reference is None:
        return lm
    atomic_write_bytes(job.scorer_file, scorer_bytes(lm.scorer))
    toks = lm.reference.tokens
    buf = io.BytesIO()
    surf = {} if toks.surface is None else {"surface": toks.surface}
    np.savez(
        buf, ids=toks.ids, lengths=toks.lengths, script=toks.script, rows=lm.reference.rows, **surf
    )
    atomic_write_bytes(job.ref_file, buf.getvalue())
    return LMResult(None, lm.info, None, lm.is_self, job.scorer_file, job.ref_file)


@dataclass(frozen=True, slots=True)
class ClassifiersJob:
    """The coherence classifiers' fit as the first task of the LM scoring pass: it needs
    the LMs (the scorer file) and the tokenised reference, not the corpus pass."""

    scorer_file: Path
    ref_file: Path
    extra: tuple | None  # the seed set's labelled texts, or None


def classifiers_task(job: ClassifiersJob) -> tuple[dict[int, Coherence], dict[str, Any]]:
    """(classifiers, their report) fitted in a worker. The scorer comes from the per-process
    cache `score_part` reads too; the fit only adds the classifiers to that copy, which the
    features (all the scoring reads) never use."""
    scorer = load_scorer(job.scorer_file)
    with np.load(job.ref_file, allow_pickle=False) as z:
        surf = z["surface"] if "surface" in z.files else None
        ref = Reference(Tokens(z["ids"], z["lengths"], z["script"], surf), z["rows"])
    fit_classifiers(scorer, ref, None, job.extra)
    return dict(scorer.classifiers), scorer.info["classifiers"]


@dataclass(frozen=True, slots=True)
class ScoreJob:
    """Input part `part` at `path`: where its LM features go and its partcols folder."""

    path: Path
    feats_file: Path
    folder: Path
    part: int
    sentences: bool = False  # quality.splice_gate: also save the part's sentence rows


def score_part(item: ScoreJob, scorer: LMScorer | Path, max_chars: int) -> dict[str, Any]:
    """LM columns of every row of one part (`item`: the part, the file for its features, its
    partcols folder). `scorer` is the scorer itself (inline) or the file a worker process
    loads it from (once per process). The features go to the file (the coherence pass reads
    them back), the perplexity, context gain and script to the part's `lm` columns; the driver
    gets counts. A text is scored by the fold model of its text's hash (`text_keys`)."""
    path, feats_file, folder, part = item.path, item.feats_file, item.folder, item.part
    texts = read_table(path, columns=["text"]).column("text").to_pylist()
    if isinstance(scorer, Path):
        scorer = load_scorer(scorer)
    feats, toks = scorer.features_and_tokens([t[:max_chars] for t in texts], text_keys(texts))
    script = toks.script
    sent_rows = 0
    if item.sentences:
        key, doc, weight = copies.sentence_rows(toks)
        partcols.save(folder, part, SENT_GROUP, key=key, doc=doc, weight=weight)
        sent_rows = len(key)
    del toks
    buf = io.BytesIO()
    np.save(buf, feats, allow_pickle=False)
    atomic_write_bytes(feats_file, buf.getvalue())
    has = feats[:, FEATURE_NAMES.index("log_tokens")] > 0
    perplexity = np.where(has, np.exp(-feats[:, 0]), np.nan)
    script = script.astype(np.int8)
    context_gain = np.where(has, feats[:, 1], np.nan)
    partcols.save(
        folder, part, "lm", perplexity=perplexity, context_gain=context_gain, script=script
    )
    scored = ~np.isnan(perplexity)
    ok = partcols.load(folder, part)["scorable"]
    return {
        "per_script": np.bincount(script[scored], minlength=len(SCRIPTS)).astype(np.int64),
        "scorable": int((scored & ok).sum()),
        "n": len(texts),
        "sent_rows": sent_rows,
    }


SENT_GROUP = "sent"  # a part's sentence rows (partcols.load never merges it: not per document)
SPLICE_MAX_ROWS = 1 << 24  # sentence rows the driver holds at once (~0.4 GB with the pairs)


def splice_pass(folder: Path, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """quality.splice_gate's corpus-wide step (quality/copies.py): the sentence rows of every
    part (global document numbers), each document's (den, shared, top), and per part its
    `splice_share` and `splice_gate` columns. Exact up to SPLICE_MAX_ROWS rows in all; above
    that only the sentences whose key falls in the lowest SPLICE_MAX_ROWS / rows of the hash
    space count (a seeded-hash sample of sentences, the same for every worker count)."""
    total = sum(p["sent_rows"] for p in parts)
    sizes = [p["n"] for p in parts]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bound = None
    if total > SPLICE_MAX_ROWS:
        bound = np.uint64(int((SPLICE_MAX_ROWS / total) * 2.0**64) - 1)
    keys, docs, weights = [], [], []
    for i in range(len(parts)):
        with np.load(partcols.group_file(folder, i, SENT_GROUP), allow_pickle=False) as z:
            k, d, w = z["key"], z["doc"], z["weight"]
        if bound is not None:
            m = k <= bound
            k, d, w = k[m], d[m], w[m]
        keys.append(k)
        docs.append(d + starts[i])
        weights.append(w)
        partcols.group_file(folder, i, SENT_GROUP).unlink()
    num = int(starts[-1])
    key = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    doc = np.concatenate(docs) if docs else np.zeros(0, np.int64)
    weight = np.concatenate(weights) if weights else np.zeros(0, np.int64)
    del keys, docs, weights
    den, shared, top = copies.copy_stats(key, doc, weight, num)
    del key, doc, weight
    share = copies.splice_share(den, shared, top)
    gate = copies.splice_gate(den, shared, top)
    for i in range(len(parts)):
        a, b = starts[i], starts[i + 1]
        partcols.save(folder, i, "copy", splice_share=share[a:b], splice_gate=gate[a:b])
    return {
        "sentence_rows": int(total),
        "sampled_share": 1.0 if bound is None else round(SPLICE_MAX_ROWS / total, 6),
        "docs_judged": int((~np.isnan(share)).sum()),
        "docs_gated": int((gate < 1.0).sum()),
        "docs_gated_below_half": int((gate < 0.5).sum()),
        "splice_ok": copies.SPLICE_OK,
        "splice_max": copies.SPLICE_MAX,
        "unshared_max": copies.UNSHARED_MAX,
        "max_holders": copies.MAX_HOLDERS,
    }


@dataclass(frozen=True, slots=True)
class CoherenceJob:
    """Part `part` of the partcols `folder`, whose LM features are in `feats_file`."""

    feats_file: Path
    folder: Path
    part: int


def _coherence_part(item: CoherenceJob, classifiers: dict) -> int:
    feats_file, folder, part = item.feats_file, item.folder, item.part
    cols = partcols.load(folder, part)
    coh = coherence_of(classifiers, np.load(feats_file, allow_pickle=False), cols["script"])
    if "splice_gate" in cols:  # quality.splice_gate: NaN (no LM score) stays NaN
        coh = coh * cols["splice_gate"]
    partcols.save(folder, part, "coh", coherence=coh)
    return len(coh)


def _score_or_fit(item: ScoreJob | ClassifiersJob, scorer: Path, max_chars: int) -> Any:
    """A task of the LM scoring pass when workers score: the classifiers' fit (item 0) or
    one part's `score_part`."""
    if isinstance(item, ClassifiersJob):
        return classifiers_task(item)
    return score_part(item, scorer, max_chars)


def score_all(
    ctx: Any,
    lm: LMResult,
    extra: tuple | None,
    max_chars: int,
    folder: Path,
    splice_gate: bool = False,
) -> dict[str, Any]:
    """score_part over every input part, the classifiers, then coherence per part from the
    saved features: the LM columns stay in the parts' files under `folder`, the driver never
    holds a per-document array. Returns how many documents have a perplexity, per script
    ({script index: count}) and among scorable ones (`scorable`). When workers score
    (`fit_task` wrote the scorer's file) they read the scorer from that temporary file
    (deleted afterwards) instead of unpickling ~100 MB of tables per part, and the
    classifiers' fit (they need the reference and the LMs, not the corpus pass) is the
    pass's first task; inline, it runs after the pass. With `splice_gate` the pass also
    saves each part's sentence rows and `splice_pass` runs before coherence."""
    assert lm.has_lm
    feats_dir = ctx.out_dir / FEATS_DIR
    feats_dir.mkdir(parents=True, exist_ok=True)
    items = [
        ScoreJob(p, feats_dir / f"part-{i:05d}.npy", folder, i, splice_gate)
        for i, p in enumerate(ctx.input_parts)
    ]
    tmp = lm.scorer_file
    try:
        if tmp is not None:
            assert lm.ref_file is not None
            fn = functools.partial(_score_or_fit, scorer=tmp, max_chars=max_chars)
            job = ClassifiersJob(tmp, lm.ref_file, extra)
            got = ctx.executor.map(fn, [job, *items], desc="quality LM score")
            (classifiers, lm.info["classifiers"]), parts = got[0], got[1:]
            tmp.unlink(missing_ok=True)
        else:
            fn = functools.partial(score_part, scorer=lm.scorer, max_chars=max_chars)
            parts = ctx.executor.map(fn, items, desc="quality LM score")
            classifiers = fit_coherence(lm, extra)
        if splice_gate:
            lm.info["splice"] = splice_pass(folder, parts)
        fn2 = functools.partial(_coherence_part, classifiers=classifiers)
        ctx.executor.map(
            fn2,
            [CoherenceJob(it.feats_file, it.folder, it.part) for it in items],
            desc="quality coherence",
        )
    finally:
        for f in (tmp, lm.ref_file):
            if f is not None:
                f.unlink(missing_ok=True)
        shutil.rmtree(feats_dir, ignore_errors=True)  # temporary, not stage outputs
    per_script = np.sum([p["per_script"] for p in parts], axis=0)
    return {
        "per_script": {s: int(c) for s, c in enumerate(per_script)},
        "scorable": sum(p["scorable"] for p in parts),
    }


def assign_buckets(perplexity: np.ndarray, script: np.ndarray, cuts: dict) -> np.ndarray:
    """CCNet buckets per script: head (< p30), middle (< p60), tail; `all` without a score.
    `cuts` = {script index: (p30, p60)} over the whole corpus (exact, see parttasks)."""
    out = np.full(len(perplexity), "all", dtype=object)
    for s, (p30, p60) in cuts.items():
        m = (script == s) & ~np.isnan(perplexity)
        out[m] = np.where(
            perplexity[m] < p30, "head", np.where(perplexity[m] < p60, "middle", "tail")
        )
    return out


def cut_report(cuts: dict) -> dict:
    return {
        SCRIPTS[s]: [round(float(p30), 1), round(float(p60), 1)] for s, (p30, p60) in cuts.items()
    }


PPL_BINS, PPL_RANGE = 25, (0.0, 5.0)  # log10 perplexity


def perplexity_counts(perplexity: np.ndarray) -> np.ndarray:
    """One part's counts in 25 log10-spaced bins over [1, 10^5] (outside: the end bins)."""
    p = perplexity[~np.isnan(perplexity)]
    logs = np.clip(np.log10(np.maximum(p, 1.0)), 0.0, 4.999)
    return np.histogram(logs, bins=PPL_BINS, range=PPL_RANGE)[0]


def perplexity_histogram(counts: np.ndarray, median: float | None, threshold: float | None) -> dict:
    """The report's histogram from the parts' summed `perplexity_counts` and the median."""
    edges = np.histogram(np.zeros(0), bins=PPL_BINS, range=PPL_RANGE)[1]
    return {
        "edges": [round(float(10**e), 1) for e in edges],
        "counts": [int(c) for c in counts],
        "threshold": threshold,
        "median": None if median is None else round(median, 1),
    }


def per_script_counts(cols: dict[str, np.ndarray], keep: np.ndarray) -> np.ndarray:
    """int64 [scripts, 3]: scorable documents, kept, LM-scored, per script (one part)."""
    out = np.zeros((len(SCRIPTS), 3), np.int64)
    ok = cols["scorable"]
    for s in range(len(SCRIPTS)):
        m = (cols["script"] == s) & ok
        out[s] = m.sum(), keep[m].sum(), (~np.isnan(cols["coherence"][m])).sum()
    return out


def per_script(counts: np.ndarray) -> dict:
    """Documents, kept share and how many the LM scored, per script group."""
    out = {}
    for s, name in enumerate(SCRIPTS):
        docs, kept, scored = (int(c) for c in counts[s])
        if docs:
            out[name] = {
                "docs": docs,
                "kept": kept,
                "kept_share": round(kept / docs, 4),
                "lm_scored": scored,
            }
    return out
