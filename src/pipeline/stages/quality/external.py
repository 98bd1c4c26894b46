"""quality's external-model step (quality.external): load the user's model once per process
(the driver first, so a bad file stops the run before any task), score each part's texts into
its `ext` column file, and the report's `external` block. The scoring is
pipeline.quality.external's."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.config import recipe_key
from pipeline.errors import DataError
from pipeline.parts import read_table
from pipeline.quality import external as ext
from pipeline.stage import StageContext
from pipeline.stages.quality import partcols
from pipeline.stages.quality.config import ExternalConfig

Scorer = Callable[[list[str]], np.ndarray]


@functools.lru_cache(maxsize=2)
def _load(kind: str, path: str, label: str | None, stamp: tuple[int, int]) -> Scorer:
    """The scorer of the model at `path`; `stamp` (size, mtime) makes an edited file reload."""
    if kind == "linear":
        model = ext.parse_linear(Path(path).read_bytes(), path)
        return functools.partial(ext.linear_scores, model)
    try:
        fasttext = importlib.import_module("fasttext")
    except ImportError:
        raise DataError(path, "kind fasttext needs the fasttext extra") from None
    fasttext.FastText.eprint = lambda *_: None  # load_model's warning is not for our users
    try:
        model = fasttext.load_model(path)
    except ValueError as exc:
        raise DataError(path, f"not a fastText model ({exc})") from None
    want = ext.fasttext_label(label or "")
    labels = list(model.get_labels())
    if want not in labels:
        shown = ", ".join(labels[:10]) or "none"
        raise DataError(path, f"label {label!r} is not one of the model's labels: {shown}")
    return lambda texts: ext.fasttext_scores(model, texts, want)


def load(cfg: ExternalConfig) -> Scorer:
    """The configured model's scorer (cached per process); a DataError naming the file."""
    path = str(cfg.model_path)
    try:
        st = Path(path).stat()
    except OSError:
        raise DataError(path, "model file not found (quality.external.model_path)") from None
    return _load(cfg.kind, path, cfg.label, (st.st_size, st.st_mtime_ns))


@dataclass(frozen=True, slots=True)
class ExternalPart:
    index: int
    path: Path


def score_part(item: ExternalPart, cfg: ExternalConfig, max_chars: int, folder: Path) -> int:
    """Task: the part's external scores (its first max_chars characters per text) to the
    part's `ext` column file; returns the part's documents."""
    texts = read_table(item.path, columns=["text"]).column("text").to_pylist()
    scores = load(cfg)([t[:max_chars] for t in texts])
    partcols.save(folder, item.index, "ext", external=scores)
    return len(texts)


def score_all(
    ctx: StageContext, cfg: ExternalConfig, parts: list[Path], max_chars: int, folder: Path
) -> None:
    load(cfg)  # in the driver: a bad model is one line before any task starts
    fn = functools.partial(score_part, cfg=cfg, max_chars=max_chars, folder=folder)
    ctx.executor.map(fn, [ExternalPart(i, p) for i, p in enumerate(parts)], desc="quality external")


def report(cfg: ExternalConfig, hist: dict[str, Any], scored: int, mean: float | None) -> dict:
    """The report's `external` block and `external_histogram` (min_score marked)."""
    block = {
        "kind": cfg.kind,
        "model_path": cfg.model_path,
        "label": cfg.label,
        "min_score": cfg.min_score,
        "min_score_key": recipe_key(cfg, "min_score"),
        "docs_scored": scored,
        "score_mean": mean,
    }
    return {"external": block, "external_histogram": {**hist, "key": recipe_key(cfg, "min_score")}}
