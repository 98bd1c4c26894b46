"""The dedup stage's recipe settings (`dedup:`), apart from the stage so that its reduce steps
(pipeline.stages.dedup.reduce) can name them without importing the stage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pipeline.config import SEED_LIMIT, bounded, option
from pipeline.dedup.lsh import optimal_bands
from pipeline.errors import RecipeError


@dataclass(frozen=True)
class DedupConfig:
    exact: Literal["hash_set", "bloom", "off"] = option(
        "hash_set", "exact-dup index; off = skip exact"
    )
    bloom_fp_rate: float = bounded(1e-6, gt=0.0, lt=1.0, doc="bloom: target false-positive rate")
    bloom_expected_docs: int | None = bounded(
        None, ge=1, doc="bloom: n for sizing; None = input docs"
    )
    near: bool = option(True, "MinHash LSH near-duplicate removal on/off")
    threshold: float = bounded(0.8, gt=0.0, le=1.0, doc="Jaccard of shingle sets to call near-dup")
    num_perm: int = bounded(128, ge=8, le=1024, doc="MinHash permutations (4 bytes each per doc)")
    ngram: int = bounded(5, ge=1, le=32, doc="words per shingle, on the simplified text")
    bands: int | None = bounded(None, ge=1, doc="LSH bands; None = optimal for threshold")
    rows: int | None = bounded(None, ge=1, doc="signature values per band; set together with bands")
    fn_weight: float = bounded(
        0.9, ge=0.0, le=1.0, doc="weight of missed pairs vs false candidates"
    )
    verify: Literal["exact", "estimate"] = option(
        "exact", "candidate check: shingle sets or signatures"
    )
    keep: Literal["first", "longest", "quality"] = option("first", "cluster member that survives")
    seed: int | None = bounded(None, ge=0, lt=SEED_LIMIT, doc="MinHash seed; None: the stage's")
    batch_docs: int = bounded(
        250, ge=1, doc="documents per numpy batch: temporaries stay cache-sized"
    )
    num_examples: int = bounded(5, ge=0, doc="example clusters shown in the report")
    # measured in the run (docs/dedup.md): exact Jaccard of a seeded sample; 0 turns one off
    precision_sample_pairs: int = bounded(200, ge=0, doc="merged pairs (dropped, kept) checked")
    recall_sample_docs: int = bounded(1000, ge=0, doc="documents whose every pair is compared")
    recall_max_share: float = bounded(
        0.05, ge=0.0, le=1.0, doc="the recall sample holds at most this share of the documents"
    )

    def validate(self, path: str) -> None:
        if (self.bands is None) != (self.rows is None):
            raise RecipeError(
                f"{path}.bands",
                "set bands and rows together, or neither "
                f"(got bands={self.bands}, rows={self.rows})",
            )
        if self.bands is not None and self.bands * (self.rows or 0) > self.num_perm:
            raise RecipeError(
                f"{path}.bands",
                f"bands*rows must be <= num_perm {self.num_perm}, got {self.bands}*{self.rows}",
            )
        if self.exact == "off" and not self.near:
            raise RecipeError(f"{path}.near", "exact is off and near is false: nothing to do")

    def bands_rows(self) -> tuple[int, int]:
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        return optimal_bands(self.threshold, self.num_perm, self.fn_weight)
