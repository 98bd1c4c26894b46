"""download, JSONL in parallel: byte ranges read by executor tasks, the same parts as the serial
reader, byte for byte.

1. `count` (one task per range, skipped when there is one range): parse the range, return its
   line, record and malformed counts. The driver turns them into each range's first line
   number, first record number and first malformed number (O(ranges)) and stops the run on too
   many malformed lines or no documents, before anything is written.
2. `write` (one task per range, recorded for resume): parse the range again and write the parts
   whose *first* record lies in it, reading on into the next ranges to finish its last part
   (at most one part's worth). Part k always holds records k·docs_per_part..., so the parts are
   the serial reader's whatever the ranges. Each task returns its range's statistics and writes
   the range's malformed lines to a temp file.
3. `rejected` (only if there were malformed lines): one task per rejected part gathers its lines
   from those temp files, which are then removed.

The driver holds O(ranges) numbers; workers one range's read buffer and one part.
"""

from __future__ import annotations

import bisect
import functools
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.io import docs_table, part_name, read_table, text_bytes, write_table
from pipeline.sources.files import parse_jsonl_line
from pipeline.sources.ranges import ByteRange, plan_ranges, range_lines
from pipeline.sources.records import Malformed, Record

MAX_EXAMPLES = 5
MIN_RANGE_BYTES = 8 << 20  # smaller ranges cost more in re-read part tails than they gain
MAX_RANGE_BYTES = 128 << 20  # bounds one task's work, so retries and resume stay cheap
RANGES_PER_WORKER = 4  # enough ranges to keep every worker busy despite uneven ranges
BAD_DIR = ".malformed"  # temp folder of each range's malformed lines, removed at the end


@dataclass(frozen=True)
class Parse:
    """What every task needs to turn a line into a record."""

    text_field: str
    id_field: str | None
    source: str


@dataclass(frozen=True)
class Span:
    """A range and where it sits in the whole input."""

    rng: ByteRange
    first_line: int  # the line number of its first line in its file
    good_before: int  # records in all earlier ranges
    bad_before: int  # malformed lines in all earlier ranges


def target_bytes(total: int, workers: int) -> int:
    """Range size: one range per file on one worker (nothing to gain), else ~4 per worker."""
    if workers <= 1:
        return max(total, 1)
    share = total // (workers * RANGES_PER_WORKER)
    return min(MAX_RANGE_BYTES, max(MIN_RANGE_BYTES, share))


def items(span: Span, parse: Parse) -> Iterator[Record | Malformed]:
    """The range's records and malformed lines in order, numbered as the serial reader does."""
    path = Path(span.rng.path)
    name = path.name
    for lineno, raw in enumerate(range_lines(span.rng), start=span.first_line):
        item = parse_jsonl_line(
            raw,
            f"{path}:{lineno}",
            f"{name}:{lineno}",
            parse.text_field,
            parse.id_field,
            parse.source,
        )
        if item is not None:
            yield item


# ---------------------------------------------------------------- pass 1: counts


def count_range(rng: ByteRange, parse: Parse) -> dict[str, Any]:
    """Lines, records and malformed lines of one range (and its first malformed line)."""
    lines = good = bad = 0
    first_bad: list[Any] | None = None
    for lines, raw in enumerate(range_lines(rng), start=1):
        item = parse_jsonl_line(raw, "", "", parse.text_field, parse.id_field, parse.source)
        if item is None:
            continue
        if isinstance(item, Malformed):
            bad += 1
            if first_bad is None:
                first_bad = [lines, item.detail]
        else:
            good += 1
    return {"lines": lines, "good": good, "bad": bad, "first_bad": first_bad}


# ---------------------------------------------------------------- pass 2: parts


def write_part(out_dir: Path, index: int, recs: list[Record], labelled: bool) -> tuple[str, int]:
    """Part `index` of the records (the serial writer's code too); (its name, text bytes)."""
    texts = [r.text for r in recs]
    extra = {"label": pa.array([r.label for r in recs], pa.string())} if labelled else {}
    table = docs_table([r.id for r in recs], texts, [r.source for r in recs], **extra)
    rel = part_name(index)
    write_table(out_dir / rel, table)
    return rel, text_bytes(texts)


def rejected_table(bad: list[Malformed]) -> pa.Table:
    return docs_table(
        [b.where for b in bad],
        [b.raw for b in bad],
        ["download"] * len(bad),
        reasons=pa.array([[b.reason] for b in bad], pa.list_(pa.string())),
    )


def write_range(job: tuple[list[Span], int, int | None], out_dir: str, size: int, parse: Parse):
    """Write the parts that start in spans[0] (reading on into spans[1:] to finish the last
    one) and spans[0]'s malformed lines; return spans[0]'s statistics. `own` is spans[0]'s
    record count and `total` all records (None: spans[0] is the only range)."""
    spans, own, total = job
    out = Path(out_dir)
    g0 = spans[0].good_before
    first_part = -(-g0 // size)
    end = None if total is None else min(total, ((g0 + own - 1) // size + 1) * size)
    stats = RangeStats()
    outputs: list[str] = []
    buf: list[Record] = []
    bad: list[Malformed] = []
    gi = g0  # global number of the next record
    for i, span in enumerate(spans):
        if i > 0 and (end is None or gi >= end or first_part * size >= g0 + own):
            break
        for item in items(span, parse):
            if i == 0:
                stats.add(item)
            if isinstance(item, Malformed):
                if i == 0:
                    bad.append(item)
                continue
            if gi >= first_part * size and (end is None or gi < end):
                buf.append(item)
                if len(buf) == size or (end is not None and gi == end - 1):
                    rel, nbytes = write_part(out, gi // size, buf, False)
                    outputs.append(rel)
                    stats.bytes_out += nbytes
                    buf = []
            gi += 1
            if i > 0 and end is not None and gi >= end:
                break
    if buf:  # the one range: its last part
        assert total is None, "a range job must reach the end of its last part"
        rel, nbytes = write_part(out, (gi - 1) // size, buf, False)
        outputs.append(rel)
        stats.bytes_out += nbytes
    bad_file = None
    if bad:
        bad_file = f"{BAD_DIR}/{part_name(spans[0].bad_before, '')}-{len(bad)}.parquet"
        write_table(out / bad_file, rejected_table(bad))
        outputs.append(bad_file)
    return {"outputs": outputs, "stats": stats.as_dict(), "bad_file": bad_file}


class RangeStats:
    """The serial loop's counters, for one range."""

    def __init__(self) -> None:
        self.docs_in = self.docs_out = self.bytes_in = self.bytes_out = 0
        self.dropped: dict[str, int] = {}
        self.examples: list[str] = []

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "dropped": self.dropped,
            "examples": self.examples,
        }


# ---------------------------------------------------------------- pass 3: rejected parts


def write_rejected(job: tuple[int, list[tuple[str, int, int]]], out_dir: str) -> dict[str, Any]:
    """Rejected part `index` from slices (temp file, first row, rows) of the ranges' files."""
    index, slices = job
    out = Path(out_dir)
    cols: dict[str, list] = {"id": [], "text": [], "reasons": []}
    for rel, row, n in slices:
        t = read_table(out / rel).slice(row, n)
        for c in cols:
            cols[c].extend(t.column(c).to_pylist())
    table = docs_table(
        cols["id"],
        cols["text"],
        ["download"] * len(cols["id"]),
        reasons=pa.array(cols["reasons"], pa.list_(pa.string())),
    )
    rel = f"rejected/{part_name(index)}"
    write_table(out / rel, table)
    return {"outputs": [rel]}


def rejected_jobs(
    bad_files: list[tuple[str, int, int]], total_bad: int, size: int
) -> list[tuple[int, list[tuple[str, int, int]]]]:
    """(part index, slices) per rejected part; bad_files = (file, first bad number, rows)."""
    starts = [b for _, b, _ in bad_files]
    jobs = []
    for index, lo in enumerate(range(0, total_bad, size)):
        hi = min(lo + size, total_bad)
        slices = []
        f = bisect.bisect_right(starts, lo) - 1
        at = lo
        while at < hi:
            rel, first, n = bad_files[f]
            take = min(hi, first + n) - at
            slices.append((rel, at - first, take))
            at += take
            f += 1
        jobs.append((index, slices))
    return jobs


# ---------------------------------------------------------------- driver


@dataclass
class SplitResult:
    outputs: list[str]
    docs_in: int
    docs_out: int
    bytes_in: int
    bytes_out: int
    dropped: Counter[str]
    examples: list[str]


def read_split(
    paths: list[Path],
    parse: Parse,
    size: int,
    out_dir: Path,
    executor: Any,
    check: Any,
    target: int | None = None,
) -> SplitResult:
    """Write the download parts of the JSONL `paths` with `executor`'s tasks. `check(docs_in,
    bad, first_example)` raises the serial stage's errors (too many malformed lines, nothing
    read); it runs before anything is written when the counts are known first."""
    if target is None:
        total_bytes = sum(p.stat().st_size for p in paths if p.is_file())
        target = target_bytes(total_bytes, executor.workers)
    ranges = plan_ranges(paths, target)
    spans, goods, total = _number(ranges, parse, executor, check)
    jobs = []
    for r, span in enumerate(spans):
        last, g0 = r, span.good_before
        if total is not None and -(-g0 // size) * size < g0 + goods[r]:
            # a part starts in r: the ranges up to the one holding its last part's end
            g_end = min(total, ((g0 + goods[r] - 1) // size + 1) * size)
            while last + 1 < len(spans) and spans[last + 1].good_before < g_end:
                last += 1
        jobs.append((spans[r : last + 1], goods[r], total))
    fn = functools.partial(write_range, out_dir=str(out_dir), size=size, parse=parse)
    results = executor.map(fn, jobs, "download write") if jobs else []
    res = SplitResult([], 0, 0, 0, 0, Counter(), [])
    bad_files = []
    for span, r in zip(spans, results, strict=True):
        st = r["stats"]
        res.docs_in += st["docs_in"]
        res.docs_out += st["docs_out"]
        res.bytes_in += st["bytes_in"]
        res.bytes_out += st["bytes_out"]
        res.dropped.update(st["dropped"])  # in first-seen order, as the serial loop's
        res.examples.extend(st["examples"][: MAX_EXAMPLES - len(res.examples)])
        res.outputs.extend(o for o in r["outputs"] if not o.startswith(BAD_DIR))
        if r["bad_file"]:
            bad_files.append((r["bad_file"], span.bad_before, st["docs_in"] - st["docs_out"]))
    bad = sum(res.dropped.values())
    check(res.docs_in, bad, res.examples[0] if res.examples else None)
    if bad:
        fn = functools.partial(write_rejected, out_dir=str(out_dir))
        for r in executor.map(fn, rejected_jobs(bad_files, bad, size), "download rejected"):
            res.outputs.extend(r["outputs"])
    shutil.rmtree(out_dir / BAD_DIR, ignore_errors=True)
    res.outputs.sort(key=lambda o: (o.startswith("rejected/"), o))
    return res


def _number(
    ranges: list[ByteRange], parse: Parse, executor: Any, check: Any
) -> tuple[list[Span], list[int], int | None]:
    """Spans with their first line, record and malformed numbers, each range's record count and
    the total (None, counts unknown: a single range is written without counting first)."""
    if len(ranges) <= 1:
        return [Span(r, 1, 0, 0) for r in ranges], [0] * len(ranges), None
    fn = functools.partial(count_range, parse=parse)
    counts = executor.map(fn, ranges, "download count")
    spans, goods = [], []
    line = {r.path: 1 for r in ranges}
    good = bad = 0
    first = None
    for rng, c in zip(ranges, counts, strict=True):
        spans.append(Span(rng, line[rng.path], good, bad))
        goods.append(c["good"])
        if first is None and c["first_bad"] is not None:
            lineno, detail = c["first_bad"]
            first = f"{rng.path}:{line[rng.path] + lineno - 1}: {detail}"
        line[rng.path] += c["lines"]
        good += c["good"]
        bad += c["bad"]
    check(good + bad, bad, first)
    return spans, goods, good
