"""The tokenize stage's word (piece) counts as Parquet files, merged by a tree reduce of
executor tasks (run-folder files and the executor: stage code, not tokenizer/).

Each part's {piece: count} table is written by its own task; tasks then merge `fan_in` files
at a time (pyarrow group-by, no Python dict) until at most `fan_in` are left; the last merge is
split by piece among the workers (`shares`: pieces of one byte length % shares each, disjoint)
and the driver reads those files for BPE training. The driver never holds a list of per-part
tables: it holds file names and, at the end, the merged counts the merge loop needs anyway.
Sums are exact integers and BPE breaks ties by the pair's bytes, so the result is the same for
any grouping, worker count or executor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
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
    # ParquetFile, not read_table: the driver skips importing pyarrow.dataset (~0.4 s)
    table = pq.ParquetFile(path).read()
    pieces = table.column("piece").to_pylist()
    counts = table.column("count").to_pylist()
    return {p.decode("utf-8", "surrogatepass"): c for p, c in zip(pieces, counts, strict=True)}


@dataclass(frozen=True)
class MergeJob:
    """Task argument of merge_files."""

    out: str  # the merged count file
    paths: tuple[str, ...]  # count files to sum (kept: a retry re-reads them)
    share: tuple[int, int] = (0, 1)  # (j, n): only the pieces of byte length % n == j


def merge_files(job: MergeJob) -> str:
    """Executor task: sum the counts of `job.paths` (of `job.share`'s pieces) into `job.out`."""
    out = job.out
    table = pa.concat_tables([pq.ParquetFile(p).read() for p in job.paths])
    j, n = job.share
    if n > 1:
        length = pc.binary_length(table.column("piece")).to_numpy(zero_copy_only=False)
        table = table.filter(pa.array(length % n == j))
    merged = table.group_by("piece").aggregate([("count", "sum")])
    merged = merged.rename_columns(["piece", "count"]).select(["piece", "count"])
    _write(Path(out), merged.cast(SCHEMA))
    return out


def tree_reduce(
    executor: Mapper, paths: list[str], folder: Path, desc: str, shares: int = 1
) -> list[str]:
    """Merge count files level by level, `FAN_IN` per task; returns the last level's files:
    none without input, else one, or `shares` when the last merge is split among that many
    tasks (each sums the pieces of one byte length % shares: disjoint, so the driver's union
    of them is exact), which the workers then run side by side instead of one task alone."""
    level = 0
    while len(paths) > FAN_IN or (len(paths) > 1 and shares == 1):
        level += 1
        jobs = [
            MergeJob(str(folder / f"level{level}-{j:05d}.parquet"), tuple(paths[i : i + FAN_IN]))
            for j, i in enumerate(range(0, len(paths), FAN_IN))
        ]
        paths = _merge_level(executor, jobs, paths, f"{desc} (level {level})")
    if paths and shares > 1:  # the last merge, split by piece
        level += 1
        jobs = [
            MergeJob(str(folder / f"level{level}-{j:05d}.parquet"), tuple(paths), (j, shares))
            for j in range(shares)
        ]
        paths = _merge_level(executor, jobs, paths, f"{desc} (level {level})")
    return paths


def _merge_level(executor: Mapper, jobs: list[MergeJob], paths: list[str], desc: str) -> list[str]:
    merged = executor.map(merge_files, jobs, desc=desc)
    for p in paths:  # this level is consumed: disk stays ~2 levels of count files
        Path(p).unlink(missing_ok=True)
    return merged


def _write(path: Path, table: pa.Table) -> None:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **PARQUET_KW)
