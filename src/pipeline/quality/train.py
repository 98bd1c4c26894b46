"""Training the quality classifier: parsing a labelled seed set (JSONL text), and the fit over
feature files (quality/sgd.py, streamed through the caller's `load`) with agreement and AUC on the
held-out pseudo labels. The stage (stages/quality/classifier.py) decides what to train on and
owns the files: it reads the parts and the seed set and writes the feature files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.quality.features import HASH_SEED, STAT_NAMES
from pipeline.quality.logreg import Model, roc_auc
from pipeline.quality.select import PseudoLabels
from pipeline.quality.sgd import Rows, SgdParams, evaluate, train_streamed


def parse_seed_set(text: str, where: str) -> tuple[list[str], np.ndarray]:
    """Texts and labels (1 good, 0 bad) of a JSONL seed set's text; DataError naming
    `where`:line on a bad line."""
    texts, labels = [], []
    names = {"good": 1, "bad": 0, "1": 1, "0": 0, "true": 1, "false": 0}
    for num, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            label = names[str(rec["label"]).lower()]
            doc = rec["text"]
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
            raise DataError(f"{where}:{num}", 'expected {"text": str, "label": good|bad}') from None
        if not isinstance(doc, str):
            raise DataError(f"{where}:{num}", "field 'text' is not a string")
        texts.append(doc)
        labels.append(label)
    if not texts:
        raise DataError(where, "the seed set has no documents")
    return texts, np.array(labels, np.int8)


def fit_classifier(
    summaries: list[dict],
    pl: PseudoLabels,
    params: SgdParams,
    dims: int,
    max_chars: int,
    load: Callable[[str], Rows],
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
