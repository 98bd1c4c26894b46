"""quality's pseudo-label classifier, the stage side: load a model, or choose pseudo labels
part by part (pseudo.py), compute the sampled rows' features in tasks (one temp file per part),
and train by mini-batch Adam streamed one file at a time (sgd.py). Split out of
stages/quality/__init__.py, which calls `train_or_load` once."""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import DataError
from pipeline.io import atomic_write_bytes
from pipeline.parts import read_table
from pipeline.quality import pseudo, select
from pipeline.quality.features import HASH_SEED, STAT_NAMES, hashed_features, stats_matrix
from pipeline.quality.logreg import Model, load_model
from pipeline.quality.sgd import Rows, SgdParams, decode_rows, encode_rows, summarise
from pipeline.quality.train import fit_classifier, parse_seed_set
from pipeline.stage import StageContext
from pipeline.text_files import read_text_file

if TYPE_CHECKING:
    from pipeline.stages.quality.config import QualityConfig

CLASSIFIER_FEATS_DIR = "classifier-features"  # temporary: per-part training rows


def read_seed_set(path: str) -> tuple[list[str], np.ndarray]:
    """Texts and labels of the JSONL seed set at `path` (small: read whole, BOM-aware)."""
    return parse_seed_set(read_text_file(Path(path), "seed set"), path)


def write_rows(path: Path, rows: Rows) -> dict:
    """Save `rows` as a feature file (atomically); returns its summary (sgd.summarise)."""
    atomic_write_bytes(path, encode_rows(rows))
    return {"path": str(path), **summarise(rows)}


def read_rows(path: str | Path) -> Rows:
    return decode_rows(Path(path).read_bytes())


@dataclass(frozen=True)
class FeatureSource:
    """Labelled local rows of one part."""

    path: Path  # the part
    rows: np.ndarray  # int64 [m]: local rows
    labels: np.ndarray  # int8 [m]: 1 good, 0 bad
    holdout: np.ndarray  # bool [m]: held out of training


@dataclass(frozen=True)
class FeatureJob:
    """Task argument of featurise: the rows of one feature file."""

    sources: tuple[FeatureSource, ...]
    out: Path  # the feature file


def featurise(job: FeatureJob, dims: int, max_chars: int) -> dict:
    """Task: features and statistics of the given local rows of one or more parts, written
    with their labels and holdout flags to one feature file; returns its summary
    (write_rows)."""
    texts: list[str] = []
    for src in job.sources:
        col = read_table(src.path, columns=["text"]).column("text").to_pylist()
        texts += [col[i] for i in src.rows]
    y = np.concatenate([src.labels for src in job.sources]).astype(np.int8)
    holdout = np.concatenate([src.holdout for src in job.sources]).astype(bool)
    return write_texts(Path(job.out), texts, y, holdout, dims, max_chars)


def write_texts(
    out: Path, texts: list[str], y: np.ndarray, holdout: np.ndarray, dims: int, max_chars: int
) -> dict:
    """Featurise `texts` into the feature file `out`; its summary also counts the characters
    read (the sample's size against train_max_chars)."""
    X = hashed_features(texts, dims, HASH_SEED, max_chars)
    summary = write_rows(out, Rows(X, stats_matrix(texts, max_chars), y, holdout))
    return {**summary, "chars": sum(min(len(t), max_chars) for t in texts)}


def train_or_load(
    cfg: QualityConfig, ctx: StageContext, part_cols: pseudo.Parts, offsets: np.ndarray
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
        return _train(cfg, ctx, part_cols, offsets, feats)
    finally:
        shutil.rmtree(feats, ignore_errors=True)  # temporary, not stage outputs


def _train(
    cfg: QualityConfig,
    ctx: StageContext,
    parts: pseudo.Parts,
    offsets: np.ndarray,
    feats: Path,
) -> tuple[Model | None, dict]:
    seed_file, rejects, counts = _labelled_extras(cfg, ctx, feats)
    bad = sum(len(r[1]) for r in rejects) + sum(s["bad"] for s in seed_file)

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
            labelled.append(FeatureSource(p, pl.rows[m] - offsets[i], pl.y[m], pl.holdout[m]))
    # file k holds pseudo-labelled part k and rejected part k: mini-batches see both classes
    # (a file of rejects alone would make every step of it a step towards "bad")
    items = []
    for k in range(max(len(labelled), len(rejects))):
        sources = labelled[k : k + 1]
        for p, rows in rejects[k : k + 1]:
            no = np.zeros(len(rows), bool)
            sources.append(FeatureSource(p, rows, no.astype(np.int8), no))
        items.append(FeatureJob(tuple(sources), feats / f"part-{k:05d}.npz"))
    dims = 1 << cfg.hash_bits
    fn = functools.partial(featurise, dims=dims, max_chars=cfg.max_chars)
    summaries = ctx.executor.map(fn, items, desc="quality features") if items else []
    params = SgdParams(
        cfg.l2, cfg.epochs, cfg.min_steps, cfg.batch_size, cfg.learning_rate, ctx.seed
    )
    model, info = fit_classifier(summaries + seed_file, pl, params, dims, cfg.max_chars, read_rows)
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
        texts, y = read_seed_set(cfg.seed_set_path)
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
