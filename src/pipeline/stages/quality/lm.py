"""The quality stage's language-model step: choose the reference, fit the fold LMs and the
coherence classifiers on it, write them to `lm.npz`, and score every part with them.

I/O glue around the pure cores (reference, lmscore, lmfile); the stage (stages/quality/__init__.py)
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
from pipeline.io import atomic_write_bytes
from pipeline.parts import read_table
from pipeline.permute import splitmix64
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
from pipeline.stages.quality import partcols

TMP_LM_FILE = ".lm-scorer.npz"  # only while worker processes score; not an output
# self reference: above this many documents the sample is drawn in hash order per part (bounded
# driver memory) instead of by one seeded shuffle of every eligible row (exact; 44 B per document
# at the driver's peak, measured at 1 GB: 10 M documents -> 0.44 GB beside the LM's 0.4 GB)
SELF_EXACT_MAX_DOCS = 10_000_000
SAMPLE_BATCH = 256  # parts per map while the bounded sample keeps its running prefix
REF_CHUNK = 1 << 16  # self reference: characters summed this many documents at a time
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
    in a seeded random order until they hold max_chars characters; ascending.

    Shuffled in place (the swaps of `permutation(n)`, so the same order) and summed a chunk at
    a time: one int64 per eligible document beyond the inputs."""
    order = np.flatnonzero(scorable & (heur >= min_heuristic))
    np.random.default_rng(seed).shuffle(order)
    used, take = 0, len(order)
    for lo in range(0, len(order), REF_CHUNK):
        budget = used + np.cumsum(chars[order[lo : lo + REF_CHUNK]])
        at = int(np.searchsorted(budget, max_chars, side="left"))
        if at < len(budget):
            take = lo + at + 1
            break
        used = int(budget[-1])
    return np.sort(order[:take])


def _budget_prefix(prio: np.ndarray, rows: np.ndarray, chars: np.ndarray, max_chars: int):
    """The (priority, row) order's prefix until it holds max_chars characters (+ the row that
    crosses it): self_reference_rows's rule with hash order instead of a shuffle."""
    order = np.lexsort((rows, prio))
    take = int(np.searchsorted(np.cumsum(chars[order]), max_chars, side="left")) + 1
    order = order[:take]
    return prio[order], rows[order], chars[order]


def hashed_sample_part(
    item: tuple[int, int], folder: Path, min_heuristic: float, max_chars: int, seed: int
) -> tuple:
    """One part's eligible rows in hash order, up to the budget (the global sample's
    candidates from this part: the global prefix never needs more)."""
    part, first = item
    cols = partcols.load(folder, part)
    heur_lm = np.where(cols["unspaced"], 1.0, cols["heuristic"])
    local = np.flatnonzero(cols["scorable"] & (heur_lm >= min_heuristic))
    rows = first + local.astype(np.int64)
    prio = splitmix64(
        rows.astype(np.uint64) ^ splitmix64(np.array([seed & (2**64 - 1)], np.uint64))[0]
    )
    return _budget_prefix(prio, rows, cols["chars"][local], max_chars)


def hashed_reference_rows(
    executor: Any,
    folder: Path,
    offsets: np.ndarray,
    min_heuristic: float,
    max_chars: int,
    seed: int,
) -> np.ndarray:
    """Rows of the `self` reference above SELF_EXACT_MAX_DOCS documents: eligible documents in
    the order of a seeded hash of their global row until max_chars characters; ascending. The
    driver holds a running prefix and one batch of parts' candidates (each at most the
    budget's worth), not the corpus."""
    fn = functools.partial(
        hashed_sample_part,
        folder=folder,
        min_heuristic=min_heuristic,
        max_chars=max_chars,
        seed=seed,
    )
    items = [(i, int(offsets[i])) for i in range(len(offsets) - 1)]
    best = (np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    for lo in range(0, len(items), SAMPLE_BATCH):  # a running prefix: bounded, not O(parts)
        got = executor.map(fn, items[lo : lo + SAMPLE_BATCH], desc="quality reference sample")
        merged = [np.concatenate([best[k], *(g[k] for g in got)]) for k in range(3)]
        best = _budget_prefix(*merged, max_chars)
    return np.sort(best[1])


def fit_reference(
    cfg: Any,
    ctx: Any,
    heur: np.ndarray | None,
    scorable: np.ndarray | None,
    chars: np.ndarray | None,
    offsets: np.ndarray,
    folder: Path | None = None,
) -> LMResult:
    """Read the reference and fit the fold LMs (the classifiers come after the corpus pass,
    see `fit_coherence`). A `self` reference is drawn from the given arrays, or (`heur` None:
    a corpus above SELF_EXACT_MAX_DOCS) from the parts' columns in `folder`. A too-small `self`
    reference falls back (on_no_spread: heuristic) or stops (error); a too-small file/builtin
    always stops."""
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
        if heur is None:  # a corpus above SELF_EXACT_MAX_DOCS: the bounded hash-order sample
            rows = hashed_reference_rows(
                ctx.executor,
                folder,
                offsets,
                cfg.reference_min_heuristic,
                cfg.reference_max_chars,
                ctx.seed,
            )
        else:
            rows = self_reference_rows(
                heur,
                scorable,
                chars,
                cfg.reference_min_heuristic,
                cfg.reference_max_chars,
                ctx.seed,
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


def score_part(item: tuple, scorer: LMScorer | Path, max_chars: int) -> dict[str, Any]:
    """LM columns of every row of one part. `item` = (part, global row of its first row, local
    rows of reference documents, file for the features, partcols folder, part number);
    `scorer` is the scorer itself (inline) or the file a worker process loads it from (once
    per process). The features go to the file (the coherence pass reads them back), the
    perplexity, context gain and script to the part's `lm` columns; the driver gets the
    reference rows' features (the coherence classifiers train on them) and counts."""
    path, first, ref_rows, feats_file, folder, part = item
    texts = read_table(path, columns=["text"]).column("text").to_pylist()
    if isinstance(scorer, Path):
        scorer = load_scorer(scorer)
    feats, script = scorer.features([t[:max_chars] for t in texts], first + np.arange(len(texts)))
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
        "ref_features": feats[ref_rows],
        "per_script": np.bincount(script[scored], minlength=len(SCRIPTS)).astype(np.int64),
        "scorable": int((scored & ok).sum()),
    }


def _coherence_part(item: tuple[Path, Path, int], classifiers: dict) -> int:
    feats_file, folder, part = item
    script = partcols.load(folder, part)["script"]
    coh = coherence_of(classifiers, np.load(feats_file, allow_pickle=False), script)
    partcols.save(folder, part, "coh", coherence=coh)
    return len(coh)


def score_all(
    ctx: Any, lm: LMResult, offsets: np.ndarray, max_chars: int, extra: tuple | None, folder: Path
) -> dict[str, Any]:
    """score_part over every input part, the classifiers, then coherence per part from the
    saved features: the LM columns stay in the parts' files under `folder`, the driver never
    holds a per-document array. Returns how many documents have a perplexity, per script
    ({script index: count}) and among scorable ones (`scorable`). Worker processes read the
    scorer from a temporary file (deleted afterwards) instead of unpickling ~100 MB of tables
    per part."""
    assert lm.scorer is not None and lm.reference is not None
    feats_dir = ctx.out_dir / FEATS_DIR
    feats_dir.mkdir(parents=True, exist_ok=True)
    ref = lm.reference.rows if lm.is_self else np.zeros(0, np.int64)
    part_of = np.searchsorted(offsets, ref, side="right") - 1
    items = [
        (
            p,
            int(offsets[i]),
            ref[part_of == i] - offsets[i],
            feats_dir / f"part-{i:05d}.npy",
            folder,
            i,
        )
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
        ref_feats = np.concatenate([p.pop("ref_features") for p in parts])
        classifiers = fit_coherence(lm, ref_feats, extra)
        del ref_feats
        fn2 = functools.partial(_coherence_part, classifiers=classifiers)
        ctx.executor.map(
            fn2, [(it[3], folder, i) for i, it in enumerate(items)], desc="quality coherence"
        )
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
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
