"""The stage contract: a stage module exposes `STAGE = Stage(name, ConfigClass, run, ...)`.

A stage declares the earlier stages it reads (`needs`: must be enabled, checked when the recipe
is built; `uses`: side inputs read only when that stage is enabled). The runner hands it their
outputs, taken from the manifest, as `ctx.inputs[stage]`; a stage never looks for another
stage's folder by name nor at the recipe. `run(cfg, ctx) -> StageResult` writes only into
`ctx.out_dir` (a temp folder the runner renames into place) and returns the files it wrote and
its stats. It never writes the manifest or the report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipeline.errors import DataError
from pipeline.executor import Executor


@dataclass
class StageResult:
    outputs: list[str]  # every file written, relative to ctx.out_dir; main parts are `part-*`
    stats: dict[str, Any]  # flat snake_case with units: docs_in, docs_out, dropped_<reason>, ...


@dataclass(frozen=True)
class StageInputs:
    """The finished outputs of one earlier stage of this run (as recorded in the manifest)."""

    name: str  # the stage that wrote them
    dir: Path  # its folder, <run_dir>/<name>
    files: tuple[str, ...]  # every output, relative to `dir`, sorted

    @property
    def parts(self) -> list[Path]:
        """The main parts: `part-*` files directly in the stage folder, in part order."""
        return [self.dir / f for f in self.files if f.startswith("part-") and "/" not in f]

    def under(self, folder: str) -> list[Path]:
        """Outputs inside a sub-folder (`rejected` -> rejected/part-*), sorted."""
        prefix = folder.rstrip("/") + "/"
        return [self.dir / f for f in self.files if f.startswith(prefix)]

    def file(self, rel: str) -> Path:
        """One named output (`meta.json`); a DataError when the stage did not write it."""
        if rel not in self.files:
            raise DataError(str(self.dir / rel), f"missing from the {self.name} stage's output")
        return self.dir / rel

    @classmethod
    def from_dir(cls, name: str, path: Path) -> StageInputs:
        """Every file under `path` (tests, benchmarks and tools that run one stage by hand)."""
        path = Path(path)
        files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
        return cls(name, path, tuple(files))


@dataclass
class StageContext:
    name: str
    run_dir: Path  # the run folder (for messages; read inputs from `inputs`)
    out_dir: Path  # temp folder to write into; becomes <run_dir>/<name>
    seed: int  # this stage's seed (Stage.seed_scope says whose)
    inputs: dict[str, StageInputs]  # the nearest upstream stage, `needs` and enabled `uses`
    upstream: str | None  # the nearest enabled earlier stage: where document parts come from
    executor: Executor
    progress: bool = True
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("pipeline"))

    @property
    def input_parts(self) -> list[Path]:
        """The upstream stage's `part-*` files, in order ([] for the first stage)."""
        return self.inputs[self.upstream].parts if self.upstream else []


@dataclass(frozen=True)
class Stage:
    name: str
    config_cls: type
    run: Callable[[Any, StageContext], StageResult]
    version: str = "1"  # bump when the stage's output bytes change for the same config
    needs: tuple[str, ...] = ()  # earlier stages that must be enabled; their outputs in ctx.inputs
    uses: tuple[str, ...] = ()  # earlier stages read when enabled (side inputs), else absent
    # "stage": ctx.seed derives from (recipe seed, stage name); "recipe": ctx.seed is the recipe's
    # own seed (shard: DESIGN.md "Seeds", a trainer reads it back from metadata.json)
    seed_scope: Literal["stage", "recipe"] = "stage"
