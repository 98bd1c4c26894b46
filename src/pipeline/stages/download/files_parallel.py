"""download, web files in parallel: one executor task per WARC / WET / HTML file (HTML
extraction is the cost, ~2 ms a page), the serial reader's parts byte for byte.

1. `download read` (one task per file): the file's documents and dropped records, in order, into
   temp Arrow files (`.files/NNNNNN-good.arrow`, `-bad.arrow`); returns the file's counts.
2. The driver numbers the rows from the counts and raises the serial stage's errors before any
   part is written; then `download write` / `download rejected` gather each part's rows from
   the temp files (split.py's tasks, as for JSONL byte ranges). The temp files are removed.

Used for more than one file on more than one worker without max_docs (the serial reader stops
early); parts, rejected parts and statistics equal the serial reader's (tests).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.sources.records import Malformed, Record
from pipeline.stages.download.split import (
    BATCH_ROWS,
    ArrowSink,
    RangeStats,
    gather_part,
    gather_rejected,
    slice_jobs,
)

TEMP_DIR = ".files"
Reader = Callable[[list[Path]], Iterable[Record | Malformed]]


@dataclass(frozen=True, slots=True)
class FileJob:
    index: int
    path: str


class _Rows(ArrowSink):
    """split.py's temp Arrow sink, string columns named `names`, rows added as one tuple."""

    def __init__(self, path: Path, names: tuple[str, ...]):
        super().__init__(path, pa.schema([(n, pa.string()) for n in names]))

    def add(self, values: tuple[str | None, ...]) -> None:  # type: ignore[override]
        for col, v in zip(self.cols, values, strict=True):
            col.append(v)
        self.rows += 1
        if len(self.cols[0]) >= BATCH_ROWS:
            self._flush()


def read_file(job: FileJob, out_dir: str, read: Reader, columns: tuple[str, ...]) -> dict:
    """Task: one file's records into temp files; its statistics and row counts."""
    out = Path(out_dir)
    stem = f"{TEMP_DIR}/{job.index:06d}"
    good_rel, bad_rel = f"{stem}-good.arrow", f"{stem}-bad.arrow"
    good = _Rows(out / good_rel, ("id", "text", *columns))
    bad = _Rows(out / bad_rel, ("id", "text", "reason"))
    stats = RangeStats()
    for item in read([Path(job.path)]):
        stats.add(item)
        if isinstance(item, Malformed):
            bad.add((item.where, item.raw, item.reason))
        else:
            extra = item.columns or {}
            good.add((item.id, item.text, *(extra.get(c) for c in columns)))
    outputs = [rel for rel, sink in ((good_rel, good), (bad_rel, bad)) if sink.close()]
    return {"outputs": outputs, "stats": stats, "good": good.rows, "bad": bad.rows}


def read_files(
    paths: list[Path],
    read: Reader,
    label: str,
    columns: tuple[str, ...],
    size: int,
    out_dir: Path,
    executor: Any,
    check: Callable[[int, int, str | None], None],
) -> tuple[list[str], RangeStats]:
    """Parts of `size` documents from `paths` read by one task each; (outputs, stats).
    `check(docs_in, bad, first_example)` raises the serial stage's errors before any part."""
    fn = functools.partial(read_file, out_dir=str(out_dir), read=read, columns=columns)
    results = executor.map(fn, [FileJob(i, str(p)) for i, p in enumerate(paths)], "download read")
    stats = RangeStats()
    good_files, bad_files = [], []
    for i, r in enumerate(results):
        bad_before = stats.docs_in - stats.docs_out
        if r["good"]:
            good_files.append((f"{TEMP_DIR}/{i:06d}-good.arrow", stats.docs_out, r["good"]))
        if r["bad"]:
            bad_files.append((f"{TEMP_DIR}/{i:06d}-bad.arrow", bad_before, r["bad"]))
        stats.merge(r["stats"])
    bad = stats.docs_in - stats.docs_out
    check(stats.docs_in, bad, stats.examples[0] if stats.examples else None)
    fn = functools.partial(gather_part, out_dir=str(out_dir), source=label, extra=columns)
    parts = executor.map(fn, slice_jobs(good_files, stats.docs_out, size), "download write")
    stats.bytes_out = sum(p["bytes"] for p in parts)
    outputs = [o for p in parts for o in p["outputs"]]
    if bad:
        fn = functools.partial(gather_rejected, out_dir=str(out_dir))
        for r in executor.map(fn, slice_jobs(bad_files, bad, size), "download rejected"):
            outputs.extend(r["outputs"])
    shutil.rmtree(out_dir / TEMP_DIR, ignore_errors=True)
    return outputs, stats
