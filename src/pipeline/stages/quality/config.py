"""The quality stage's recipe settings (`quality:`), apart from the stage so that its scorers'
steps (pipeline.stages.quality.classifier, .lm) can name them without importing the stage."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pipeline.config import bounded, input_path, option
from pipeline.errors import RecipeError
from pipeline.quality import reference as refmod
from pipeline.quality.features import DEFAULT_BIAS, DEFAULT_WEIGHTS, STAT_NAMES


@dataclass(frozen=True)
class ExternalConfig:
    """`quality.external:` a user's own quality model (docs/quality.md, External models)."""

    RECIPE_SECTION: ClassVar[str] = "quality.external"

    kind: Literal["fasttext", "linear"] = option(
        "fasttext", "fasttext: a supervised .bin/.ftz (the `fasttext` extra); linear: our JSON"
    )
    model_path: str | None = option(None, "the model file; null: no external score")
    label: str | None = option(
        None, "fasttext: the label whose probability is the score (`__label__hq` or `hq`)"
    )
    min_score: float | None = bounded(
        None, ge=0.0, le=1.0, doc="drop documents scoring below this; null: score only"
    )

    def validate(self, path: str) -> None:
        if self.model_path is None:
            for key in ("label", "min_score"):
                if getattr(self, key) is not None:
                    raise RecipeError(f"{path}.model_path", f"is null, so {key} has no model")
            return
        if not Path(self.model_path).is_file():
            raise RecipeError(f"{path}.model_path", f"file {self.model_path!r} not found")
        if self.kind == "linear" and self.label is not None:
            raise RecipeError(f"{path}.label", "only for kind fasttext (a linear model has one)")
        if self.kind == "fasttext":
            if not self.label:
                raise RecipeError(
                    f"{path}.label", "kind fasttext needs the label to score, e.g. __label__hq"
                )
            if importlib.util.find_spec("fasttext") is None:
                raise RecipeError(
                    f"{path}.kind",
                    "fasttext needs the fasttext extra: pip install 'pipeline[fasttext]'",
                )


def _weights() -> dict[str, float]:
    return dict(DEFAULT_WEIGHTS)  # keys left out of a recipe keep these weights


@dataclass(frozen=True)
class QualityConfig:
    score: Literal["combined", "coherence", "heuristic", "classifier", "mean", "external"] = option(
        "combined",
        "combined = min(heuristic, coherence); classifier/mean: the pseudo-label classifier; "
        "external: quality.external's model",
    )
    reference: str = input_path(
        "self", doc="LM reference: self | a builtin corpus | a .jsonl/.parquet/.txt file"
    )
    reference_min_heuristic: float = bounded(0.5, ge=0.0, le=1.0, doc="self: heuristic >= this")
    reference_max_chars: int = bounded(8_000_000, ge=1000, doc="reference sample size (~2M tokens)")
    min_reference_docs: int = bounded(
        20, ge=2, doc="per script; fewer: that script has no LM score"
    )
    lm_order: int = bounded(4, ge=2, le=6, doc="n-gram order")
    lm_folds: int = bounded(
        4, ge=2, le=10, doc="k: a document is scored by the model without its fold"
    )
    coherence_train_docs: int = bounded(4_000, ge=4, doc="positives + negatives, seeded sample")
    coherence_features: int = bounded(
        2,
        ge=1,
        le=4,
        doc="feature set: 2 = + sentence cohesion, one detector per junk family;"
        " 3 = + per-segment LM gain spread and seam jumps;"
        " 4 = 2 + entity/number consistency and sentence clusters (splice detector)",
    )
    coherence_detector_keep: float = bounded(
        0.98,
        gt=0.0,
        lt=1.0,
        doc="sets 2-4: each detector's bias passes at least this reference share",
    )
    coherence_detector_lift: Literal["mixture", "quantile"] = option(
        "mixture",
        "sets 2-4: mixture = the keep share counts the reference documents each detector"
        " estimates are real (its junk share from where its corruptions score: a self"
        " reference holds the corpus's own junk); quantile = of all of them (the scores before)",
    )
    coherence_chain_docs: int = bounded(
        50,
        ge=0,
        doc="sets 2-4, Latin and Cyrillic: the Markov corruptions walk chains over seeded"
        " groups of this many reference documents (long copied spans that keep to a topic, as"
        " spam made from a few scraped pages); 0 = one chain over the whole reference (the"
        " scores before)",
    )
    coherence_folds: Literal["doc", "sentence"] = option(
        "doc",
        "which fold model scores a token: doc = its document's (text hash); sentence = also"
        " reference documents sharing a sentence share a fold, and a copied reference sentence"
        " is scored by the model of the document it came from",
    )
    copy_folds: bool = option(
        True,
        "coherence_folds doc: of two reference documents sharing a sentence, the one with more"
        " partners (a splice, a spun page) is also left out of the other's fold model when the"
        " other keeps sentences of its own and is Chinese/Japanese text, so a copied document"
        " is not scored as memorised through its copy (quality/copies.py); false = the scores"
        " before",
    )
    splice_gate: bool = option(
        True,
        "coherence x a gate on documents stitched from the sentences of >= 2 other documents of"
        " the corpus (quality/copies.py; column splice_share); false = the scores before it",
    )
    max_perplexity: float | None = option(None, "also drop documents above this LM perplexity")
    perplexity_buckets: bool = option(False, "add CCNet's head/middle/tail `lm_bucket` column")
    keep_rule: Literal["min_score", "keep_fraction", "pareto"] = option(
        "min_score", "pareto: GPT-3 style"
    )
    min_score: float = bounded(0.5, ge=0.0, le=1.0, doc="min_score: keep documents scoring >= this")
    keep_fraction: float = bounded(0.8, gt=0.0, le=1.0, doc="keep_fraction: keep this best share")
    pareto_alpha: float = bounded(9.0, gt=0.0, doc="pareto: keep if pareto(alpha) > 1 - score")
    heuristic_weights: dict[str, float] = option(factory=_weights, doc="per statistic, [0, 1]")
    heuristic_bias: float = option(DEFAULT_BIAS, "heuristic = sigmoid(bias + weights . statistics)")
    pseudo_label_fraction: float = bounded(0.2, gt=0.0, le=0.5, doc="heuristic top/bottom share")
    pseudo_bad_below: float = bounded(
        0.5, ge=0.0, le=1.0, doc="pseudo-bad also needs heuristic < this"
    )
    pseudo_good_above: float = bounded(0.5, ge=0.0, le=1.0, doc="pseudo-good also needs >= this")
    seed_set_path: str | None = option(
        None, 'JSONL of {"text", "label": good|bad} added to training'
    )
    clean_rejects_as_bad: bool = option(
        True, "documents the clean stage rejected join the bad class"
    )
    model_path: str | None = option(
        None, "a model.npz from an earlier run: reuse it, train nothing"
    )
    hash_bits: int = bounded(18, ge=8, le=24, doc="hashed feature space = 2^hash_bits buckets")
    l2: float = bounded(1e-2, ge=0.0, doc="L2 penalty on the weights (loss is a mean over docs)")
    epochs: int = bounded(
        10, ge=1, doc="mini-batch Adam passes over the training sample (at least: see min_steps)"
    )
    min_steps: int = bounded(
        200, ge=1, doc="and more passes until this many Adam steps are made (small samples)"
    )
    batch_size: int = bounded(256, ge=1, doc="documents per Adam step")
    learning_rate: float = bounded(0.05, gt=0.0, doc="Adam step size (to 0 over the 2nd half)")
    holdout_fraction: float = bounded(0.2, ge=0.0, lt=1.0, doc="pseudo-labelled share held out")
    min_train_docs: int = bounded(20, ge=1, doc="per class; fewer -> on_no_spread applies")
    max_train_docs: int = bounded(200_000, ge=2, doc="cap on pseudo-labelled docs (seeded sample)")
    train_max_chars: int = bounded(
        30_000_000,
        ge=1000,
        doc="classifier sample in chars: a third each for pseudo-good, pseudo-bad and clean's "
        "rejects; its features go to per-part files, the driver holds one file's at a time while "
        "training",
    )
    on_no_spread: Literal["heuristic", "error"] = option(
        "heuristic", "no pseudo labels: fall back/stop"
    )
    max_chars: int = bounded(
        100_000, ge=100, doc="statistics and features read this many chars/doc"
    )
    external: ExternalConfig = option(
        factory=ExternalConfig, doc="a user's own model: its score column, histogram, filter"
    )

    def validate(self, path: str) -> None:
        if self.pseudo_bad_below > self.pseudo_good_above:
            raise RecipeError(
                f"{path}.pseudo_bad_below",
                f"must be <= pseudo_good_above "
                f"({self.pseudo_good_above}), got {self.pseudo_bad_below}",
            )
        unknown = sorted(set(self.heuristic_weights) - set(STAT_NAMES))
        if unknown:
            raise RecipeError(
                f"{path}.heuristic_weights.{unknown[0]}",
                f"unknown statistic; expected one of {', '.join(STAT_NAMES)}",
            )
        why = refmod.check(self.reference)
        if why:
            raise RecipeError(f"{path}.reference", why)
        if self.score == "external" and self.external.model_path is None:
            raise RecipeError(
                f"{path}.score", "external needs quality.external.model_path (the model)"
            )
        if self.model_path and self.score not in ("classifier", "mean"):
            raise RecipeError(
                f"{path}.model_path",
                f"a saved pseudo-label model needs score: classifier or mean, got {self.score}",
            )
        for key in ("seed_set_path", "model_path"):
            value = getattr(self, key)
            if value is not None and not Path(value).is_file():
                raise RecipeError(f"{path}.{key}", f"file {value!r} not found")
