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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pipeline.errors import DataError
from pipeline.executor import BaseExecutor


@dataclass(frozen=True)
class PartItem:
    """The task argument of a per-part map: input part `index` (its outputs are named after
    it) at `path`."""

    index: int
    path: str


@dataclass
class DocCounts:
    """Documents a stage (or one part of it) took in and let through, drops by reason, and the
    UTF-8 text bytes in and out (None: not measured)."""

    docs_in: int = 0
    docs_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> documents
    bytes_in: int | None = None
    bytes_out: int | None = None

    @staticmethod
    def total(parts: Iterable[DocCounts]) -> DocCounts:
        """The sum over parts (a reason some part reported stays, even at 0)."""
        out = DocCounts()
        for c in parts:
            out.docs_in += c.docs_in
            out.docs_out += c.docs_out
            for reason, n in c.dropped.items():
                out.dropped[reason] = out.dropped.get(reason, 0) + n
            if c.bytes_in is not None:
                out.bytes_in = (out.bytes_in or 0) + c.bytes_in
            if c.bytes_out is not None:
                out.bytes_out = (out.bytes_out or 0) + c.bytes_out
        return out

    def as_stats(self) -> dict[str, int]:
        """docs_in, docs_out, dropped_<reason> (reasons in name order), bytes_in, bytes_out:
        the first keys of a stage's report section."""
        stats = {"docs_in": self.docs_in, "docs_out": self.docs_out}
        stats.update({f"dropped_{r}": self.dropped[r] for r in sorted(self.dropped)})
        if self.bytes_in is not None:
            stats["bytes_in"] = self.bytes_in
        if self.bytes_out is not None:
            stats["bytes_out"] = self.bytes_out
        return stats


@dataclass
class StageResult:
    outputs: list[str]  # every file written, relative to ctx.out_dir; main parts are `part-*`
    stats: dict[str, Any]  # the stage's own stats, flat snake_case with units
    # per-part document counts; the runner sums them into the report's docs_in, docs_out,
    # dropped_<reason>, bytes_in, bytes_out (ahead of `stats`). Empty: a stage without documents
    counts: list[DocCounts] = field(default_factory=list)

    def all_stats(self) -> dict[str, Any]:
        """The report's stats: the parts' counts summed (first), then the stage's own stats."""
        counted = DocCounts.total(self.counts).as_stats() if self.counts else {}
        # a stage bug, not a user error: counts come from the parts, never twice
        assert not counted.keys() & self.stats.keys(), "counts reported in the stats too"
        return {**counted, **self.stats}


@dataclass(frozen=True)
class StageInputs:
    """The finished outputs of one earlier stage of this run (as recorded in the manifest)."""

    name: str  # the stage that wrote them
    dir: Path  # its folder, <run_dir>/<name>
    files: tuple[str, ...]  # every output, relative to `dir`, sorted
    # the config those outputs were written with (the runner: the recipe's, which the stage's
    # fingerprint matched); None when unknown (`from_dir`: stages run by hand)
    config: Any = field(default=None, compare=False, repr=False)

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
    executor: BaseExecutor
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
