"""Binary logistic regression in numpy over [sparse hashed features | dense statistics]: the
model, ROC-AUC, and persistence. Training (mini-batch Adam over feature files) is quality/sgd.py.
Models are saved as a plain .npz (no pickle) with fixed zip timestamps.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.errors import DataError
from pipeline.quality.features import Csr

MODEL_FORMAT = "pipeline-quality-logreg-v1"


@dataclass
class Model:
    w_hashed: np.ndarray  # float32 [dims]
    w_stats: np.ndarray  # float64 [k]
    bias: float
    stats_mean: np.ndarray  # float64 [k]: statistics are standardised before the dot product
    stats_std: np.ndarray  # float64 [k]
    meta: dict  # dims, hash_seed, max_chars, stat_names, and training facts

    def logits(self, X: Csr, stats: np.ndarray) -> np.ndarray:
        z = (stats.astype(np.float64) - self.stats_mean) / self.stats_std
        dense = (z * self.w_stats).sum(axis=1)
        prod = X.data.astype(np.float64) * self.w_hashed[X.indices]
        return np.bincount(X.row_ids(), weights=prod, minlength=X.num_rows) + dense + self.bias

    def predict(self, X: Csr, stats: np.ndarray) -> np.ndarray:
        """float64 [n]: P(good) in (0, 1)."""
        return sigmoid(self.logits(X, stats))


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # tanh form: no overflow warning for large |z|


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Mann-Whitney ROC-AUC (ties count 1/2); None when either class is empty."""
    positive = positive.astype(bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    mid_rank = (upper - (counts - 1) / 2.0)[inverse]  # 1-based average rank of each tie group
    return float((mid_rank[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


# ---------------------------------------------------------------- persistence


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def model_bytes(model: Model) -> bytes:
    """The model as .npz bytes; deterministic (fixed member order and timestamps)."""
    meta = dict(model.meta, format=MODEL_FORMAT)
    arrays = {
        "w_hashed": model.w_hashed,
        "w_stats": model.w_stats,
        "bias": np.array([model.bias]),
        "stats_mean": model.stats_mean,
        "stats_std": model.stats_std,
        "meta_json": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, _npy_bytes(arr))
    return buf.getvalue()


def load_model(path: Path) -> Model:
    """Read a model written by `model_bytes`; DataError if it is not one."""
    try:
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(bytes(f["meta_json"]).decode())
            model = Model(
                f["w_hashed"].astype(np.float32),
                f["w_stats"].astype(np.float64),
                float(f["bias"][0]),
                f["stats_mean"],
                f["stats_std"],
                meta,
            )
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise DataError(str(path), f"not a quality model ({exc})") from None
    if meta.get("format") != MODEL_FORMAT:
        raise DataError(str(path), f"model format {meta.get('format')!r}, expected {MODEL_FORMAT}")
    if len(model.w_hashed) != meta.get("dims") or len(model.w_stats) != len(meta["stat_names"]):
        raise DataError(str(path), "weight shapes do not match the model's metadata")
    return model
