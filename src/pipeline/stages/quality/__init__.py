"""quality: score every document in [0, 1] and drop the low ones (`quality` column on all rows).

Heuristic score = sigmoid of a linear combination of document statistics. Coherence = a
classifier over features of a reference n-gram LM (k folds, so nothing scores itself), trained
on reference documents against seeded corruptions of them. Default `quality` = min(heuristic,
coherence). The older pseudo-label classifier (hashed 1+2-grams) stays as `score: classifier`.
The shell of three scorers. Their steps live next to it in stages/quality/: the settings in
config.py, the LM's steps in lm.py, the classifier's in classifier.py (fitting: quality/train.py,
quality/sgd.py), the exact global keep rules in parttasks.py (quality/rank.py), the write task in
write.py, the per-part score columns in partcols.py; the algorithms are in pipeline.quality.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.config import recipe_key, setting, with_keys
from pipeline.errors import DataError
from pipeline.io import atomic_write_bytes
from pipeline.parts import read_table
from pipeline.quality.features import (
    DEFAULT_WEIGHTS,
    HASH_SEED,
    STAT_NAMES,
    hashed_features,
    heuristic_score,
    stats_and_script_share,
    stats_matrix,
)
from pipeline.quality.logreg import Model, model_bytes, roc_auc
from pipeline.stage import Stage, StageContext, StageResult
from pipeline.stages.quality import classifier, external, lm, partcols, parttasks, write
from pipeline.stages.quality.config import QualityConfig

MODEL_FILE = "model.npz"
# the setting behind the score threshold of each keep_rule (pareto draws, it has no threshold)
RULE_SETTING = {
    "min_score": "min_score",
    "keep_fraction": "keep_fraction",
    "pareto": "pareto_alpha",
}
# Toy junk kinds a quality score is meant to catch; dups are dedup's job, pii/lorem clean's.
UNSPACED_SHARE = lm.UNSPACED_SHARE  # this much Han/Kana/Thai/...: no heuristic score


# ---------------------------------------------------------------- per-part work (map)


@dataclass(frozen=True, slots=True)
class ScanPart:
    """Input part `index` at `path`: one stats or classifier-score task."""

    index: int
    path: Path


def _scan_part(
    item: ScanPart, folder: Path, max_chars: int, weights: dict[str, float], bias: float
) -> dict[str, Any]:
    """Statistics of one part: the heuristic score, scorable (has words), unspaced (mostly a
    script without spaces), characters read and the hidden label codes go to the part's `scan`
    columns (the statistics stay in the task); the driver gets counts."""
    part, path = item.index, item.path
    table = read_table(path)
    texts = table.column("text").to_pylist()
    stats, share = stats_and_script_share(texts, max_chars)
    heur = heuristic_score(stats, weights, bias)  # row-wise: exact
    scorable = stats[:, STAT_NAMES.index("length")] > 0  # has a word (length = words / 50)
    unspaced = share >= UNSPACED_SHARE
    chars = np.fromiter((min(len(t), max_chars) for t in texts), np.int64, len(texts))
    cols = {"heuristic": heur, "scorable": scorable, "unspaced": unspaced, "chars": chars}
    has_labels = "label" in table.column_names
    if has_labels:
        cols["labels"] = parttasks.label_codes(table.column("label").to_pylist())
    partcols.save(folder, part, "scan", **cols)
    return {
        "n": len(texts),
        "ok": int(scorable.sum()),
        "unspaced": int(unspaced.sum()),
        "has_labels": has_labels,
    }


def _scan_or_fit(item: ScanPart | lm.FitJob, scan: Any, cfg: QualityConfig, seed: int) -> Any:
    """A task of the stats pass when workers score: the LM fit (item 0) or one part's scan."""
    if isinstance(item, lm.FitJob):
        return lm.fit_task(item, cfg, seed)
    return scan(item)


def _scan_items(parts: list[Path]) -> list[ScanPart]:
    return [ScanPart(i, p) for i, p in enumerate(parts)]


def _score_part(item: ScanPart, model: Model, max_chars: int, folder: Path) -> int:
    part, path = item.index, item.path
    texts = read_table(path, columns=["text"]).column("text").to_pylist()
    X = hashed_features(texts, model.meta["dims"], HASH_SEED, max_chars)
    partcols.save(folder, part, "clf", classifier=model.predict(X, stats_matrix(texts, max_chars)))
    return len(texts)


# ---------------------------------------------------------------- training (reduce)


def _auc_part(part: int, plan: parttasks.Plan) -> tuple[dict[str, np.ndarray], np.ndarray]:
    cols = partcols.load(plan.folder, part)
    return parttasks.part_scores(cols, plan), cols["labels"]


def _label_auc(ctx: StageContext, sc: _Scored) -> dict | None:
    """ROC-AUC of each score on hidden labels (`good` vs `junk:*`), when the input has them:
    exact (Mann-Whitney) over the first parts holding up to AUC_MAX_DOCS documents."""
    if not sc.has_labels:
        return None
    sizes = np.diff(sc.offsets)
    use = max(int(np.searchsorted(np.cumsum(sizes), parttasks.AUC_MAX_DOCS, side="right")), 1)
    fn = functools.partial(_auc_part, plan=sc.plan)
    got = ctx.executor.map(fn, list(range(use)), desc="quality label auc")
    codes = np.concatenate([g[1] for g in got])
    good = codes == parttasks.LABEL_GOOD
    target = codes > 0
    out: dict[str, Any] = {"junk_kinds": list(parttasks.QUALITY_JUNK), "docs": int(target.sum())}
    if use < len(sizes):
        out["docs_capped_at"] = int(sizes[:use].sum())
    for name in sc.names:
        s = np.concatenate([g[0][name] for g in got])
        auc = roc_auc(s[target], good[target])
        out[f"auc_{name}"] = None if auc is None else round(auc, 4)
        auc_all = roc_auc(s, good)
        out[f"auc_{name}_all_junk"] = None if auc_all is None else round(auc_all, 4)
    return out


@dataclass
class _Scored:
    offsets: np.ndarray  # int64 [num_parts + 1]: global row range of each part
    n_ok: int  # scorable documents (at least one word)
    has_labels: bool  # hidden labels (toy corpus) in every part
    names: list[str]  # the scores that exist, in report order
    plan: parttasks.Plan  # where the per-part columns are and how to derive the scores
    model: Model | None
    info: dict[str, Any]  # what happened to the classifier, for the report
    lm: dict[str, Any] | None = None  # the LM scored: documents with a perplexity, per script
    lm_info: dict[str, Any] = field(default_factory=dict)


def _score(cfg: QualityConfig, ctx: StageContext, parts: list[Path], folder: Path) -> _Scored:
    """Every per-document column goes to the parts' files under `folder`; the driver holds
    the arrays the pseudo-label fit chooses rows by (heuristic, scorable, characters)
    while it runs; the self reference is drawn from the download parts (lm.self_reference)."""
    weights = {**DEFAULT_WEIGHTS, **cfg.heuristic_weights}
    lm_ran = (
        cfg.score in ("combined", "coherence") or bool(cfg.max_perplexity) or cfg.perplexity_buckets
    )
    fn = functools.partial(
        _scan_part,
        folder=folder,
        max_chars=cfg.max_chars,
        weights=weights,
        bias=cfg.heuristic_bias,
    )
    fitted: lm.LMResult | None = None
    # the seed set teaches coherence too; clean's rejects do not (they are short or
    # boilerplate, not incoherent, and would teach the classifier a domain)
    extra = classifier.read_seed_set(cfg.seed_set_path) if lm_ran and cfg.seed_set_path else None
    scan_items: list[Any] = _scan_items(parts)
    texts: list[str] = []
    tasks_fit = lm_ran and lm.workers_score(ctx)
    if lm_ran:
        texts = lm.reference_texts(cfg, ctx)
        lm.log_reference(cfg, ctx, texts)
    if tasks_fit:  # the LM fit is the first task of the stats pass, in a worker
        fn = functools.partial(_scan_or_fit, scan=fn, cfg=cfg, seed=ctx.seed)
        scan_items = [lm.fit_job(ctx, texts), *scan_items]
        texts = []
    scans = ctx.executor.map(fn, scan_items, desc="quality stats")
    if tasks_fit:
        fitted, scans = lm.fitted(ctx, scans[0]), scans[1:]
    elif lm_ran:  # inline: the serial order, the fit after the stats pass
        fitted = lm.fit_inline(ctx, cfg, texts)
        texts = []
    offsets = np.concatenate([[0], np.cumsum([s["n"] for s in scans])]).astype(np.int64)
    n_ok = sum(s["ok"] for s in scans)
    unspaced = sum(s["unspaced"] for s in scans)
    has_labels = all(s["has_labels"] for s in scans)
    del scans
    names = ["heuristic"]
    lm_sizes: dict[str, Any] | None = None
    lm_info: dict[str, Any] = {"status": "not_used"}
    if fitted is not None:
        if fitted.has_lm:
            lm_sizes = lm.score_all(ctx, fitted, extra, cfg.max_chars, folder, cfg.splice_gate)
            names += ["coherence", "combined"]
        else:  # no LM: the heuristic, which does not judge unspaced scripts (CCNet's "all")
            names.append("combined")
        lm_info = {**fitted.info, "heuristic_not_applied_unspaced_docs": unspaced}
        del fitted
    model, info = None, {"status": "not_used"}
    if cfg.score in ("classifier", "mean"):

        def part_cols() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
            # pseudo labels read one part's columns at a time: nothing per document is held
            for i in range(len(parts)):
                cols = partcols.load(folder, i)
                yield cols["heuristic"], cols["scorable"], cols["chars"]

        model, info = classifier.train_or_load(cfg, ctx, part_cols, offsets)
    if model is not None:
        fn = functools.partial(_score_part, model=model, max_chars=cfg.max_chars, folder=folder)
        ctx.executor.map(fn, _scan_items(parts), desc="quality score")
        names += ["classifier", "mean"]
    if cfg.external.model_path is not None:
        external.score_all(ctx, cfg.external, parts, cfg.max_chars, folder)
        names.append("external")
    used = cfg.score if cfg.score in names else "heuristic"  # no model: heuristic fallback
    plan = parttasks.Plan(folder, used, lm_ran)
    return _Scored(offsets, n_ok, has_labels, names, plan, model, info, lm_sizes, lm_info)


def _rule_args(cfg: QualityConfig, ctx: StageContext, sc: _Scored) -> tuple[list, float | None]:
    """Per part, what its write task needs to apply the keep rule; the reported threshold."""
    parts = len(sc.offsets) - 1
    if cfg.keep_rule == "min_score":
        return [None] * parts, cfg.min_score
    if cfg.keep_rule == "keep_fraction":
        return parttasks.keep_fraction_cut(ctx.executor, sc.plan, parts, sc.n_ok, cfg.keep_fraction)
    sizes = np.diff(sc.offsets).tolist()
    return parttasks.pareto_states(ctx.seed, sizes, cfg.pareto_alpha), None


def _bucket_cuts(cfg: QualityConfig, ctx: StageContext, sc: _Scored) -> tuple[dict | None, dict]:
    """Per-script (p30, p60) perplexity cut-offs over the corpus (np.quantile's, exactly)."""
    if not (sc.lm and cfg.perplexity_buckets):
        return None, {}
    sizes = {("ppl", s): n for s, n in sc.lm["per_script"].items()}
    q = parttasks.exact_quantiles(ctx.executor, sc.plan, len(sc.offsets) - 1, sizes, (0.3, 0.6))
    cuts = {g[1]: (float(v[0]), float(v[1])) for g, v in q.items()}
    return cuts, {"bucket_cutoffs_p30_p60": lm.cut_report(cuts)}


def _write(
    cfg: QualityConfig,
    ctx: StageContext,
    parts: list[Path],
    sc: _Scored,
    rule_args: list,
    cuts: dict | None,
) -> list[dict]:
    """Write every part: each task applies the decided rule to its own columns."""
    spec = write.WriteSpec(
        sc.plan,
        cfg.keep_rule,
        cfg.min_score,
        cfg.pareto_alpha,
        cfg.max_perplexity,
        sc.lm is not None,
        cfg.perplexity_buckets,
        sc.model is not None,
        "external" in sc.names,
        cfg.external.min_score,
    )
    picks = parttasks.decile_picks(ctx.executor, sc.plan, len(parts), sc.n_ok)
    items = [write.WritePart(i, p, rule_args[i], picks[i], cuts) for i, p in enumerate(parts)]
    fn = functools.partial(write.write_part, out_dir=ctx.out_dir, spec=spec)
    return ctx.executor.map(fn, items, desc="quality write")


def _lm_report(cfg: QualityConfig, ctx: StageContext, sc: _Scored, sums: dict, extra: dict) -> dict:
    echoed = {"reference": "reference", "order": "lm_order", "folds": "lm_folds"}
    out: dict[str, Any] = {"lm": with_keys(sc.lm_info, cfg, echoed)}
    if sc.lm:
        group = ("ppl", None)
        n = sc.lm["scorable"]
        med = parttasks.median(ctx.executor, sc.plan, len(sc.offsets) - 1, group, n)
        out["perplexity_histogram"] = {
            **lm.perplexity_histogram(sums["perplexity"], med, cfg.max_perplexity),
            "key": recipe_key(cfg, "max_perplexity"),
            "direction": "max",
        }
        out["per_script"] = lm.per_script(sums["per_script"])
        out.update(extra)
    if "coherence" in sc.names:
        out["coherence_histogram"] = write.histogram(sums["hists"]["coherence"], None)
    return out


def run(cfg: QualityConfig, ctx: StageContext) -> StageResult:
    parts = list(ctx.input_parts)
    if not parts:
        raise DataError(ctx.upstream or "quality", "no input parts to score")
    folder = ctx.out_dir / partcols.COLS_DIR
    try:
        return _run(cfg, ctx, parts, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # temporary, not stage outputs


def _run(cfg: QualityConfig, ctx: StageContext, parts: list[Path], folder: Path) -> StageResult:
    sc = _score(cfg, ctx, parts, folder)
    used = sc.plan.used
    rule_args, threshold = _rule_args(cfg, ctx, sc)
    cuts, extra = _bucket_cuts(cfg, ctx, sc)
    written = _write(cfg, ctx, parts, sc, rule_args, cuts)
    sums = write.sum_summaries(written)
    examples = {d: v for w in written for d, v in w["examples"].items()}
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
        # an exactly rounded sum (numpy's pairwise one is not splittable by part)
        "score_mean": round(sums["sum"] / sums["ok"], 4) if sums["ok"] else None,
        "score_histogram": {
            **write.histogram(sums["hists"]["score"], threshold),
            "key": recipe_key(cfg, RULE_SETTING[cfg.keep_rule]),
        },
        "heuristic_histogram": write.histogram(sums["hists"]["heuristic"], None),
        **_lm_report(cfg, ctx, sc, sums, extra),
        "decile_examples": [
            {
                "decile": d,
                "score": round(examples[d][2], 4),
                "id": examples[d][0],
                "text": examples[d][1],
            }
            for d in sorted(examples)
        ],
        "classifier": sc.info,
    }
    if "external" in sc.names:
        mean = round(sums["external_sum"] / sums["ok"], 4) if sums["ok"] else None
        hist = write.histogram(sums["hists"]["external"], cfg.external.min_score)
        stats_out.update(external.report(cfg.external, hist, sums["ok"], mean))
    for key in ("status", "holdout_agreement"):  # flat copies for `pipeline report`'s table
        if key in sc.info:
            stats_out[f"classifier_{key}"] = sc.info[key]
    if "status" in sc.lm_info:
        stats_out["lm_status"] = sc.lm_info["status"]
    label_auc = _label_auc(ctx, sc)
    if label_auc is not None:
        stats_out["hidden_label_auc"] = label_auc
        for name in sc.names:
            stats_out[f"hidden_label_auc_{name}"] = label_auc[f"auc_{name}"]
    return StageResult(outputs=outputs, stats=stats_out, counts=[w["counts"] for w in written])


# clean's rejects join the bad class when the run has a clean stage (clean_rejects_as_bad)
STAGE = Stage("quality", QualityConfig, run, version="5", needs=("download",), uses=("clean",))
