"""Training the quality classifier: the labelled seed set (JSONL), the per-part task that
writes a part's training rows to a feature file, and the fit over those files (quality/sgd.py)
with agreement and AUC on the held-out pseudo labels. The stage decides what to train on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pipeline.errors import DataError
from pipeline.io import read_text_file
from pipeline.quality.features import HASH_SEED, STAT_NAMES, hashed_features, stats_matrix
from pipeline.quality.logreg import Model, roc_auc
from pipeline.quality.select import PseudoLabels
from pipeline.quality.sgd import (
    Rows,
    SgdParams,
    evaluate,
    read_rows,
    train_streamed,
    write_rows,
)


def read_seed_set(path: str, max_chars: int) -> tuple[list[str], np.ndarray]:
    """Texts and labels (1 good, 0 bad) of a JSONL seed set; DataError on a bad line."""
    texts, labels = [], []
    names = {"good": 1, "bad": 0, "1": 1, "0": 0, "true": 1, "false": 0}
    # a labelled seed set is small: read whole, BOM-aware, one-line error if not UTF-8 text
    for num, line in enumerate(read_text_file(Path(path), "seed set").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            label = names[str(rec["label"]).lower()]
            text = rec["text"]
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
            raise DataError(f"{path}:{num}", 'expected {"text": str, "label": good|bad}') from None
        if not isinstance(text, str):
            raise DataError(f"{path}:{num}", "field 'text' is not a string")
        texts.append(text)
        labels.append(label)
    if not texts:
        raise DataError(path, "the seed set has no documents")
    return texts, np.array(labels, np.int8)


def featurise(item: tuple, dims: int, max_chars: int) -> dict:
    """Task: features and statistics of the given local rows of one or more parts, written
    with their labels and holdout flags to one feature file; returns its summary
    (sgd.write_rows). item = ([(part path, local rows int64 [m], labels int8 [m], holdout
    bool [m]), ...], output path)."""
    sources, out = item
    texts: list[str] = []
    for path, rows, _, _ in sources:
        col = pq.read_table(path, columns=["text"]).column("text").to_pylist()
        texts += [col[i] for i in rows]
    y = np.concatenate([src[2] for src in sources]).astype(np.int8)
    holdout = np.concatenate([src[3] for src in sources]).astype(bool)
    return write_texts(Path(out), texts, y, holdout, dims, max_chars)


def write_texts(
    out: Path, texts: list[str], y: np.ndarray, holdout: np.ndarray, dims: int, max_chars: int
) -> dict:
    """Featurise `texts` into the feature file `out`; its summary also counts the characters
    read (the sample's size against train_max_chars)."""
    X = hashed_features(texts, dims, HASH_SEED, max_chars)
    summary = write_rows(out, Rows(X, stats_matrix(texts, max_chars), y, holdout))
    return {**summary, "chars": sum(min(len(t), max_chars) for t in texts)}


def fit_classifier(
    summaries: list[dict],
    pl: PseudoLabels,
    params: SgdParams,
    dims: int,
    max_chars: int,
    load: Callable[[str], Rows] = read_rows,
) -> tuple[Model, dict[str, Any]]:
    """Train by mini-batch Adam over the feature files (pseudo-labelled parts, then extra
    labelled rows), one file at a time; report agreement with the held-out pseudo labels."""
    train_docs = sum(s["good"] + s["bad"] for s in summaries)
    meta = {
        "dims": dims,
        "hash_seed": HASH_SEED,
        "max_chars": max_chars,
        "stat_names": list(STAT_NAMES),
        "train_docs": train_docs,
        "pseudo_bad_max": pl.bad_max,
        "pseudo_good_min": pl.good_min,
    }
    model, losses = train_streamed(summaries, dims, len(STAT_NAMES), params, meta, load)
    p, y, loss = evaluate(summaries, model, params.l2, load)
    info: dict[str, Any] = {
        "status": "trained",
        "train_docs": train_docs,
        "sample_chars": sum(s["chars"] for s in summaries),
        "pseudo_bad_docs": int((pl.y == 0).sum()),
        "pseudo_good_docs": int((pl.y == 1).sum()),
        "pseudo_label_thresholds": [_round(pl.bad_max), _round(pl.good_min)],
        "epochs": len(losses),
        "loss_first": losses[0],  # over the first epoch's batches, as the model moved
        "loss_last": round(loss, 6),  # the objective of the final model, all training rows
    }
    if len(p):
        info["holdout_docs"] = int(len(p))
        info["holdout_agreement"] = round(float(((p >= 0.5) == (y == 1)).mean()), 4)
        auc = roc_auc(p, y == 1)
        info["holdout_auc"] = None if auc is None else round(auc, 4)
    return model, info


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
