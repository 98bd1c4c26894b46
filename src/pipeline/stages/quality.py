"""quality: score every document in [0, 1] and drop the low ones (`quality` column on all rows).

Heuristic score = sigmoid of a linear combination of document statistics. Coherence = a
classifier over features of a reference n-gram LM (k folds, so nothing scores itself), trained
on reference documents against seeded corruptions of them. Default `quality` = min(heuristic,
coherence). The older pseudo-label classifier (hashed 1+2-grams) stays as `score: classifier`.
Over 400 lines: the shell of three scorers that just landed (issue 13); the classifier's fitting
is in quality/train.py, the LM's in quality/lmstage.py; the next split is the scorers' reports.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from pipeline.config import bounded, input_path, recipe_key, setting, with_keys
from pipeline.errors import DataError, RecipeError
from pipeline.io import atomic_write_bytes, read_table, write_kept_and_rejected
from pipeline.quality import lmstage, pseudo, select
from pipeline.quality import reference as refmod
from pipeline.quality.features import (
    DEFAULT_BIAS,
    DEFAULT_WEIGHTS,
    HASH_SEED,
    STAT_NAMES,
    hashed_features,
    heuristic_score,
    stats_matrix,
)
from pipeline.quality.logreg import Model, load_model, model_bytes, roc_auc
from pipeline.quality.ngram import char_script_share
from pipeline.quality.sgd import SgdParams
from pipeline.quality.train import featurise, fit_classifier, read_seed_set, write_texts
from pipeline.stage import Stage, StageContext, StageResult

MODEL_FILE = "model.npz"
CLASSIFIER_FEATS_DIR = "classifier-features"  # temporary: per-part training rows
# the setting behind the score threshold of each keep_rule (pareto draws, it has no threshold)
RULE_SETTING = {
    "min_score": "min_score",
    "keep_fraction": "keep_fraction",
    "pareto": "pareto_alpha",
}
# Toy junk kinds a quality score is meant to catch; dups are dedup's job, pii/lorem clean's.
REASONS = ("low_quality", "no_words", "high_perplexity")  # why a row was dropped, by code
UNSPACED_SHARE = 0.3  # a document this much Han/Kana/Thai/... is scored without the heuristic
QUALITY_JUNK = ("junk:html", "junk:spam", "junk:repeated", "junk:symbols", "junk:short")


def _weights() -> dict[str, float]:
    return dict(DEFAULT_WEIGHTS)  # keys left out of a recipe keep these weights


@dataclass(frozen=True)
class QualityConfig:
    # combined = min(heuristic, coherence); classifier/mean: the pseudo-label classifier
    score: Literal["combined", "coherence", "heuristic", "classifier", "mean"] = "combined"
    # LM reference: self | a builtin corpus | a .jsonl/.parquet/.txt file
    reference: str = input_path("self")
    reference_min_heuristic: float = bounded(0.5, ge=0.0, le=1.0)  # self: heuristic >= this
    reference_max_chars: int = bounded(8_000_000, ge=1000)  # reference sample size (~2M tokens)
    min_reference_docs: int = bounded(20, ge=2)  # per script; fewer: that script has no LM score
    lm_order: int = bounded(4, ge=2, le=6)  # n-gram order
    lm_folds: int = bounded(4, ge=2, le=10)  # k: a document is scored by the model without its fold
    coherence_train_docs: int = bounded(4_000, ge=4)  # positives + negatives, seeded sample
    max_perplexity: float | None = None  # also drop documents above this LM perplexity
    perplexity_buckets: bool = False  # add CCNet's head/middle/tail `lm_bucket` column
    keep_rule: Literal["min_score", "keep_fraction", "pareto"] = "min_score"  # pareto: GPT-3 style
    min_score: float = bounded(0.5, ge=0.0, le=1.0)  # min_score: keep documents scoring >= this
    keep_fraction: float = bounded(0.8, gt=0.0, le=1.0)  # keep_fraction: keep this best share
    pareto_alpha: float = bounded(9.0, gt=0.0)  # pareto: keep if pareto(alpha) > 1 - score
    heuristic_weights: dict[str, float] = field(default_factory=_weights)  # per statistic, [0, 1]
    heuristic_bias: float = DEFAULT_BIAS  # heuristic = sigmoid(bias + weights . statistics)
    pseudo_label_fraction: float = bounded(0.2, gt=0.0, le=0.5)  # heuristic top/bottom share
    pseudo_bad_below: float = bounded(0.5, ge=0.0, le=1.0)  # pseudo-bad also needs heuristic < this
    pseudo_good_above: float = bounded(0.5, ge=0.0, le=1.0)  # pseudo-good also needs >= this
    seed_set_path: str | None = None  # JSONL of {"text", "label": good|bad} added to training
    clean_rejects_as_bad: bool = True  # documents the clean stage rejected join the bad class
    model_path: str | None = None  # a model.npz from an earlier run: reuse it, train nothing
    hash_bits: int = bounded(18, ge=8, le=24)  # hashed feature space = 2^hash_bits buckets
    l2: float = bounded(1e-2, ge=0.0)  # L2 penalty on the weights (loss is a mean over docs)
    epochs: int = bounded(10, ge=1)  # mini-batch Adam passes over the training sample, and
    min_steps: int = bounded(200, ge=1)  # more passes until this many steps (small samples)
    batch_size: int = bounded(256, ge=1)  # documents per Adam step
    learning_rate: float = bounded(0.05, gt=0.0)  # Adam step size (to 0 over the 2nd half)
    holdout_fraction: float = bounded(0.2, ge=0.0, lt=1.0)  # pseudo-labelled share held out
    min_train_docs: int = bounded(20, ge=1)  # per class; fewer -> on_no_spread applies
    max_train_docs: int = bounded(200_000, ge=2)  # cap on pseudo-labelled docs (seeded sample)
    # classifier sample in chars: a third each for pseudo-good, pseudo-bad and clean's rejects;
    # its features go to per-part files, the driver holds one file's at a time while training
    train_max_chars: int = bounded(30_000_000, ge=1000)
    on_no_spread: Literal["heuristic", "error"] = "heuristic"  # no pseudo labels: fall back/stop
    max_chars: int = bounded(100_000, ge=100)  # statistics and features read this many chars/doc

    def validate(self, path: str) -> None:
        if self.pseudo_bad_below > self.pseudo_good_above:
            raise RecipeError(
                f"{path}.pseudo_bad_below",
                f"must be <= pseudo_good_above "
                f"({self.pseudo_good_above}), got {self.pseudo_bad_below}",
            )
        unknown = sorted(set(self.heuristic_weights) - set(STAT_NAMES))
        if unknown:
            raise RecipeError(
                f"{path}.heuristic_weights.{unknown[0]}",
                f"unknown statistic; expected one of {', '.join(STAT_NAMES)}",
            )
        why = refmod.check(self.reference)
        if why:
            raise RecipeError(f"{path}.reference", why)
        if self.model_path and self.score not in ("classifier", "mean"):
            raise RecipeError(
                f"{path}.model_path",
                f"a saved pseudo-label model needs score: classifier or mean, got {self.score}",
            )
        for key in ("seed_set_path", "model_path"):
            value = getattr(self, key)
            if value is not None and not Path(value).is_file():
                raise RecipeError(f"{path}.{key}", f"file {value!r} not found")


# ---------------------------------------------------------------- per-part work (map)


def _scan_part(path: Path, max_chars: int, weights: dict[str, float], bias: float) -> tuple:
    """(heuristic float64 [n], no_words bool [n], hidden labels or None, chars int64 [n],
    unspaced bool [n]: mostly written in a script without spaces). The statistics stay in the
    task: the driver keeps one score per document, not k statistics."""
    table = read_table(path)
    texts = table.column("text").to_pylist()
    heur = heuristic_score(stats_matrix(texts, max_chars), weights, bias)  # row-wise: exact
    no_words = np.array([not t[:max_chars].split() for t in texts], bool)
    labels = table.column("label").to_pylist() if "label" in table.column_names else None
    chars = np.fromiter((min(len(t), max_chars) for t in texts), np.int64, count=len(texts))
    unspaced = np.array([char_script_share(t) >= UNSPACED_SHARE for t in texts], bool)
    return heur, no_words, labels, chars, unspaced


def _score_part(path: Path, model: Model, max_chars: int) -> np.ndarray:
    texts = read_table(path, columns=["text"]).column("text").to_pylist()
    X = hashed_features(texts, model.meta["dims"], HASH_SEED, max_chars)
    return model.predict(X, stats_matrix(texts, max_chars))


def _write_part(item: tuple, out_dir: Path) -> dict[str, Any]:
    """Write kept rows to part-i and dropped rows to rejected/part-i (input columns + quality)."""
    index, path, scores, keep, reason, example_rows, columns = item
    table = read_table(path)
    for name in ("quality", "reasons", *columns):  # a re-scored input: replace, never duplicate
        if name in table.column_names:
            table = table.drop_columns([name])
    table = table.append_column("quality", pa.array(scores.astype(np.float32), pa.float32()))
    for name, values in columns.items():
        if values.dtype == object:
            table = table.append_column(name, pa.array(values.tolist(), pa.string()))
        else:
            table = table.append_column(name, pa.array(values.astype(np.float32), pa.float32()))
    reasons = [[REASONS[r]] for r in reason[~keep].tolist()]
    outputs, counts = write_kept_and_rejected(out_dir, index, table, keep, reasons)
    # every reason reported, even at 0
    counts.dropped = {"high_perplexity": 0, "low_quality": 0, "no_words": 0, **counts.dropped}
    rows = table.take(pa.array(np.asarray(example_rows, np.int64))).select(["id", "text"])
    examples = {
        int(r): (rec["id"], rec["text"][:100])
        for r, rec in zip(example_rows, rows.to_pylist(), strict=True)
    }
    return {"outputs": outputs, "counts": counts, "examples": examples}


# ---------------------------------------------------------------- training (reduce)


def _train_or_load(
    cfg: QualityConfig,
    ctx: StageContext,
    heur: np.ndarray,
    scorable: np.ndarray,
    chars: np.ndarray,
    offsets: np.ndarray,
) -> tuple[Model | None, dict]:
    """The classifier (loaded, trained, or None with the documented heuristic fallback).

    Training rows' features are computed in tasks, one feature file per part under the stage's
    temp folder (deleted afterwards), and the driver trains over them one file at a time."""
    if cfg.model_path:
        model = load_model(Path(cfg.model_path))
        if model.meta.get("stat_names") != list(STAT_NAMES):
            raise DataError(
                cfg.model_path,
                f"model statistics {model.meta.get('stat_names')} "
                f"differ from this version's {list(STAT_NAMES)}",
            )
        return model, {"status": "loaded", "path": cfg.model_path}
    feats = ctx.out_dir / CLASSIFIER_FEATS_DIR
    try:
        return _train(cfg, ctx, heur, scorable, chars, offsets, feats)
    finally:
        shutil.rmtree(feats, ignore_errors=True)  # temporary, not stage outputs


def _train(
    cfg: QualityConfig,
    ctx: StageContext,
    heur: np.ndarray,
    scorable: np.ndarray,
    chars: np.ndarray,
    offsets: np.ndarray,
    feats: Path,
) -> tuple[Model | None, dict]:
    seed_file, rejects, counts = _labelled_extras(cfg, ctx, feats)
    bad = sum(len(r[1]) for r in rejects) + sum(s["bad"] for s in seed_file)

    def parts() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for lo, hi in zip(offsets[:-1], offsets[1:], strict=True):
            yield heur[lo:hi], scorable[lo:hi], chars[lo:hi]

    try:
        pl = pseudo.pseudo_labels(
            parts,
            cfg.pseudo_label_fraction,
            cfg.pseudo_bad_below,
            cfg.pseudo_good_above,
            cfg.min_train_docs,
            cfg.max_train_docs,
            cfg.holdout_fraction,
            ctx.seed,
            extra=(bad, sum(s["good"] for s in seed_file)),
            class_chars=cfg.train_max_chars // 3,
        )
    except select.NoSpread as exc:
        if cfg.on_no_spread == "error":
            raise DataError(
                f"{ctx.upstream} output",
                f"cannot bootstrap pseudo labels: {exc} "
                "(set quality.on_no_spread: heuristic to fall back)",
            ) from None
        ctx.log.warning("[quality] no classifier: %s; using the heuristic score", exc)
        return None, {"status": "fallback_heuristic", "why": str(exc)}
    part_of = np.searchsorted(offsets, pl.rows, side="right") - 1
    labelled = []
    for i, p in enumerate(ctx.input_parts):
        m = part_of == i
        if m.any():
            labelled.append((p, pl.rows[m] - offsets[i], pl.y[m], pl.holdout[m]))
    # file k holds pseudo-labelled part k and rejected part k: mini-batches see both classes
    # (a file of rejects alone would make every step of it a step towards "bad")
    items = []
    for k in range(max(len(labelled), len(rejects))):
        sources = labelled[k : k + 1]
        for p, rows in rejects[k : k + 1]:
            no = np.zeros(len(rows), bool)
            sources.append((p, rows, no.astype(np.int8), no))
        items.append((sources, feats / f"part-{k:05d}.npz"))
    dims = 1 << cfg.hash_bits
    fn = functools.partial(featurise, dims=dims, max_chars=cfg.max_chars)
    summaries = ctx.executor.map(fn, items, desc="quality features") if items else []
    params = SgdParams(
        cfg.l2, cfg.epochs, cfg.min_steps, cfg.batch_size, cfg.learning_rate, ctx.seed
    )
    model, info = fit_classifier(summaries + seed_file, pl, params, dims, cfg.max_chars)
    return model, {**info, **counts}


def _labelled_extras(
    cfg: QualityConfig, ctx: StageContext, feats: Path
) -> tuple[list[dict], list[tuple[Path, np.ndarray]], dict]:
    """The seed set's feature file (its summary), and the (part, local rows) of documents the
    clean stage of this run rejected, as bad examples (after clean, the corpus itself often has
    no pseudo-bad documents left); their features are computed with the pseudo-labelled ones."""
    dims = 1 << cfg.hash_bits
    files: list[dict] = []
    counts = {"seed_set_docs": 0, "clean_reject_docs": 0}
    if cfg.seed_set_path:  # a labelled seed set is small: featurised here
        texts, y = read_seed_set(cfg.seed_set_path, cfg.max_chars)
        no = np.zeros(len(y), bool)
        files.append(write_texts(feats / "seed.npz", texts, y, no, dims, cfg.max_chars))
        counts["seed_set_docs"] = len(texts)
    rejects: list[tuple[Path, np.ndarray]] = []
    clean = ctx.inputs.get("clean")  # present when the run has a clean stage
    if cfg.clean_rejects_as_bad and clean is not None:
        budget = cfg.train_max_chars // 3
        rejects = _reject_rows(list(clean.under("rejected")), cfg.max_chars, budget)
        counts["clean_reject_docs"] = sum(len(rows) for _, rows in rejects)
    return files, rejects, counts


def _reject_rows(parts: list[Path], max_chars: int, budget: int) -> list[tuple[Path, np.ndarray]]:
    """(part, local rows) of clean's rejects with words, in part order, until they hold
    `budget` characters: the driver reads one part's text column at a time and keeps indices;
    the features are computed in tasks."""
    items, used = [], 0
    for part in parts:
        if used >= budget:
            break
        col = read_table(part, columns=["text"]).column("text").to_pylist()
        rows = []
        for i, t in enumerate(col):
            size = min(len(t), max_chars)
            if not t[:max_chars].split():
                continue
            if used + size > budget and (used or rows):
                used = budget
                break
            rows.append(i)
            used += size
        if rows:
            items.append((part, np.array(rows, np.int64)))
    return items


def _label_auc(labels: list[str] | None, scores: dict[str, np.ndarray]) -> dict | None:
    """ROC-AUC of each score on hidden labels (`good` vs `junk:*`), when the input has them."""
    if labels is None:
        return None
    lab = np.array(labels, dtype=object)
    good = lab == "good"
    target = good | np.isin(lab, QUALITY_JUNK)
    out: dict[str, Any] = {"junk_kinds": list(QUALITY_JUNK), "docs": int(target.sum())}
    for name, s in scores.items():
        auc = roc_auc(s[target], good[target])
        out[f"auc_{name}"] = None if auc is None else round(auc, 4)
        auc_all = roc_auc(s, good)
        out[f"auc_{name}_all_junk"] = None if auc_all is None else round(auc_all, 4)
    return out


@dataclass
class _Scored:
    offsets: np.ndarray  # int64 [num_parts + 1]: global row range of each part
    scorable: np.ndarray  # bool [n]: has at least one word
    labels: list[str] | None  # hidden labels (toy corpus), when every part has them
    scores: dict[str, np.ndarray]  # heuristic, combined (+ coherence, classifier, mean): [n]
    model: Model | None
    info: dict[str, Any]  # what happened to the classifier, for the report
    lm: dict[str, np.ndarray] = field(default_factory=dict)  # perplexity, context_gain, script
    lm_info: dict[str, Any] = field(default_factory=dict)


def _score(cfg: QualityConfig, ctx: StageContext, parts: list[Path]) -> _Scored:
    weights = {**DEFAULT_WEIGHTS, **cfg.heuristic_weights}
    fn = functools.partial(
        _scan_part, max_chars=cfg.max_chars, weights=weights, bias=cfg.heuristic_bias
    )
    scans = ctx.executor.map(fn, parts, desc="quality stats")
    offsets = np.concatenate([[0], np.cumsum([len(s[1]) for s in scans])]).astype(np.int64)
    heur = np.concatenate([s[0] for s in scans])
    scorable = ~np.concatenate([s[1] for s in scans])
    labels = None if any(s[2] is None for s in scans) else [x for s in scans for x in s[2]]
    chars = np.concatenate([s[3] for s in scans])
    unspaced = np.concatenate([s[4] for s in scans])
    scores = {"heuristic": heur}
    # the heuristic counts whitespace words and English stop words: meaningless for Chinese or
    # Japanese, so those documents join the reference and get quality = coherence alone
    heur_lm = np.where(unspaced, 1.0, heur)
    lm_cols: dict[str, np.ndarray] = {}
    lm_info: dict[str, Any] = {"status": "not_used"}
    if cfg.score in ("combined", "coherence") or cfg.max_perplexity or cfg.perplexity_buckets:
        # the seed set teaches coherence too; clean's rejects do not (they are short or
        # boilerplate, not incoherent, and would teach the classifier a domain)
        extra = read_seed_set(cfg.seed_set_path, cfg.max_chars) if cfg.seed_set_path else None
        lm = lmstage.fit_reference(cfg, ctx, heur_lm, scorable, chars, offsets)
        if lm.scorer is not None:
            lm_cols = lmstage.score_all(ctx, lm, offsets, cfg.max_chars, extra)
            coh = np.where(np.isnan(lm_cols["coherence"]), heur_lm, lm_cols["coherence"])
            scores["coherence"] = coh
            # the weakest link: a document must pass both (salad passes the heuristic, spam
            # and boilerplate pass coherence); a script without an LM gets the heuristic
            scores["combined"] = np.minimum(heur_lm, coh)
        else:  # no LM: the heuristic, which does not judge unspaced scripts (CCNet's "all")
            scores["combined"] = heur_lm
        lm_info = {**lm.info, "heuristic_not_applied_unspaced_docs": int(unspaced.sum())}
    model, info = None, {"status": "not_used"}
    if cfg.score in ("classifier", "mean"):
        model, info = _train_or_load(cfg, ctx, heur, scorable, chars, offsets)
    if model is not None:
        fn = functools.partial(_score_part, model=model, max_chars=cfg.max_chars)
        scores["classifier"] = np.concatenate(ctx.executor.map(fn, parts, desc="quality score"))
        scores["mean"] = (scores["classifier"] + heur) / 2.0
    return _Scored(offsets, scorable, labels, scores, model, info, lm_cols, lm_info)


def _columns(sc: _Scored, cfg: QualityConfig) -> tuple[dict[str, np.ndarray], dict]:
    """Component columns written next to `quality` (float32; lm_bucket is a string)."""
    cols = {"quality_heuristic": sc.scores["heuristic"]}
    extra: dict[str, Any] = {}
    if sc.lm:
        cols["quality_coherence"] = sc.lm["coherence"]  # NaN: no LM for the document's script
        cols["perplexity"] = sc.lm["perplexity"]
        cols["context_gain"] = sc.lm["context_gain"]
        if cfg.perplexity_buckets:
            cols["lm_bucket"], extra["bucket_cutoffs_p30_p60"] = lmstage.buckets(
                sc.lm["perplexity"], sc.lm["script"]
            )
    if "classifier" in sc.scores:
        cols["quality_classifier"] = sc.scores["classifier"]
    return cols, extra


def _write(
    ctx: StageContext,
    parts: list[Path],
    sc: _Scored,
    final: np.ndarray,
    keep: np.ndarray,
    reason: np.ndarray,
    deciles: list[tuple[int, int]],
    columns: dict[str, np.ndarray],
) -> tuple[list[dict], dict]:
    """Write every part; returns the per-part results and {global row: (id, text[:100])}."""
    items = []
    for i, p in enumerate(parts):
        lo, hi = sc.offsets[i], sc.offsets[i + 1]
        rows = [r - lo for _, r in deciles if lo <= r < hi]
        cols = {k: v[lo:hi] for k, v in columns.items()}
        items.append((i, p, final[lo:hi], keep[lo:hi], reason[lo:hi], rows, cols))
    fn = functools.partial(_write_part, out_dir=ctx.out_dir)
    written = ctx.executor.map(fn, items, desc="quality write")
    examples = {}
    for w, lo in zip(written, sc.offsets[:-1], strict=True):
        examples.update({int(lo) + r: v for r, v in w["examples"].items()})
    return written, examples


def _lm_report(sc: _Scored, cfg: QualityConfig, keep: np.ndarray, extra: dict) -> dict:
    echoed = {"reference": "reference", "order": "lm_order", "folds": "lm_folds"}
    out: dict[str, Any] = {"lm": with_keys(sc.lm_info, cfg, echoed)}
    if sc.lm:
        out["perplexity_histogram"] = {
            **lmstage.perplexity_histogram(sc.lm["perplexity"][sc.scorable], cfg.max_perplexity),
            "key": recipe_key(cfg, "max_perplexity"),
            "direction": "max",
        }
        out["per_script"] = lmstage.per_script(sc.lm, sc.scorable, keep)
        out.update(extra)
    if "coherence" in sc.scores:
        out["coherence_histogram"] = select.histogram(sc.scores["coherence"][sc.scorable], None)
    return out


def run(cfg: QualityConfig, ctx: StageContext) -> StageResult:
    parts = list(ctx.input_parts)
    if not parts:
        raise DataError(ctx.upstream or "quality", "no input parts to score")
    sc = _score(cfg, ctx, parts)
    used = cfg.score if cfg.score in sc.scores else "heuristic"  # no model: heuristic fallback
    ok = sc.scorable
    final = np.where(ok, sc.scores[used], 0.0)
    keep, threshold = select.keep_mask(
        cfg.keep_rule, final, ok, cfg.min_score, cfg.keep_fraction, cfg.pareto_alpha, ctx.seed
    )
    reason = np.where(ok, 0, 1).astype(np.int8)  # codes into REASONS: 1 byte per document
    if cfg.max_perplexity is not None and sc.lm:
        high = ok & keep & (sc.lm["perplexity"] > cfg.max_perplexity)
        keep &= ~high
        reason[high] = 2
    deciles = select.decile_rows(final, ok)
    columns, extra = _columns(sc, cfg)
    written, examples = _write(ctx, parts, sc, final, keep, reason, deciles, columns)
    outputs = [o for w in written for o in w["outputs"]]
    if sc.model is not None and not cfg.model_path:
        atomic_write_bytes(ctx.out_dir / MODEL_FILE, model_bytes(sc.model))
        outputs.append(MODEL_FILE)
        sc.info["model_file"] = MODEL_FILE
    stats_out = {
        **setting(cfg, "score", value=used),
        **setting(cfg, "keep_rule"),
        **setting(cfg, RULE_SETTING[cfg.keep_rule], "threshold", value=threshold),
        **setting(cfg, "max_perplexity"),
        "score_mean": round(float(final[ok].mean()), 4) if ok.any() else None,
        "score_histogram": {
            **select.histogram(final[ok], threshold),
            "key": recipe_key(cfg, RULE_SETTING[cfg.keep_rule]),
        },
        "heuristic_histogram": select.histogram(sc.scores["heuristic"][ok], None),
        **_lm_report(sc, cfg, keep, extra),
        "decile_examples": [
            {
                "decile": d,
                "score": round(float(final[r]), 4),
                "id": examples[r][0],
                "text": examples[r][1],
            }
            for d, r in deciles
        ],
        "classifier": sc.info,
    }
    for key in ("status", "holdout_agreement"):  # flat copies for `pipeline report`'s table
        if key in sc.info:
            stats_out[f"classifier_{key}"] = sc.info[key]
    if "status" in sc.lm_info:
        stats_out["lm_status"] = sc.lm_info["status"]
    label_auc = _label_auc(sc.labels, sc.scores)
    if label_auc is not None:
        stats_out["hidden_label_auc"] = label_auc
        for name in sc.scores:
            stats_out[f"hidden_label_auc_{name}"] = label_auc[f"auc_{name}"]
    return StageResult(outputs=outputs, stats=stats_out, counts=[w["counts"] for w in written])


# clean's rejects join the bad class when the run has a clean stage (clean_rejects_as_bad)
STAGE = Stage("quality", QualityConfig, run, version="2", needs=("download",), uses=("clean",))
