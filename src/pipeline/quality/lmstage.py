"""The quality stage's language-model step: choose the reference, fit the fold LMs and the
coherence classifiers on it, write them to `lm.npz`, and score every part with them.

I/O glue around the pure cores (reference, lmscore, lmfile); the stage (stages/quality.py)
calls `fit_reference` once on the driver and `score_part` over its parts.
"""

from __future__ import annotations

import functools
import io
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.io import atomic_write_bytes, read_table
from pipeline.quality import reference as refmod
from pipeline.quality.coherence import FEATURE_NAMES, Coherence
from pipeline.quality.lmfile import load_scorer, scorer_bytes
from pipeline.quality.lmscore import (
    LMParams,
    LMScorer,
    Reference,
    coherence_of,
    fit_classifiers,
    fit_lm,
)
from pipeline.quality.ngram import SCRIPTS

TMP_LM_FILE = ".lm-scorer.npz"  # only while worker processes score; not an output
FEATS_DIR = ".lm-features"  # per-part LM features between the scoring and coherence passes


@dataclass
class LMResult:
    scorer: LMScorer | None  # None: no LM (fallback, see info["why"])
    info: dict[str, Any]
    reference: Reference | None = None
    is_self: bool = False


def _read_rows(item: tuple[Path, np.ndarray]) -> list[str]:
    path, rows = item
    texts = read_table(path, columns=["text"]).column("text").to_pylist()
    return [texts[i] for i in rows]


def self_reference_rows(
    heur: np.ndarray,
    scorable: np.ndarray,
    chars: np.ndarray,
    min_heuristic: float,
    max_chars: int,
    seed: int,
) -> np.ndarray:
    """Global rows of the `self` reference: scorable documents with heuristic >= min_heuristic,
    in a seeded random order until they hold max_chars characters; ascending."""
    idx = np.flatnonzero(scorable & (heur >= min_heuristic))
    order = idx[np.random.default_rng(seed).permutation(len(idx))]
    budget = np.cumsum(chars[order])
    take = int(np.searchsorted(budget, max_chars, side="left")) + 1
    return np.sort(order[:take])


def fit_reference(
    cfg: Any,
    ctx: Any,
    heur: np.ndarray,
    scorable: np.ndarray,
    chars: np.ndarray,
    offsets: np.ndarray,
) -> LMResult:
    """Read the reference and fit the fold LMs (the classifiers come after the corpus pass,
    see `fit_coherence`). A too-small `self` reference falls back (on_no_spread: heuristic) or
    stops (error); a too-small file/builtin always stops."""
    params = LMParams(
        order=cfg.lm_order,
        num_folds=cfg.lm_folds,
        min_reference_docs=cfg.min_reference_docs,
        max_train_docs=cfg.coherence_train_docs,
        max_chars=cfg.max_chars,
        seed=ctx.seed,
    )
    kind = refmod.describe(cfg.reference)
    if cfg.reference == refmod.SELF:
        rows = self_reference_rows(
            heur, scorable, chars, cfg.reference_min_heuristic, cfg.reference_max_chars, ctx.seed
        )
        part_of = np.searchsorted(offsets, rows, side="right") - 1
        items = [(p, rows[part_of == i] - offsets[i]) for i, p in enumerate(ctx.input_parts)]
        texts = [
            t
            for chunk in ctx.executor.map(_read_rows, items, desc="quality reference")
            for t in chunk
        ]
    else:
        texts = refmod.read_reference(cfg.reference, cfg.reference_max_chars, ctx.progress)
        rows = np.arange(len(texts), dtype=np.int64)
    ctx.log.info("[quality] reference %s: %d documents", kind, len(texts))
    scorer, ref = fit_lm(texts, rows, params)
    if isinstance(scorer, str):
        where = "quality.reference" if cfg.reference == refmod.SELF else cfg.reference
        if cfg.reference != refmod.SELF or cfg.on_no_spread == "error":
            raise DataError(
                where,
                f"reference {kind} too small to train the LM: {scorer} "
                "(use a larger reference or lower quality.min_reference_docs)",
            )
        ctx.log.warning("[quality] no LM: %s; using the heuristic score", scorer)
        return LMResult(None, {"reference": kind, "status": "fallback_heuristic", "why": scorer})
    info = {"reference": kind, "status": "trained", **scorer.info}
    return LMResult(scorer, info, ref, cfg.reference == refmod.SELF)


def fit_coherence(
    lm: LMResult, ref_feats: np.ndarray | None, extra: tuple | None
) -> dict[int, Coherence]:
    """Train the classifiers (a `self` reference reuses its documents' corpus-pass features,
    `ref_feats`: same fold model, same numbers) and return them."""
    assert lm.scorer is not None and lm.reference is not None
    fit_classifiers(lm.scorer, lm.reference, ref_feats if lm.is_self else None, extra)
    lm.info["classifiers"] = lm.scorer.info["classifiers"]
    return lm.scorer.classifiers


def score_part(item: tuple, scorer: LMScorer | Path, max_chars: int) -> dict[str, np.ndarray]:
    """LM columns of every row of one part. `item` = (part, global row of its first row, local
    rows of reference documents, file for the features); `scorer` is the scorer itself (inline)
    or the file a worker process loads it from (once per process). The features go to the file
    (the coherence pass reads them back); the driver gets ~17 bytes per document plus the
    reference rows' features, which the coherence classifiers train on."""
    path, first, ref_rows, feats_file = item
    texts = read_table(path, columns=["text"]).column("text").to_pylist()
    if isinstance(scorer, Path):
        scorer = load_scorer(scorer)
    feats, script = scorer.features([t[:max_chars] for t in texts], first + np.arange(len(texts)))
    buf = io.BytesIO()
    np.save(buf, feats, allow_pickle=False)
    atomic_write_bytes(feats_file, buf.getvalue())
    has = feats[:, FEATURE_NAMES.index("log_tokens")] > 0
    return {
        "perplexity": np.where(has, np.exp(-feats[:, 0]), np.nan),
        "context_gain": np.where(has, feats[:, 1], np.nan),
        "script": script.astype(np.int8),
        "ref_features": feats[ref_rows],
    }


def _coherence_part(item: tuple[Path, np.ndarray], classifiers: dict) -> np.ndarray:
    feats_file, script = item
    return coherence_of(classifiers, np.load(feats_file, allow_pickle=False), script)


def score_all(
    ctx: Any, lm: LMResult, offsets: np.ndarray, max_chars: int, extra: tuple | None
) -> dict[str, np.ndarray]:
    """score_part over every input part, the classifiers, then coherence per part from the
    saved features: the driver never holds a feature matrix of all documents. Worker processes
    read the scorer from a temporary file (deleted afterwards) instead of unpickling ~100 MB of
    tables per part."""
    assert lm.scorer is not None and lm.reference is not None
    feats_dir = ctx.out_dir / FEATS_DIR
    feats_dir.mkdir(parents=True, exist_ok=True)
    ref = lm.reference.rows if lm.is_self else np.zeros(0, np.int64)
    part_of = np.searchsorted(offsets, ref, side="right") - 1
    items = [
        (p, int(offsets[i]), ref[part_of == i] - offsets[i], feats_dir / f"part-{i:05d}.npy")
        for i, p in enumerate(ctx.input_parts)
    ]
    tmp = None
    if ctx.executor.workers > 1 and len(items) > 1:
        tmp = ctx.out_dir / TMP_LM_FILE
        atomic_write_bytes(tmp, scorer_bytes(lm.scorer))
    try:
        fn = functools.partial(score_part, scorer=tmp or lm.scorer, max_chars=max_chars)
        parts = ctx.executor.map(fn, items, desc="quality LM score")
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        cols = {k: np.concatenate([p.pop(k) for p in parts]) for k in list(parts[0])}
        ref_feats = cols.pop("ref_features")
        classifiers = fit_coherence(lm, ref_feats, extra)
        del ref_feats
        coh_items = [
            (it[3], cols["script"][offsets[i] : offsets[i + 1]]) for i, it in enumerate(items)
        ]
        fn2 = functools.partial(_coherence_part, classifiers=classifiers)
        coh = ctx.executor.map(fn2, coh_items, desc="quality coherence")
        cols["coherence"] = np.concatenate(coh)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        shutil.rmtree(feats_dir, ignore_errors=True)  # temporary, not stage outputs
    return cols


def buckets(perplexity: np.ndarray, script: np.ndarray) -> tuple[np.ndarray, dict]:
    """CCNet buckets per script: head (< p30), middle (< p60), tail; `all` without a score."""
    out = np.full(len(perplexity), "all", dtype=object)
    cuts = {}
    for s, name in enumerate(SCRIPTS):
        m = (script == s) & ~np.isnan(perplexity)
        if not m.any():
            continue
        p30, p60 = np.quantile(perplexity[m], [0.3, 0.6])
        cuts[name] = [round(float(p30), 1), round(float(p60), 1)]
        out[m] = np.where(
            perplexity[m] < p30, "head", np.where(perplexity[m] < p60, "middle", "tail")
        )
    return out, cuts


def perplexity_histogram(perplexity: np.ndarray, threshold: float | None) -> dict:
    """25 log10-spaced bins over [1, 10^5] (values outside go to the end bins)."""
    p = perplexity[~np.isnan(perplexity)]
    logs = np.clip(np.log10(np.maximum(p, 1.0)), 0.0, 4.999)
    counts, edges = np.histogram(logs, bins=25, range=(0.0, 5.0))
    return {
        "edges": [round(float(10**e), 1) for e in edges],
        "counts": counts.tolist(),
        "threshold": threshold,
        "median": round(float(np.median(p)), 1) if len(p) else None,
    }


def per_script(lm_cols: dict[str, np.ndarray], scorable: np.ndarray, keep: np.ndarray) -> dict:
    """Documents, kept share and how many the LM scored, per script group."""
    out = {}
    for s, name in enumerate(SCRIPTS):
        m = (lm_cols["script"] == s) & scorable
        if m.any():
            out[name] = {
                "docs": int(m.sum()),
                "kept": int(keep[m].sum()),
                "kept_share": round(float(keep[m].mean()), 4),
                "lm_scored": int((~np.isnan(lm_cols["coherence"][m])).sum()),
            }
    return out
