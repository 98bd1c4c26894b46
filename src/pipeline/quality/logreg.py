"""Binary logistic regression in numpy over [sparse hashed features | dense statistics].

Full-batch Adam on the class-balanced mean log-loss + (l2 / 2)·||w||² (bias not penalised).
Every reduction is a sequential numpy sum over a fixed row order, so the same inputs give
bit-identical weights. Models are saved as a plain .npz (no pickle) with fixed zip timestamps.
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


@dataclass(frozen=True)
class TrainParams:
    l2: float  # L2 penalty on the weights
    iterations: int  # full-batch Adam steps
    learning_rate: float  # Adam step size


def train(
    X: Csr, stats: np.ndarray, y: np.ndarray, params: TrainParams, meta: dict
) -> tuple[Model, list[float]]:
    """Fit on rows X / stats [n, k] with labels y (1 = good, 0 = bad); returns the model and the
    training loss every 10 steps."""
    n, full_dims = X.num_rows, X.num_cols
    # Only buckets some training row uses can move away from 0 (the rest see only the L2 pull
    # towards 0), so train in that compressed column space: same weights, ~5x less work.
    used, cols = np.unique(X.indices, return_inverse=True)
    dims = len(used)
    mean = stats.astype(np.float64).mean(axis=0)
    std = stats.astype(np.float64).std(axis=0)
    std = np.where(std > 1e-6, std, 1.0)  # a constant statistic keeps weight ~0, no division by 0
    z = (stats.astype(np.float64) - mean) / std
    y = y.astype(np.float64)
    pos = max(float(y.sum()), 1.0)
    sample_w = np.where(y > 0.5, 0.5 / pos, 0.5 / max(n - pos, 1.0))  # classes weigh 1/2 each
    rows, data = X.row_ids(), X.data.astype(np.float64)
    k = z.shape[1]
    theta = np.zeros(dims + k + 1)  # [hashed | stats | bias]
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    b1, b2, eps = 0.9, 0.999, 1e-8
    losses = []
    for step in range(1, params.iterations + 1):
        logit = (
            np.bincount(rows, weights=data * theta[cols], minlength=n)
            + (z * theta[dims : dims + k]).sum(axis=1)
            + theta[-1]
        )
        p = sigmoid(logit)
        err = (p - y) * sample_w
        grad = np.empty_like(theta)
        grad[:dims] = np.bincount(cols, weights=data * err[rows], minlength=dims)
        grad[dims : dims + k] = (z * err[:, None]).sum(axis=0)
        grad[-1] = err.sum()
        grad[:-1] += params.l2 * theta[:-1]
        if step % 10 == 0 or step == 1:
            ll = -(sample_w * (y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))).sum()
            losses.append(round(float(ll + 0.5 * params.l2 * (theta[:-1] ** 2).sum()), 6))
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        step_size = params.learning_rate * np.sqrt(1 - b2**step) / (1 - b1**step)
        theta -= step_size * m / (np.sqrt(v) + eps)
    w_hashed = np.zeros(full_dims, np.float32)
    w_hashed[used] = theta[:dims]
    model = Model(
        w_hashed,
        theta[dims : dims + k].copy(),
        float(theta[-1]),
        mean,
        std,
        dict(meta),
    )
    return model, losses


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
