"""The tokenize stage's word (piece) counts as Parquet files, merged by a tree reduce of
executor tasks (run-folder files and the executor: stage code, not tokenizer/).

Each part's {piece: count} table is written by its own task; tasks then merge `fan_in` files
at a time (pyarrow group-by, no Python dict) until one file is left, which the driver reads
for BPE training. The driver never holds a list of per-part tables: it holds file names and,
at the end, the one merged table the merge loop needs anyway. Sums are exact integers and BPE
sorts its words, so the result is the same for any grouping, worker count or executor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.io import PARQUET_KW, atomic_path

SCHEMA = pa.schema([("piece", pa.binary()), ("count", pa.int64())])
FAN_IN = 8  # files merged per task: memory of a merge task ~ FAN_IN tables


class Mapper(Protocol):
    """What tree_reduce needs of an executor (pipeline.executor.BaseExecutor has it)."""

    def map(self, fn: Callable[[Any], Any], items: list, desc: str = ...) -> list: ...


def save_counts(path: Path, counts: Mapping[str, int]) -> None:
    """{piece: count} -> Parquet (pieces as UTF-8 bytes, lone surrogates kept)."""
    pieces = [p.encode("utf-8", "surrogatepass") for p in counts]
    table = pa.table({"piece": pa.array(pieces, pa.binary()), "count": list(counts.values())})
    _write(path, table.cast(SCHEMA))


def load_counts(path: Path) -> dict[str, int]:
    table = pq.read_table(path)
    pieces = table.column("piece").to_pylist()
    counts = table.column("count").to_pylist()
    return {p.decode("utf-8", "surrogatepass"): c for p, c in zip(pieces, counts, strict=True)}


@dataclass(frozen=True)
class MergeJob:
    """Task argument of merge_files."""

    out: str  # the merged count file
    paths: tuple[str, ...]  # count files to sum (kept: a retry re-reads them)


def merge_files(job: MergeJob) -> str:
    """Executor task: sum the counts of `job.paths` into `job.out`."""
    out = job.out
    table = pa.concat_tables([pq.read_table(p) for p in job.paths])
    merged = table.group_by("piece").aggregate([("count", "sum")])
    merged = merged.rename_columns(["piece", "count"]).select(["piece", "count"])
    _write(Path(out), merged.cast(SCHEMA))
    return out


def tree_reduce(executor: Mapper, paths: list[str], folder: Path, desc: str) -> str | None:
    """Merge count files level by level, `FAN_IN` per task; returns the last file (or None)."""
    level = 0
    while len(paths) > 1:
        level += 1
        jobs = [
            MergeJob(str(folder / f"level{level}-{j:05d}.parquet"), tuple(paths[i : i + FAN_IN]))
            for j, i in enumerate(range(0, len(paths), FAN_IN))
        ]
        merged = executor.map(merge_files, jobs, desc=f"{desc} (level {level})")
        for p in paths:  # this level is consumed: disk stays ~2 levels of count files
            Path(p).unlink(missing_ok=True)
        paths = merged
    return paths[0] if paths else None


def _write(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **PARQUET_KW)
