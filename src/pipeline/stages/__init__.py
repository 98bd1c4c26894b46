"""The stage registry. Order is fixed; a stage exists once its module is listed here."""

from __future__ import annotations

from pipeline.stage import Stage
from pipeline.stages import clean, dedup, download, pack, quality, shard, tokenize

ORDER = ("download", "clean", "dedup", "quality", "tokenize", "pack", "shard")

_REGISTERED: list[Stage] = [
    download.STAGE,
    clean.STAGE,
    dedup.STAGE,
    quality.STAGE,
    tokenize.STAGE,
    pack.STAGE,
    shard.STAGE,
]

STAGES: dict[str, Stage] = {
    s.name: s for s in sorted(_REGISTERED, key=lambda s: ORDER.index(s.name))
}
