"""download, JSONL in parallel: byte ranges read by executor tasks, the same parts as the serial
reader, byte for byte, each line parsed once.

0. `download lines` (only for ranges that do not start a file): count the range's newlines
   (bytes.count, ~1 GB/s); the driver turns them into each range's first line number.
1. `download read` (one task per range): parse the range and append its records, with their
   final ids, to a temp Arrow file (uncompressed IPC; its malformed lines to another); return
   the range's statistics and counts. The driver numbers records and malformed lines from the
   counts (O(ranges)) and stops the run on too many malformed lines or no documents, before any
   part is written.
2. `download write`: one task per part k gathers records k·docs_per_part... from the one or two
   temp files that hold them and writes the part; `download rejected` likewise for `rejected/`.
   The temp files are then removed.

A single range (one file on one worker) skips the temp files: one task writes its parts as the
serial reader does. The driver holds O(ranges + parts) numbers; a worker one batch of records
(pass 1) or one part (pass 2). Every map that writes files returns {"outputs": ...}, so all are
recorded for part-level resume.
"""

from __future__ import annotations

import bisect
import functools
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.io import temp_path, text_bytes
from pipeline.parts import docs_table, part_name, write_table
from pipeline.sources.files import parse_jsonl_line
from pipeline.sources.ranges import READ_BYTES, ByteRange, plan_ranges, range_lines
from pipeline.sources.records import Malformed, Record

MAX_EXAMPLES = 5
MIN_RANGE_BYTES = 8 << 20  # below this a task's start-up costs more than its work
MAX_RANGE_BYTES = 128 << 20  # bounds one task's work, so retries and resume stay cheap
RANGES_PER_WORKER = 4  # enough ranges to keep every worker busy despite uneven ranges
BATCH_ROWS = 2048  # records per batch appended to a temp file (bounds a reading task's memory)
TEMP_DIR = ".ranges"  # temp Arrow files of pass 1, removed at the end

GOOD_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
URL_SCHEMA = GOOD_SCHEMA.append(pa.field("url", pa.string()))  # with download.url_field
BAD_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("reason", pa.string())])


@dataclass(frozen=True)
class Parse:
    """What every task needs to turn a line into a record."""

    text_field: str
    id_field: str | None
    source: str
    url_field: str | None = None  # kept as the `url` column

    @property
    def columns(self) -> dict[str, pa.DataType]:
        """The parts' columns after id, text, source."""
        return {"url": pa.string()} if self.url_field else {}


@dataclass(frozen=True)
class Span:
    rng: ByteRange
    first_line: int  # the line number of its first line in its file


def target_bytes(total: int, workers: int) -> int:
    """Range size: one range per file on one worker (nothing to gain), else ~4 per worker."""
    if workers <= 1:
        return max(total, 1)
    share = total // (workers * RANGES_PER_WORKER)
    return min(MAX_RANGE_BYTES, max(MIN_RANGE_BYTES, share))


def items(span: Span, parse: Parse):
    """The range's records and malformed lines in order, numbered as the serial reader does."""
    path = Path(span.rng.path)
    name = path.name
    tf, idf, src, uf = parse.text_field, parse.id_field, parse.source, parse.url_field
    for lineno, raw in enumerate(range_lines(span.rng), start=span.first_line):
        item = parse_jsonl_line(raw, f"{path}:{lineno}", f"{name}:{lineno}", tf, idf, src, uf)
        if item is not None:
            yield item


@dataclass
class RangeStats:
    """The serial loop's counters, for one range (or the whole input, summed in order)."""

    docs_in: int = 0
    docs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # first-seen order, as serial
    examples: list[str] = field(default_factory=list)

    def add(self, item: Record | Malformed) -> None:
        self.docs_in += 1
        if isinstance(item, Malformed):
            self.dropped[item.reason] = self.dropped.get(item.reason, 0) + 1
            self.bytes_in += len(item.raw.encode("utf-8", "replace"))
            if len(self.examples) < MAX_EXAMPLES:
                self.examples.append(f"{item.where}: {item.detail}")
            return
        self.bytes_in += len(item.text.encode("utf-8"))
        self.docs_out += 1

    def merge(self, other: RangeStats) -> None:
        self.docs_in += other.docs_in
        self.docs_out += other.docs_out
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        for reason, n in other.dropped.items():
            self.dropped[reason] = self.dropped.get(reason, 0) + n
        self.examples.extend(other.examples[: MAX_EXAMPLES - len(self.examples)])


# ---------------------------------------------------------------- parts (both paths)


def write_part(
    out_dir: Path,
    index: int,
    recs: list[Record],
    labelled: bool,
    columns: dict[str, pa.DataType] | None = None,
) -> tuple[str, int]:
    """Part `index` of the records (the serial writer's code too); (its name, text bytes).
    `columns`: the extra columns (name -> type) taken from each Record.columns (null if absent)."""
    labels = [r.label for r in recs] if labelled else None
    extra = {
        name: pa.array([(r.columns or {}).get(name) for r in recs], tp)
        for name, tp in (columns or {}).items()
    }
    return write_docs(
        out_dir,
        index,
        [r.id for r in recs],
        [r.text for r in recs],
        [r.source for r in recs],
        labels,
        **extra,
    )


def write_docs(
    out_dir: Path,
    index: int,
    ids: list[str],
    texts: list[str],
    sources: list[str],
    labels: list[str | None] | None = None,
    **columns: pa.Array,
) -> tuple[str, int]:
    extra = {"label": pa.array(labels, pa.string())} if labels is not None else {}
    extra.update(columns)
    rel = part_name(index)
    write_table(out_dir / rel, docs_table(ids, texts, sources, **extra))
    return rel, text_bytes(texts)


def rejected_table(where: list[str], raw: list[str], reasons: list[str]) -> pa.Table:
    return docs_table(
        where,
        raw,
        ["download"] * len(where),
        reasons=pa.array([[r] for r in reasons], pa.list_(pa.string())),
    )


# ---------------------------------------------------------------- pass 0: line numbers


def count_newlines(rng: ByteRange) -> int:
    assert rng.end is not None
    n = 0
    with open(rng.path, "rb") as f:
        f.seek(rng.start)
        left = rng.end - rng.start
        while left > 0 and (block := f.read(min(READ_BYTES, left))):
            n += block.count(b"\n")
            left -= len(block)
    return n


# ---------------------------------------------------------------- pass 1: read


_NO_VALUE = object()  # ArrowSink.add's third value when the schema has two columns


class ArrowSink:
    """Appends rows to a temp Arrow IPC file in batches; created on the first row."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.schema = path, schema
        self.cols: list[list] = [[] for _ in schema]
        self.rows = 0
        self._tmp: Path | None = None
        self._writer: Any = None

    def add(self, a: str, b: str, c: str | None | object = _NO_VALUE) -> None:
        cols = self.cols  # called per record: no zip, no *args
        cols[0].append(a)
        cols[1].append(b)
        if c is not _NO_VALUE:
            cols[2].append(c)
        self.rows += 1
        if len(cols[0]) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.cols[0]:
            return
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._tmp = temp_path(self.path)
            self._writer = pa.ipc.new_file(str(self._tmp), self.schema)
        batch = pa.record_batch(
            [pa.array(c, f.type) for c, f in zip(self.cols, self.schema, strict=True)],
            schema=self.schema,
        )
        self._writer.write_batch(batch)
        self.cols = [[] for _ in self.schema]

    def close(self) -> bool:
        """Finish the file (renamed into place); whether there is one."""
        self._flush()
        if self._writer is None:
            return False
        self._writer.close()
        assert self._tmp is not None
        self._tmp.replace(self.path)
        return True


@dataclass(frozen=True, slots=True)
class RangeJob:
    """Range `index` of the inputs (pass 1): the span it parses."""

    index: int
    span: Span


def read_range(job: RangeJob, out_dir: str, parse: Parse) -> dict[str, Any]:
    """Parse one range into temp files of its records and malformed lines; its statistics."""
    index, span = job.index, job.span
    out = Path(out_dir)
    good_rel, bad_rel = f"{TEMP_DIR}/{index:06d}-good.arrow", f"{TEMP_DIR}/{index:06d}-bad.arrow"
    schema = URL_SCHEMA if parse.url_field else GOOD_SCHEMA
    good, bad = ArrowSink(out / good_rel, schema), ArrowSink(out / bad_rel, BAD_SCHEMA)
    stats = RangeStats()
    for item in items(span, parse):
        stats.add(item)
        if isinstance(item, Malformed):
            bad.add(item.where, item.raw, item.reason)
        elif parse.url_field:
            good.add(item.id, item.text, (item.columns or {}).get("url"))
        else:
            good.add(item.id, item.text)
    outputs = [rel for rel, sink in ((good_rel, good), (bad_rel, bad)) if sink.close()]
    return {"outputs": outputs, "stats": stats, "good": good.rows, "bad": bad.rows}


# ---------------------------------------------------------------- pass 2: parts from temp files


@dataclass(frozen=True, slots=True)
class RowSlice:
    """`rows` rows of pass 1's temp file `file` (relative to the stage folder) from row `row`."""

    file: str
    row: int
    rows: int


@dataclass(frozen=True, slots=True)
class GatherJob:
    """Output part `index` (pass 2): the temp file slices it is made of, in order."""

    index: int
    slices: list[RowSlice]


def _rows(out: Path, slices: list[RowSlice], columns: list[str]) -> list[list]:
    cols: list[list] = [[] for _ in columns]
    for s in slices:
        with pa.memory_map(str(out / s.file)) as src:
            t = pa.ipc.open_file(src).read_all().slice(s.row, s.rows)
            for c, name in zip(cols, columns, strict=True):
                c.extend(t.column(name).to_pylist())
    return cols


def gather_part(job: GatherJob, out_dir: str, source: str, extra: tuple[str, ...] = ()):
    """Part `index` from slices (temp file, first row, rows) of pass 1's record files. Built
    from the Arrow columns directly (no Python strings): the same table, the same bytes.
    `extra`: string columns after id, text, source (url; a web file's date, content_type)."""
    index, slices = job.index, job.slices
    out = Path(out_dir)
    chunks: dict[str, list[pa.Array]] = {"id": [], "text": [], **{c: [] for c in extra}}
    maps = [pa.memory_map(str(out / s.file)) for s in slices]
    try:
        for src, s in zip(maps, slices, strict=True):
            t = pa.ipc.open_file(src).read_all().slice(s.row, s.rows)
            for name, c in chunks.items():
                c.extend(t.column(name).chunks)
        ids, texts = (pa.concat_arrays(chunks[c]) for c in ("id", "text"))  # copies
    finally:
        for src in maps:
            src.close()
    cols = {"id": ids, "text": texts, "source": pa.array([source] * len(ids), pa.string())}
    cols.update({c: pa.concat_arrays(chunks[c]) for c in extra})
    table = pa.table(cols)
    rel = part_name(index)
    write_table(out / rel, table)
    nbytes = pc.sum(pc.binary_length(texts)).as_py() or 0  # = text_bytes: valid UTF-8 here
    return {"outputs": [rel], "bytes": nbytes}


def gather_rejected(job: GatherJob, out_dir: str):
    """Rejected part `index` from slices of pass 1's malformed-line files."""
    index, slices = job.index, job.slices
    out = Path(out_dir)
    where, raw, reasons = _rows(out, slices, ["id", "text", "reason"])
    rel = f"rejected/{part_name(index)}"
    write_table(out / rel, rejected_table(where, raw, reasons))
    return {"outputs": [rel]}


def slice_jobs(files: list[tuple[str, int, int]], total: int, size: int) -> list[GatherJob]:
    """(part index, [(file, first row, rows)]) per part of `size` rows over the concatenation
    of `files` = [(file, number of its first row overall, rows)] in order."""
    starts = [first for _, first, _ in files]
    jobs = []
    for index, lo in enumerate(range(0, total, size)):
        hi = min(lo + size, total)
        slices = []
        f = bisect.bisect_right(starts, lo) - 1
        at = lo
        while at < hi:  # files hold >= 1 row each: every step takes some
            rel, first, n = files[f]
            take = min(hi, first + n) - at
            slices.append(RowSlice(rel, at - first, take))
            at += take
            f += 1
        jobs.append(GatherJob(index, slices))
    return jobs


# ---------------------------------------------------------------- one range: no temp files


def write_single(span: Span, out_dir: str, size: int, parse: Parse) -> dict[str, Any]:
    """The one range: parts written as they fill, as the serial reader does."""
    out = Path(out_dir)
    stats = RangeStats()
    outputs: list[str] = []
    buf: list[Record] = []
    bad: list[Malformed] = []
    parts = rejected = 0
    for item in items(span, parse):
        stats.add(item)
        if isinstance(item, Malformed):
            bad.append(item)
            if len(bad) == size:
                outputs.append(_write_bad(out, rejected, bad))
                rejected, bad = rejected + 1, []
            continue
        buf.append(item)
        if len(buf) == size:
            rel, nbytes = write_part(out, parts, buf, False, parse.columns)
            outputs.append(rel)
            stats.bytes_out += nbytes
            parts, buf = parts + 1, []
    if buf:
        rel, nbytes = write_part(out, parts, buf, False, parse.columns)
        outputs.append(rel)
        stats.bytes_out += nbytes
    if bad:
        outputs.append(_write_bad(out, rejected, bad))
    return {"outputs": outputs, "stats": stats}


def _write_bad(out: Path, index: int, bad: list[Malformed]) -> str:
    rel = f"rejected/{part_name(index)}"
    write_table(
        out / rel,
        rejected_table([b.where for b in bad], [b.raw for b in bad], [b.reason for b in bad]),
    )
    return rel


# ---------------------------------------------------------------- driver


def read_split(
    paths: list[Path],
    parse: Parse,
    size: int,
    out_dir: Path,
    executor: Any,
    check: Any,
) -> tuple[list[str], RangeStats]:
    """Write the download parts of the JSONL `paths` with `executor`'s tasks; (outputs, stats).
    `check(docs_in, bad, first_example)` raises the serial stage's errors (too many malformed
    lines, nothing read) before any part is written."""
    total_bytes = sum(p.stat().st_size for p in paths if p.is_file())
    ranges = plan_ranges(paths, target_bytes(total_bytes, executor.workers))
    spans = _spans(ranges, executor)
    if len(spans) <= 1:  # one file on one worker: no temp files
        fn = functools.partial(write_single, out_dir=str(out_dir), size=size, parse=parse)
        results = executor.map(fn, spans, "download write")
        stats = results[0]["stats"] if results else RangeStats()
        check(stats.docs_in, stats.docs_in - stats.docs_out, _first(stats))
        return (results[0]["outputs"] if results else []), stats
    fn = functools.partial(read_range, out_dir=str(out_dir), parse=parse)
    results = executor.map(fn, [RangeJob(i, s) for i, s in enumerate(spans)], "download read")
    stats = RangeStats()
    good_files, bad_files = [], []
    for i, r in enumerate(results):
        if r["good"]:
            good_files.append((f"{TEMP_DIR}/{i:06d}-good.arrow", stats.docs_out, r["good"]))
        bad_before = stats.docs_in - stats.docs_out
        if r["bad"]:
            bad_files.append((f"{TEMP_DIR}/{i:06d}-bad.arrow", bad_before, r["bad"]))
        stats.merge(r["stats"])
    bad = stats.docs_in - stats.docs_out
    check(stats.docs_in, bad, _first(stats))
    fn = functools.partial(
        gather_part, out_dir=str(out_dir), source=parse.source, extra=tuple(parse.columns)
    )
    parts = executor.map(fn, slice_jobs(good_files, stats.docs_out, size), "download write")
    stats.bytes_out = sum(p["bytes"] for p in parts)
    outputs = [o for p in parts for o in p["outputs"]]
    if bad:
        fn = functools.partial(gather_rejected, out_dir=str(out_dir))
        for r in executor.map(fn, slice_jobs(bad_files, bad, size), "download rejected"):
            outputs.extend(r["outputs"])
    shutil.rmtree(out_dir / TEMP_DIR, ignore_errors=True)
    return outputs, stats


def _first(stats: RangeStats) -> str | None:
    return stats.examples[0] if stats.examples else None


def _spans(ranges: list[ByteRange], executor: Any) -> list[Span]:
    """Each range with its first line number: newlines counted in tasks for ranges that do not
    start their file (a compressed file is always one range, starting at line 1)."""
    before = [a for a, b in zip(ranges, ranges[1:], strict=False) if b.start > 0]
    counts = dict(zip(before, executor.map(count_newlines, before, "download lines"), strict=True))
    spans, line = [], 1
    for rng in ranges:
        line = 1 if rng.start == 0 else line
        spans.append(Span(rng, line))
        line += counts.get(rng, 0)
    return spans
