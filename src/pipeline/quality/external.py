"""External quality models: score documents with a user's own model (quality.external).

Two kinds. `fasttext`: a supervised fastText model (.bin/.ftz, as the DCLM and FineWeb-style
classifiers ship); the score is the probability of one label, with every newline of the text
read as a space (fastText predicts one line). `linear`: a JSON linear model over word n-grams,
our own format (no pickle, no scikit-learn): the score is sigmoid(bias + weights . x), where x
holds the counts of the model's n-grams in the text, scaled by `idf` and normalised by `norm`
as scikit-learn's TfidfVectorizer does, so a fitted TfidfVectorizer + LogisticRegression
exports to it in a few lines (docs/quality.md). Both score each text on its own: the same text
gets the same float in every worker.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.errors import DataError

LINEAR_FORMAT = "pipeline-linear-v1"
TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token_pattern
NORMS = ("l2", "l1", "none")


@dataclass(frozen=True)
class LinearModel:
    """A linear model over word n-grams (LINEAR_FORMAT); see `parse_linear`."""

    weights: dict[str, float]  # n-gram (tokens joined by one space) -> weight
    bias: float
    ngram_range: tuple[int, int]  # (lo, hi) tokens, inclusive
    lowercase: bool
    norm: str  # one of NORMS
    idf: dict[str, float] | None  # n-gram -> idf factor (the same keys as weights), or None

    def score_text(self, text: str) -> float:
        """sigmoid(bias + w . x) in [0, 1]; x over the model's n-grams only (scikit-learn)."""
        tokens = TOKEN_RE.findall(text.lower() if self.lowercase else text)
        counts: Counter[str] = Counter()
        lo, hi = self.ngram_range
        for n in range(lo, hi + 1):
            if n == 1:
                counts.update(tokens)
            else:
                counts.update(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        x = {g: float(c) for g, c in counts.items() if g in self.weights}
        if self.idf is not None:
            x = {g: v * self.idf[g] for g, v in x.items()}
        if self.norm != "none" and x:
            size = (
                math.sqrt(math.fsum(v * v for v in x.values()))
                if self.norm == "l2"
                else math.fsum(abs(v) for v in x.values())
            )
            x = {g: v / size for g, v in x.items()}
        z = self.bias + math.fsum(self.weights[g] * v for g, v in x.items())  # exact: order-free
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _number(raw: Any, where: str, path: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise DataError(path, f"{where} must be a finite number, got {str(raw)[:40]!r}")
    return float(raw)


def parse_linear(blob: bytes, path: str) -> LinearModel:
    """The linear model in a JSON file's bytes; a DataError naming the file and the field.

    {"format": "pipeline-linear-v1", "weights": {"ngram": w, ...}, "bias": b,
     "ngram_range": [1, 2], "lowercase": true, "norm": "l2" | "l1" | "none",
     "idf": {"ngram": f, ...} (optional)}
    """
    try:
        raw = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else path
        raise DataError(where, f"not a JSON linear model ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != LINEAR_FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise DataError(path, f"'format' must be {LINEAR_FORMAT!r}, got {got!r}")
    unknown = sorted(
        set(raw) - {"format", "weights", "bias", "ngram_range", "lowercase", "norm", "idf"}
    )
    if unknown:
        raise DataError(path, f"unknown field {unknown[0]!r}")
    weights = raw.get("weights")
    if not isinstance(weights, dict) or not weights:
        raise DataError(path, "'weights' must be a non-empty object {ngram: weight}")
    w = {str(k): _number(v, f"weights[{k!r}]", path) for k, v in weights.items()}
    rng = raw.get("ngram_range", [1, 1])
    if (
        not isinstance(rng, list)
        or len(rng) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in rng)
        or not 1 <= rng[0] <= rng[1] <= 8
    ):
        raise DataError(path, f"'ngram_range' must be [lo, hi] with 1 <= lo <= hi <= 8, got {rng}")
    norm = raw.get("norm", "l2")
    if norm not in NORMS:
        raise DataError(path, f"'norm' must be one of {', '.join(NORMS)}, got {norm!r}")
    lowercase = raw.get("lowercase", True)
    if not isinstance(lowercase, bool):
        raise DataError(path, f"'lowercase' must be true or false, got {lowercase!r}")
    idf = raw.get("idf")
    if idf is not None:
        if not isinstance(idf, dict) or set(idf) != set(weights):
            raise DataError(path, "'idf' must be an object with the same n-grams as 'weights'")
        idf = {str(k): _number(v, f"idf[{k!r}]", path) for k, v in idf.items()}
    bias = _number(raw.get("bias", 0.0), "bias", path)
    return LinearModel(w, bias, (rng[0], rng[1]), lowercase, norm, idf)


def fasttext_label(label: str) -> str:
    """fastText's name of a label: `hq` and `__label__hq` both name `__label__hq`."""
    return label if label.startswith("__label__") else f"__label__{label}"


def fasttext_scores(model: Any, texts: list[str], label: str) -> np.ndarray:
    """float64 [n]: the probability fastText `model` gives `label` (fastText's name) for each
    text, newlines read as spaces (it predicts one line); 0 where the label is not returned."""
    lines = [t.replace("\r", " ").replace("\n", " ") for t in texts]
    labels, probs = model.predict(lines, k=-1, threshold=0.0)
    out = np.zeros(len(texts))
    for i, (labs, ps) in enumerate(zip(labels, probs, strict=True)):
        for lab, p in zip(labs, ps, strict=True):
            if lab == label:
                out[i] = min(max(float(p), 0.0), 1.0)  # its softmax may pass 1 by ~1e-5
                break
    return out


def linear_scores(model: LinearModel, texts: list[str]) -> np.ndarray:
    """float64 [n]: the linear model's score of each text."""
    return np.array([model.score_text(t) for t in texts], np.float64)
