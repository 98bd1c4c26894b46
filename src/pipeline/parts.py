"""Parquet parts: the files documents travel in between stages, and their one reader and
writers.

Documents travel as zstd Parquet parts with at least the columns id, text, source (all strings).
Rejected documents add a `reasons` list<string> column. Nothing here decides what a stage does.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import DataError
from pipeline.io import PARQUET_KW, atomic_path
from pipeline.stage import DocCounts

DOC_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("source", pa.string())])


def part_name(index: int, suffix: str = ".parquet") -> str:
    return f"part-{index:05d}{suffix}"


def write_table(path: Path, table: pa.Table, parquet_kw: dict = PARQUET_KW) -> None:
    """Write a Parquet table atomically; deterministic bytes for the same table (and
    `parquet_kw`: pipeline.io's PARQUET_KW or PARQUET_FAST_KW)."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **parquet_kw)


def np_array(values: np.ndarray) -> pa.Array:
    """A numpy bool or numeric array (no nulls) as an Arrow array, from its buffers: pa.array's
    first call imports pandas (~0.5 CPU-s in every process that builds a column, measured;
    issue 27). Equal to pa.array(values)."""
    a = np.ascontiguousarray(values)
    if a.dtype == np.bool_:
        bits = np.packbits(a, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(a), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


_NUMPY_OF = {"halffloat": "float16", "float": "float32", "double": "float64"}


def numeric_column(col: pa.ChunkedArray | pa.Array, dtype: type | np.dtype) -> np.ndarray:
    """A numeric Arrow column without nulls as a numpy `dtype` array, read off each chunk's
    data buffer: `to_numpy` imports pandas on its first call (~0.45 CPU-s in every process that
    reads a column, measured; issue 27). Equal to np.asarray(col.to_numpy(), dtype); a column
    with nulls or of another type takes that path."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    typ = col.type
    if col.null_count or not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype)
    width = np.dtype(_NUMPY_OF.get(str(typ), str(typ)))  # int8..uint64 name themselves
    parts = [
        np.frombuffer(c.buffers()[1], width, len(c), c.offset * width.itemsize)
        for c in chunks
        if len(c)
    ]
    if not parts:
        return np.zeros(0, dtype)
    return np.concatenate(parts).astype(dtype, copy=len(parts) == 1)


def string_lists(rows: list[list[str]]) -> pa.Array:
    """pa.array(rows, pa.list_(pa.string())) from buffers (see `np_array`)."""
    flat = [s.encode("utf-8", "surrogatepass") for r in rows for s in r]
    offsets = np.zeros(len(flat) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, flat), np.int64, len(flat)), out=offsets[1:])
    data = [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(flat))]
    values = pa.Array.from_buffers(pa.string(), len(flat), data)
    starts = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)), out=starts[1:])
    return pa.ListArray.from_arrays(np_array(starts), values)


def docs_table(ids: list[str], texts: list[str], sources: list[str], **extra: pa.Array) -> pa.Table:
    cols = {
        "id": pa.array(ids, pa.string()),
        "text": pa.array(texts, pa.string()),
        "source": pa.array(sources, pa.string()),
    }
    cols.update(extra)
    return pa.table(cols)


def write_rejected(
    out_dir: Path,
    index: int,
    rows: pa.Table,
    reasons: list[list[str]],
    parquet_kw: dict = PARQUET_KW,
    **extra: pa.Array,
) -> str:
    """Write dropped rows to `rejected/part-<index>.parquet` with a `reasons` column (replacing
    an upstream one) and then `extra` columns; returns the path relative to `out_dir`."""
    if "reasons" in rows.column_names:
        rows = rows.drop_columns(["reasons"])
    rows = rows.append_column("reasons", string_lists(reasons))
    for name, values in extra.items():
        rows = rows.append_column(name, values)
    rel = f"rejected/{part_name(index)}"
    write_table(Path(out_dir) / rel, rows, parquet_kw)
    return rel


def column_bytes(table: pa.Table, column: str = "text") -> int:
    """UTF-8 bytes of a string column (nulls count 0: pc.sum skips them; no fill_null, whose
    pa.scalar imports pandas): Arrow strings are UTF-8 already. Without nulls, read off each
    chunk's offsets (no pass over the values)."""
    col = table.column(column)
    if col.null_count == 0 and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        width = np.int64 if pa.types.is_large_string(col.type) else np.int32
        total = 0
        for chunk in col.chunks:
            if len(chunk):
                off = np.frombuffer(
                    chunk.buffers()[1], width, len(chunk) + 1, chunk.offset * width().itemsize
                )
                total += int(off[-1]) - int(off[0])
        return total
    return int(pc.sum(pc.binary_length(col)).as_py() or 0)


def write_kept_and_rejected(
    out_dir: Path,
    index: int,
    table: pa.Table,
    keep: np.ndarray,
    reasons: list[list[str]],
    kept: pa.Table | None = None,
    parquet_kw: dict = PARQUET_KW,
    **rejected_extra: pa.Array,
) -> tuple[list[str], DocCounts]:
    """The one writer of a filtering stage's part: kept rows to part-<index>.parquet (`kept`
    when the stage changed them, else table.filter(keep)); dropped rows of `table` with their
    `reasons` (+ `rejected_extra` columns) to rejected/part-<index>.parquet when there are any.

    keep: bool [n]; reasons[k]: the reasons of the k-th dropped row, the first one counted.
    Returns the paths written (relative to out_dir) and the part's counts, text bytes included.
    """
    kept = table.filter(np_array(keep)) if kept is None else kept
    outputs = [part_name(index)]
    write_table(Path(out_dir) / outputs[0], kept, parquet_kw)
    dropped: dict[str, int] = {}
    if not keep.all():
        rejected = table.filter(np_array(~keep))
        outputs.append(
            write_rejected(out_dir, index, rejected, reasons, parquet_kw, **rejected_extra)
        )
        for rs in reasons:
            dropped[rs[0]] = dropped.get(rs[0], 0) + 1
    counts = DocCounts(
        table.num_rows, kept.num_rows, dropped, column_bytes(table), column_bytes(kept)
    )
    return outputs, counts


_PART_NAME = re.compile(r"^(part-\d+)\.(.+)$")


def group_parts(paths: list[Path], kinds: dict[str, str], producer: str) -> list[dict[str, Path]]:
    """Files `part-N.<suffix>` grouped per N, in part order: [{key: path}] for `kinds` = {key:
    suffix}. A part missing one of its files is a DataError naming it; other files are ignored."""
    by_suffix = {suffix: key for key, suffix in kinds.items()}
    found: dict[str, dict[str, Path]] = {}
    for p in paths:
        m = _PART_NAME.match(Path(p).name)
        if m and m.group(2) in by_suffix:
            found.setdefault(m.group(1), {})[by_suffix[m.group(2)]] = Path(p)
    for stem, group in found.items():
        for key in kinds:
            if key not in group:
                parent = next(iter(group.values())).parent
                raise DataError(str(parent / f"{stem}.{key}"), f"missing from {producer}'s output")
    return [found[stem] for stem in sorted(found)]


def read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One Parquet file's table (or those columns). `pq.ParquetFile.read`, not `pq.read_table`:
    the same table, without the dataset layer, whose first use imports pyarrow.dataset and
    pandas (0.4-1 s of CPU in every process, measured; issue 27). ParquetFile skips a missing
    column silently, so that case keeps read_table's error."""
    with pq.ParquetFile(path) as f:
        if columns is not None and not set(columns) <= set(f.schema_arrow.names):
            return pq.read_table(path, columns=columns)
        return f.read(columns=columns)


def num_records(path: Path) -> int | None:
    """Row count of a Parquet part or the first dimension of a .npy array; None otherwise."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pq.ParquetFile(path).metadata.num_rows
    if path.suffix == ".npy":
        return int(np.load(path, mmap_mode="r", allow_pickle=False).shape[0])
    return None
