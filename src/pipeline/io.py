"""File helpers shared by the runner, the stages and the cores: atomic writes, JSON and text
reading, hashing, crash points for tests. No pyarrow and no stage here: the Parquet parts
documents travel in are read and written by pipeline.parts.
"""

from __future__ import annotations

import codecs
import json
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.hashing import sha256_file

# every Parquet writer (pipeline.parts, tokenizer.wordcounts, export): deterministic bytes
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


def sha256_files(paths: list[Path], threads: int | None = None) -> list[str]:
    """sha256 of each file, in order, hashed by a thread pool: hashlib releases the GIL on
    large blocks, so a driver committing thousands of parts hashes on all its cores (at 1 TB
    the outputs are ~3 TB: serial hashing in the driver would be hours)."""
    threads = threads or min(32, os.cpu_count() or 1)
    if threads <= 1 or len(paths) <= 1:
        return [sha256_file(p) for p in paths]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(sha256_file, paths))


def iter_files(root: Path) -> Iterator[Path]:
    """Every regular file under `root`, in sorted (deterministic) order."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def text_bytes(texts: Iterable[str]) -> int:
    """UTF-8 size of a batch of strings (surrogates counted as 3 bytes, as `surrogatepass`)."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
