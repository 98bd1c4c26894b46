"""The stage registry: `STAGES`, name -> Stage in pipeline order, is the one list of stages.

A stage exists once it is registered; `register_stage(STAGE, after="quality")` slots a new one
into the order (docs/overview.md walks through adding one). Everything that needs the order
(recipe checks, the runner, the report, docgen) reads it from here.
"""

from __future__ import annotations

from pipeline.stage import Stage
from pipeline.stages import (
    clean,
    decontaminate,
    dedup,
    download,
    line_dedup,
    pack,
    quality,
    shard,
    tokenize,
)

STAGES: dict[str, Stage] = {}


def register_stage(stage: Stage, after: str | None = None) -> None:
    """Add `stage` to the order: at the end, or right after the stage named `after`. Every
    stage it `needs` or `uses` must already be registered earlier in the order."""
    if stage.name in STAGES:
        raise ValueError(f"stage {stage.name!r} is already registered")
    names = list(STAGES)
    if after is not None and after not in STAGES:
        raise ValueError(f"register_stage({stage.name!r}, after={after!r}): no such stage")
    at = names.index(after) + 1 if after is not None else len(names)
    earlier = set(names[:at])
    for dep in stage.needs + stage.uses:
        if dep not in earlier:
            raise ValueError(
                f"stage {stage.name!r} reads {dep!r}, which is not registered before it"
            )
    items = list(STAGES.items())
    items.insert(at, (stage.name, stage))
    STAGES.clear()
    STAGES.update(items)


def unregister_stage(name: str) -> None:
    """Remove a registered stage (tests and plugins that registered one temporarily)."""
    del STAGES[name]


for _stage in (download, clean, dedup, quality, tokenize, pack, shard):
    register_stage(_stage.STAGE)
register_stage(line_dedup.STAGE, after="dedup")  # boilerplate lines: docs/dedup.md
register_stage(decontaminate.STAGE, after="quality")  # eval n-grams: docs/dedup.md
