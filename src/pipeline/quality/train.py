"""Training the quality classifier: the labelled seed set (JSONL) and the fit on pseudo-labelled
documents plus extra labelled ones, with agreement and AUC on the held-out pseudo labels.

Pure functions of in-memory arrays (and the seed-set file); the stage decides what to train on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.io import read_text_file
from pipeline.quality.features import HASH_SEED, STAT_NAMES, Csr, vstack
from pipeline.quality.logreg import Model, TrainParams, roc_auc, train
from pipeline.quality.select import PseudoLabels


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


def fit_classifier(
    X: Csr,
    stats: np.ndarray,
    pl: PseudoLabels,
    params: TrainParams,
    max_chars: int,
    extra: tuple[Csr, np.ndarray, np.ndarray] | None = None,
) -> tuple[Model, dict[str, Any]]:
    """Train on the non-held-out pseudo-labelled rows (X, stats aligned with pl.rows) plus the
    `extra` labelled rows (features, stats, y); report agreement with the pseudo labels on the
    held-out rows."""
    fit = np.flatnonzero(~pl.holdout)
    Xf, Sf, yf = X.take(fit), stats[fit], pl.y[fit]
    if extra is not None:
        Xs, Ss, ys = extra
        Xf, Sf, yf = vstack([Xf, Xs], X.num_cols), np.vstack([Sf, Ss]), np.concatenate([yf, ys])
    meta = {
        "dims": X.num_cols,
        "hash_seed": HASH_SEED,
        "max_chars": max_chars,
        "stat_names": list(STAT_NAMES),
        "train_docs": int(len(yf)),
        "pseudo_bad_max": pl.bad_max,
        "pseudo_good_min": pl.good_min,
    }
    model, losses = train(Xf, Sf, yf, params, meta)
    info: dict[str, Any] = {
        "status": "trained",
        "train_docs": int(len(yf)),
        "pseudo_bad_docs": int((pl.y == 0).sum()),
        "pseudo_good_docs": int((pl.y == 1).sum()),
        "pseudo_label_thresholds": [_round(pl.bad_max), _round(pl.good_min)],
        "loss_first": losses[0],
        "loss_last": losses[-1],
    }
    held = np.flatnonzero(pl.holdout)
    if len(held):
        p = model.predict(X.take(held), stats[held])
        info["holdout_docs"] = int(len(held))
        info["holdout_agreement"] = round(float(((p >= 0.5) == (pl.y[held] == 1)).mean()), 4)
        auc = roc_auc(p, pl.y[held] == 1)
        info["holdout_auc"] = None if auc is None else round(auc, 4)
    return model, info


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
