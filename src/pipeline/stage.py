"""The stage contract: a stage module exposes `STAGE = Stage(name, ConfigClass, run, version)`.

`run(cfg, ctx) -> StageResult` writes only into `ctx.out_dir` (a temp folder the runner renames
into place) and returns the files it wrote and its stats. It never writes the manifest or report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.executor import Executor


@dataclass
class StageResult:
    outputs: list[str]  # every file written, relative to ctx.out_dir; main parts are `part-*`
    stats: dict[str, Any]  # flat snake_case with units: docs_in, docs_out, dropped_<reason>, ...


@dataclass
class StageContext:
    name: str
    run_dir: Path
    out_dir: Path  # temp folder to write into; becomes <run_dir>/<name>
    seed: int  # this stage's seed, derived from (recipe seed, stage name)
    recipe_seed: int
    input_parts: list[Path]  # the nearest enabled upstream stage's `part-*` files, in order
    upstream: str | None  # that stage's name
    executor: Executor
    recipe: Any  # the whole validated Recipe, read-only
    progress: bool = True
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("pipeline"))

    def stage_dir(self, name: str) -> Path | None:
        """Finished output folder of an earlier stage in this run, or None."""
        path = self.run_dir / name
        return path if path.is_dir() else None


@dataclass(frozen=True)
class Stage:
    name: str
    config_cls: type
    run: Callable[[Any, StageContext], StageResult]
    version: str = "1"  # bump when the stage's output bytes change for the same config
