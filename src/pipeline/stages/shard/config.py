"""The shard stage's recipe block (`shard:`): subsample, eval split and shard size. Its own
module, as dedup's and quality's: the stage package's bounded-memory path is `bounded.py`, and a
package attribute `bounded` (that submodule) must not shadow pipeline.config.bounded here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pipeline.config import bounded, option
from pipeline.errors import RecipeError


@dataclass(frozen=True)
class ShardConfig:
    fraction: float | None = bounded(None, gt=0.0, le=1.0, doc="keep this share of sequences")
    num_samples: int | None = bounded(None, ge=1, doc="or keep this many sequences (None: all)")
    source_weights: dict[str, float] | None = option(
        None, "target share per source; unlisted: excluded"
    )
    # spread: the total holds and the mix moves; shrink: the mix holds and the total moves
    source_shortfall: Literal["spread", "shrink"] = option(
        "spread", "a source short of its weighted share: others fill in, or all shrink to it"
    )
    eval_fraction: float = bounded(0.01, ge=0.0, lt=1.0, doc="share of kept sequences held out")
    shard_size: int = bounded(
        4096, ge=1, doc="sequences per .npz (32 MiB at 2048 x uint16 x 2 arrays)"
    )
    # exact: ~112 B per sequence in the driver; above: O(parts), other bytes (docs/shards.md)
    exact_max_sequences: int = bounded(
        1 << 21, ge=1, doc="above: per-part subsample, Feistel shuffle"
    )

    def validate(self, path: str) -> None:
        if self.fraction is not None and self.num_samples is not None:
            raise RecipeError(f"{path}.num_samples", "set fraction or num_samples, not both")
        if self.source_weights is not None:
            bad = {k: v for k, v in self.source_weights.items() if v < 0}
            if bad:
                raise RecipeError(f"{path}.source_weights", f"weights must be >= 0, got {bad}")
            if not sum(self.source_weights.values()) > 0:
                raise RecipeError(f"{path}.source_weights", "at least one weight must be > 0")
        if self.source_shortfall == "shrink" and self.source_weights is None:
            raise RecipeError(
                f"{path}.source_shortfall",
                "shrink keeps the shares of source_weights; set source_weights too",
            )
