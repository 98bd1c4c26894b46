"""File helpers shared by the runner and the stages: atomic writes, hashing, Parquet parts.

Documents travel as zstd Parquet parts with at least the columns id, text, source (all strings).
Rejected documents add a `reasons` list<string> column. Nothing here decides what a stage does.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.errors import DataError
from pipeline.stage import DocCounts

DOC_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("source", pa.string())])
PARQUET_KW = dict(compression="zstd", compression_level=3, write_statistics=False)


CRASH_ENV = "PIPELINE_CRASH_AT"
_crash = {"count": 0}
CRASH_HOOK: list = []  # tests: callables run at every crash point with (count, label)


def crash_point(label: str) -> None:
    """A point between two writes. With PIPELINE_CRASH_AT=N in the environment the process
    dies (os._exit, no cleanup: as kill -9) at the Nth point; tests use it to check that a run
    killed anywhere, re-run, ends in the same state as an uninterrupted one."""
    _crash["count"] += 1
    for hook in CRASH_HOOK:
        hook(_crash["count"], label)
    at = os.environ.get(CRASH_ENV)
    if at and at.isdigit() and _crash["count"] == int(at):
        os.write(2, f"crash point {at}: {label}\n".encode())
        os._exit(86)


# UTF-32 first: the UTF-32-LE mark starts with the UTF-16-LE one
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def bom_encoding(head: bytes) -> str | None:
    """The encoding a byte-order mark at the start of `head` announces, or None."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return None


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 text with any byte-order mark removed; UTF-16/32 with a mark are decoded too.
    DataError naming `where` and the byte offset if the bytes are not valid text."""
    encoding = bom_encoding(data[:4]) or "utf-8"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(
            where, f"not valid {encoding.removesuffix('-sig').upper()} text (byte {exc.start})"
        ) from None


def read_text_file(path: Path, what: str = "file") -> str:
    """A small text file (recipe, JSON metadata) read whole: BOM-aware, one-line errors."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(str(path), f"cannot read {what} ({exc.strerror or exc})") from None
    return decode_text(data, str(path))


def read_json_file(path: Path, what: str = "JSON file") -> Any:
    """A JSON file (BOM-aware); DataError on unreadable, invalid or too deeply nested JSON."""
    text = read_text_file(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}", f"{what} is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DataError(str(path), f"{what} is nested too deeply") from None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder and a rename."""
    path = Path(path)
    crash_point(f"before writing {path.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        crash_point(f"{path.name} written, before its rename")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def temp_path(path: Path) -> Path:
    """A temp name beside `path`, unique per writer: two attempts of one task (a retry, a
    straggler of a killed run) never write into the same temp file; the last rename wins."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")


def save_npy(path: Path, arr: np.ndarray) -> None:
    """np.save atomically (temp + rename); the bytes depend only on dtype, shape and data."""
    path = Path(path)
    tmp = temp_path(path)
    crash_point(f"before writing {path.name}")
    try:
        with open(tmp, "wb") as f:
            np.save(f, arr, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_bytes):
            h.update(block)
    return h.hexdigest()


def sha256_files(paths: list[Path], threads: int | None = None) -> list[str]:
    """sha256 of each file, in order, hashed by a thread pool: hashlib releases the GIL on
    large blocks, so a driver committing thousands of parts hashes on all its cores (at 1 TB
    the outputs are ~3 TB: serial hashing in the driver would be hours)."""
    threads = threads or min(32, os.cpu_count() or 1)
    if threads <= 1 or len(paths) <= 1:
        return [sha256_file(p) for p in paths]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(sha256_file, paths))


def part_name(index: int, suffix: str = ".parquet") -> str:
    return f"part-{index:05d}{suffix}"


def write_table(path: Path, table: pa.Table) -> None:
    """Write a Parquet table atomically; deterministic bytes for the same table."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    crash_point(f"before writing {path.name}")
    try:
        pq.write_table(table, tmp, **PARQUET_KW)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def docs_table(ids: list[str], texts: list[str], sources: list[str], **extra: pa.Array) -> pa.Table:
    cols = {
        "id": pa.array(ids, pa.string()),
        "text": pa.array(texts, pa.string()),
        "source": pa.array(sources, pa.string()),
    }
    cols.update(extra)
    return pa.table(cols)


def write_rejected(
    out_dir: Path, index: int, rows: pa.Table, reasons: list[list[str]], **extra: pa.Array
) -> str:
    """Write dropped rows to `rejected/part-<index>.parquet` with a `reasons` column (replacing
    an upstream one) and then `extra` columns; returns the path relative to `out_dir`."""
    if "reasons" in rows.column_names:
        rows = rows.drop_columns(["reasons"])
    rows = rows.append_column("reasons", pa.array(reasons, pa.list_(pa.string())))
    for name, values in extra.items():
        rows = rows.append_column(name, values)
    rel = f"rejected/{part_name(index)}"
    write_table(Path(out_dir) / rel, rows)
    return rel


def column_bytes(table: pa.Table, column: str = "text") -> int:
    """UTF-8 bytes of a string column (nulls count 0): Arrow strings are UTF-8 already."""
    return int(pc.sum(pc.fill_null(pc.binary_length(table.column(column)), 0)).as_py() or 0)


def write_kept_and_rejected(
    out_dir: Path,
    index: int,
    table: pa.Table,
    keep: np.ndarray,
    reasons: list[list[str]],
    kept: pa.Table | None = None,
    **rejected_extra: pa.Array,
) -> tuple[list[str], DocCounts]:
    """The one writer of a filtering stage's part: kept rows to part-<index>.parquet (`kept`
    when the stage changed them, else table.filter(keep)); dropped rows of `table` with their
    `reasons` (+ `rejected_extra` columns) to rejected/part-<index>.parquet when there are any.

    keep: bool [n]; reasons[k]: the reasons of the k-th dropped row, the first one counted.
    Returns the paths written (relative to out_dir) and the part's counts, text bytes included.
    """
    kept = table.filter(pa.array(keep)) if kept is None else kept
    outputs = [part_name(index)]
    write_table(Path(out_dir) / outputs[0], kept)
    dropped: dict[str, int] = {}
    if not keep.all():
        rejected = table.filter(pa.array(~keep))
        outputs.append(write_rejected(out_dir, index, rejected, reasons, **rejected_extra))
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
    return pq.read_table(path, columns=columns)


def num_records(path: Path) -> int | None:
    """Row count of a Parquet part or the first dimension of a .npy array; None otherwise."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pq.ParquetFile(path).metadata.num_rows
    if path.suffix == ".npy":
        return int(np.load(path, mmap_mode="r", allow_pickle=False).shape[0])
    return None


def iter_files(root: Path) -> Iterator[Path]:
    """Every regular file under `root`, in sorted (deterministic) order."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def text_bytes(texts: Iterable[str]) -> int:
    """UTF-8 size of a batch of strings (surrogates counted as 3 bytes, as `surrogatepass`)."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
