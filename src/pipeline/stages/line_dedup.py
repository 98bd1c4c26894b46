"""line_dedup: remove lines (or paragraphs) that recur across documents, keeping each in the
first document that has it (by a seeded document order): navigation, footers, cookie banners.

Three executor maps, memory bounded by a part or a hash partition (never a set of every line):
1. per part: hash each candidate unit (pipeline.dedup.lines), write its (hash, document key)
   rows sorted by hash and the per-unit hashes in text order to the stage's work folder;
2. per hash partition: read that hash range from every part's rows, keep the hashes seen in
   >= `min_docs` documents with their first document (`rep-p`);
3. per part: flag the units to remove, rewrite the texts, drop a changed document left under
   `min_words` (reason `short_after_line_dedup`), write kept and rejected parts.
A small input (text under SMALL_TEXT_BYTES) skips the work files: map 1 returns its arrays (for
lines, the stripped lines), the driver numbers and counts every part's units at once (steps 2
and 3's lookup, no sort) and map 3 gets removal flags; the same outputs, byte for byte.
Every row is keyed by its global index and the seed, so outputs are byte-identical for any
worker count or executor. Runs after dedup: see docs/dedup.md ("Line and paragraph dedup").
"""

from __future__ import annotations

import functools
import heapq
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import bounded, option, setting
from pipeline.dedup import lines
from pipeline.errors import DataError
from pipeline.io import PARQUET_FAST_KW
from pipeline.parts import write_kept_and_rejected
from pipeline.stage import Stage, StageContext, StageResult
from pipeline.stages.dedup import files

REASON = "short_after_line_dedup"
WORK_DIR = ".lines"  # work files (rows, hashes, repeated units) in the stage's temp folder
ROWS_PER_PARTITION = 1 << 23  # (hash, key) rows per reduce task: ~128 MB + its sort
SMALL_TEXT_BYTES = 1 << 24  # input text (uncompressed) counted in memory: <= ~16 M units, 0.5 GB
EXAMPLE_CHARS = 120


@dataclass(frozen=True)
class LineDedupConfig:
    RECIPE_SECTION: ClassVar[str] = "line_dedup"

    unit: Literal["line", "paragraph"] = option(
        "line", "what is compared: lines (split on \\n) or paragraphs (split on blank lines)"
    )
    min_docs: int = bounded(2, ge=2, doc="a unit in at least this many documents stays in one")
    min_chars: int = bounded(
        0, ge=0, doc="characters of a stripped unit; shorter units are never removed"
    )
    min_words: int | None = bounded(
        50, ge=0, doc="words (whitespace) a changed document keeps, else dropped; null = off"
    )
    num_examples: int = bounded(10, ge=0, doc="most repeated units shown in the report")


@dataclass(frozen=True, slots=True)
class LinePart:
    """Part `index` at `path`, whose first row is global row `first`."""

    index: int
    path: Path
    first: int


def _save(work: str, kind: str, index: int, arr: np.ndarray) -> None:
    """A work file, written to a temp name and renamed (atomic) but not fsynced: work files die
    with the stage's temp folder, so a crash re-runs the stage and never reads them."""
    path = files.path(work, kind, index)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(arr), allow_pickle=False)
    os.replace(tmp, path)


def _load(work: str, kind: str, index: int) -> np.ndarray:
    """A whole work file in memory (small, or read whole anyway: no memory map set-up)."""
    return np.load(files.path(work, kind, index), allow_pickle=False)


def _enough_words(text: str, floor: int) -> tuple[bool, int]:
    """(text has >= `floor` whitespace words, its word count or -1 when not counted): a prefix
    usually decides it (a prefix's count never exceeds the whole text's)."""
    if len(text[: 16 * floor + 64].split()) >= floor:
        return True, -1
    n = len(text.split())
    return n >= floor, n


def _read(path: Path, whole: bool) -> pa.Table:
    """Part `path` (all columns, or only `text`), its text column checked: a string column
    with no nulls."""
    # opened once; one thread, no pre-buffering (each costs CPU: a pool, async reads)
    with pq.ParquetFile(path, pre_buffer=False) as f:
        names = f.schema_arrow.names
        if "text" not in names:
            raise DataError(str(path), f"column 'text' is missing; columns: {names}")
        table = f.read(columns=None if whole else ["text"], use_threads=False)
    col = table.column("text")
    if col.null_count:
        raise DataError(str(path), f"{col.null_count} rows have a null text")
    if not (pa.types.is_large_string(col.type) or pa.types.is_string(col.type)):
        raise DataError(str(path), f"column 'text' is {col.type}, expected string")
    return table


def _text_column(table: pa.Table) -> pa.Array:
    """A table's text column as one array."""
    return table.column("text").combine_chunks()


def _text_buffers(table: pa.Table) -> tuple[pa.DataType, np.ndarray, np.ndarray]:
    """A checked table's text column as (its type, UTF-8 data uint8, offsets int64 [rows+1]):
    the Arrow buffers themselves (zero copy), never a Python string per document."""
    col = _text_column(table)
    width = np.int64 if pa.types.is_large_string(col.type) else np.int32
    _, off_buf, data_buf = col.buffers()
    n = len(col)
    offsets = np.frombuffer(off_buf, width, n + 1, col.offset * np.dtype(width).itemsize)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return col.type, data, offsets.astype(np.int64)


def _hash_part(
    item: LinePart, cfg: LineDedupConfig, seed: int, work: str, in_memory: bool
) -> dict[str, Any]:
    """Map 1: `hashes-i` (uint64 [m], text order), `where-i` (each one's unit index in its
    document), `counts-i` (units per document) and `rows-i` ((hash, document key) uint64
    [2, k], sorted): saved to `work`, or returned (`arrays`) when `in_memory`; returns the
    part's counts."""
    table = _read(item.path, whole=in_memory)
    n = table.num_rows
    if cfg.unit == "line":  # Arrow's split and strip kernels: one C++ pass each
        ls, stripped = lines.arrow_lines(_text_column(table))
        if in_memory:  # the driver numbers the stripped lines themselves: no hash
            ok, where, counts = lines.arrow_line_candidates(ls, stripped, cfg.min_chars)
            arrays = {"stripped": stripped, "ok": ok, "where": where, "counts": counts}
            return {"docs": n, "arrays": {**arrays, "table": table, "spans": ls}}
        hashes, where, counts = lines.arrow_line_hashes(ls, stripped, cfg.min_chars)
        spans: Any = ls
    else:
        _, data, offsets = _text_buffers(table)
        spans = lines.unit_spans(data, offsets, cfg.unit)
        hashes, where, counts = lines.spans_hashes(data, spans, cfg.min_chars)
    out: dict[str, Any] = {"docs": n}
    arrays = {"hashes": hashes, "where": where, "counts": counts}
    if in_memory:  # the whole part travels on to map 3 (each part is read once); the driver
        out["arrays"] = {**arrays, "table": table, "spans": spans}  # counts all parts at once
        return out
    rows = lines.part_rows(hashes, counts, lines.doc_keys(item.first, n, seed))
    out["rows"] = rows.shape[1]
    for kind, arr in {**arrays, "rows": rows}.items():
        _save(work, kind, item.index, arr)
    return out


def _count(rows: np.ndarray, cfg: LineDedupConfig) -> tuple[np.ndarray, dict[str, Any]]:
    """Step 2 on rows uint64 [2, k] (one partition's, from every part): `rep` (hash, first
    key) and the number repeated with the `num_examples` most repeated as (documents, hash)."""
    rep, docs = lines.repeated(rows, cfg.min_docs)
    top = np.lexsort((rep[0], -docs))[: cfg.num_examples]
    return rep, {
        "repeated": rep.shape[1],
        "top": [(int(docs[j]), int(rep[0][j])) for j in top.tolist()],
    }


def _count_in_memory(
    arrays: list[dict], seed: int, cfg: LineDedupConfig
) -> tuple[list[np.ndarray], dict[str, Any], dict[int, str]]:
    """Steps 2 and 3's lookup for a small input, every part's candidates at once: each unit
    numbered by Arrow's hash table (lines: the stripped lines themselves, exact; paragraphs:
    their hashes), then lines.unit_removals. Returns each part's removal flags, _count's
    summary (hash keys, as the partitioned path has them) and, for lines, the examples' text."""
    counts = np.concatenate([np.zeros(0, np.int64), *(a["counts"] for a in arrays)])
    doc = np.repeat(np.arange(len(counts)), counts)  # global row of each candidate
    keys = lines.doc_keys(0, len(counts), seed)[doc]
    texts: dict[int, str] = {}
    if cfg.unit == "line":
        strings = [a["stripped"] for a in arrays]
        if len({s.type for s in strings}) > 1:
            strings = [s.cast(pa.large_string()) for s in strings]
        ids, distinct = lines.dense_ids(pa.chunked_array(strings, strings[0].type))
        ids = ids[np.concatenate([a["ok"] for a in arrays])]
        drop, rep, docs = lines.unit_removals(ids, len(distinct), keys, doc, cfg.min_docs)
        rep_strings = distinct.take(lines._ints(rep))
        rep_hashes = lines.string_hashes(rep_strings)
    else:
        hashes = np.concatenate([np.zeros(0, np.uint64), *(a["hashes"] for a in arrays)])
        ids, distinct = lines.dense_ids(lines._ints(hashes))
        drop, rep, docs = lines.unit_removals(ids, len(distinct), keys, doc, cfg.min_docs)
        rep_hashes = np.asarray(distinct.to_numpy(zero_copy_only=False), np.uint64)[rep]
    top = np.lexsort((rep_hashes, -docs))[: cfg.num_examples].tolist()
    if cfg.unit == "line":
        texts = {int(rep_hashes[j]): rep_strings[j].as_py()[:EXAMPLE_CHARS] for j in top}
    summary = {
        "repeated": len(rep),
        "top": [(int(docs[j]), int(rep_hashes[j])) for j in top],
    }
    cuts = np.cumsum([len(a["where"]) for a in arrays])[:-1]
    return np.split(drop, cuts), summary, texts


def _reduce_partition(p: int, cfg: LineDedupConfig, work: str, num_parts: int, bits: int):
    """Map 2: the hashes of partition `p` in >= min_docs documents -> `rep-p`; returns _count's
    summary."""
    got = [lines.slice_partition(files.load(work, "rows", i), p, bits) for i in range(num_parts)]
    rows = np.concatenate([np.zeros((2, 0), np.uint64), *got], axis=1)
    del got
    rep, summary = _count(rows, cfg)
    _save(work, "rep", p, rep)
    return summary


def _part_removals(
    work: str, index: int, first: int, seed: int, bits: int, small: dict | None
) -> tuple:
    """Part `index`'s candidate hashes uint64 [m], their document int64 [m], units per document
    int64 [n], unit indices int32 [m] and removal flags bool [m], looked up in each hash
    partition's `rep` file (or, for a small input, in `small`: the part's arrays and `rep`)."""
    if small is not None:  # hashes: None for lines (the driver numbered the strings)
        counts = small["counts"]
        doc_of = np.repeat(np.arange(len(counts)), counts)
        return small.get("hashes"), doc_of, counts, small["where"], small["drop"]
    hashes, counts = _load(work, "hashes", index), _load(work, "counts", index)
    where = _load(work, "where", index)
    doc_of = np.repeat(np.arange(len(counts)), counts)
    unit_keys = lines.doc_keys(first, len(counts), seed)[doc_of]
    if bits == 0:
        rep = _load(work, "rep", 0)
        return hashes, doc_of, counts, where, lines.removable(hashes, unit_keys, rep)
    drop = np.zeros(len(hashes), bool)
    part_of = hashes >> np.uint64(64 - bits)
    for p in np.unique(part_of).tolist():
        sel = np.flatnonzero(part_of == p)
        # memory-mapped: every part reads each partition's file, the page cache shares it
        drop[sel] = lines.removable(hashes[sel], unit_keys[sel], files.load(work, "rep", p))
    return hashes, doc_of, counts, where, drop


def _apply_part(
    task: tuple[LinePart, dict | None],
    cfg: LineDedupConfig,
    seed: int,
    work: str,
    out_dir: str,
    bits: int,
    shown: frozenset,
) -> dict[str, Any]:
    """Map 3 on (part, its arrays, table and removal flags for a small input, else None): cut
    the removed units out of the part's texts (every document at once: lines with Arrow's
    binary_join, paragraphs on bytes), write kept and rejected rows; returns counts and the
    text of the example hashes `shown` this part holds."""
    item, small = task
    table = small["table"] if small is not None else _read(item.path, whole=True)
    n = table.num_rows
    hashes, doc_of, counts, where, drop = _part_removals(
        work, item.index, item.first, seed, bits, small
    )
    if cfg.unit == "line":
        ls = small["spans"] if small is not None else lines.split_lines(_text_column(table))
        per_doc = np.diff(lines.list_offsets(ls))
    else:
        kind, data, offsets = _text_buffers(table)
        spans = small["spans"] if small is not None else lines.unit_spans(data, offsets, cfg.unit)
        start, end, per_doc = spans
    unit_of = (np.cumsum(per_doc) - per_doc)[doc_of] + where  # candidate -> unit index
    drop_unit = np.zeros(int(per_doc.sum()), bool)
    drop_unit[unit_of[drop]] = True
    if cfg.unit == "line":
        text, nbytes = lines.arrow_cut_lines(ls, drop_unit)
        kind, new_data, new_offsets = _text_buffers(pa.table({"text": text}))
        flat = ls.flatten()

        def unit_text(u: int) -> str:
            return flat[u].as_py()
    else:
        new_data, new_offsets, unit_bytes = lines.cut_units(
            data, offsets, start, end, per_doc, drop_unit
        )
        nbytes = int(unit_bytes.sum())

        def unit_text(u: int) -> str:
            return data[int(start[u]) : int(end[u])].tobytes().decode("utf-8", "surrogatepass")

    removed = np.bincount(doc_of[drop], minlength=n).astype(np.int64)
    changed_docs = np.flatnonzero(removed)
    keep = np.ones(n, bool)
    words = np.zeros(n, np.int64)
    if cfg.min_words is not None:
        for d in changed_docs.tolist():
            raw = new_data[new_offsets[d] : new_offsets[d + 1]].tobytes()
            keep[d], words[d] = _enough_words(raw.decode("utf-8", "surrogatepass"), cfg.min_words)
    if cfg.unit != "line":
        width = np.int64 if pa.types.is_large_string(kind) else np.int32
        text = pa.Array.from_buffers(
            kind, n, [None, pa.py_buffer(new_offsets.astype(width)), pa.py_buffer(new_data)]
        )
    examples = _examples(unit_text, hashes, unit_of, shown)
    kept = table.set_column(table.column_names.index("text"), "text", text)
    kept = kept.filter(pa.array(keep))
    reasons = [[REASON]] * int((~keep).sum())
    outputs, doc_counts = write_kept_and_rejected(
        Path(out_dir),
        item.index,
        table,
        keep,
        reasons,
        kept,
        PARQUET_FAST_KW,
        units_removed=pa.array(removed[~keep], pa.int64()),
        words_left=pa.array(words[~keep], pa.int64()),
    )
    doc_counts.dropped = {REASON: 0, **doc_counts.dropped}  # reported even at 0
    stats = {
        "units_in": len(where),
        "units_removed": int(drop.sum()),
        "bytes_removed": nbytes,
        "docs_changed": len(changed_docs),
    }
    return {"outputs": outputs, "counts": doc_counts, "stats": stats, "examples": examples}


def _examples(unit_text, hashes: np.ndarray, unit_of: np.ndarray, shown: frozenset) -> dict:
    """{hash: its first occurrence's text in this part, stripped, cut to EXAMPLE_CHARS} for
    the example hashes `shown` (candidates' hashes and unit indices; `unit_text(u)`: unit u's
    text)."""
    if not shown or hashes is None:
        return {}
    hit = np.flatnonzero(np.isin(hashes, np.array(sorted(shown), np.uint64)))
    found, first = np.unique(hashes[hit], return_index=True)
    return {
        h: unit_text(int(unit_of[j])).strip()[:EXAMPLE_CHARS]
        for h, j in zip(found.tolist(), hit[first].tolist(), strict=True)
    }


def _footer(path: Path) -> tuple[int, int]:
    """(rows, uncompressed bytes of the text column) of a part, from its Parquet footer."""
    meta = pq.ParquetFile(path).metadata
    cols = [j for j in range(meta.num_columns) if meta.schema.column(j).path == "text"]
    groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    return meta.num_rows, sum(g.column(j).total_uncompressed_size for g in groups for j in cols)


def run(cfg: LineDedupConfig, ctx: StageContext) -> StageResult:
    if not ctx.input_parts:
        raise DataError(str(ctx.run_dir), "line_dedup needs an upstream stage with document parts")
    parts = list(ctx.input_parts)
    footers = [_footer(p) for p in parts]
    sizes = [rows for rows, _ in footers]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()
    work = ctx.out_dir / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    items = [LinePart(i, p, offsets[i]) for i, p in enumerate(parts)]
    small = sum(nbytes for _, nbytes in footers) <= SMALL_TEXT_BYTES
    fn = functools.partial(_hash_part, cfg=cfg, seed=ctx.seed, work=str(work), in_memory=small)
    mapped = ctx.executor.map(fn, items, desc="line_dedup: hash")
    for i, m in enumerate(mapped):
        if m["docs"] != sizes[i]:
            raise DataError(str(parts[i]), "row count changed while reading")
    if small:  # one partition, counted here: no work files
        bits = 0
        arrays = [m.pop("arrays") for m in mapped]
        drops, summary, texts = _count_in_memory(arrays, ctx.seed, cfg)
        reduced = [summary]
        tasks = [(it, {**a, "drop": d}) for it, a, d in zip(items, arrays, drops, strict=True)]
    else:
        bits = lines.partition_bits(sum(m["rows"] for m in mapped), ROWS_PER_PARTITION)
        fn = functools.partial(
            _reduce_partition, cfg=cfg, work=str(work), num_parts=len(parts), bits=bits
        )
        reduced = ctx.executor.map(fn, list(range(1 << bits)), desc="line_dedup: count")
        tasks = [(it, None) for it in items]
        texts = {}
    top = heapq.nsmallest(
        cfg.num_examples, [(-c, h) for r in reduced for c, h in r["top"]]
    )  # most documents first, ties by hash: the same for any partitioning
    fn = functools.partial(
        _apply_part,
        cfg=cfg,
        seed=ctx.seed,
        work=str(work),
        out_dir=str(ctx.out_dir),
        bits=bits,
        shown=frozenset(h for _, h in top),
    )
    results = ctx.executor.map(fn, tasks, desc="line_dedup: write")
    shutil.rmtree(work, ignore_errors=True)  # work files: not stage outputs
    for r in results:  # the first part holding an example gives its text
        for h, t in r["examples"].items():
            texts.setdefault(h, t)
    u = cfg.unit
    stats: dict[str, Any] = {
        **setting(cfg, "unit"),
        **setting(cfg, "min_docs"),
        **setting(cfg, "min_chars"),
        **setting(cfg, "min_words"),
        f"{u}s_in": sum(r["stats"]["units_in"] for r in results),
        f"{u}s_removed": sum(r["stats"]["units_removed"] for r in results),
        f"{u}_bytes_removed": sum(r["stats"]["bytes_removed"] for r in results),
        f"repeated_{u}s": sum(r["repeated"] for r in reduced),
        "docs_changed": sum(r["stats"]["docs_changed"] for r in results),
        "hash_partitions": 1 << bits,
        "seed": ctx.seed,
        "examples": [{"docs": -c, "text": texts.get(h, "")} for c, h in top],
    }
    outputs = [o for r in results for o in r["outputs"]]
    return StageResult(outputs=outputs, stats=stats, counts=[r["counts"] for r in results])


STAGE = Stage("line_dedup", LineDedupConfig, run, version="3", needs=("download",))
