"""The run folder's file helpers, for the runner and the stages (algorithm packages never
import this: they take and return in-memory data): the one atomic writer (`atomic_path`; bytes,
JSON and .npy on top of it), crash points for tests, output hashing, file listing, whether a
process is alive. No pyarrow and no stage: Parquet parts are pipeline.parts'; reading user text
files is pipeline.text_files'.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.hashing import sha256_file

# every stage's Parquet parts (pipeline.parts, stages/tokenize/wordcounts): deterministic bytes.
# zstd level 1: the parts are working data that the next stage reads once; against level 3 it
# writes with ~40% less CPU and reads back with ~33% less, for ~11% more bytes (clean's parts
# of the 80 MB bench_e2e corpus; issue 27, docs/scale.md)
PARQUET_KW = dict(compression="zstd", compression_level=1, write_statistics=False)
# what `pipeline export` writes for other tools and for publishing: smaller files
PARQUET_EXPORT_KW = dict(PARQUET_KW, compression_level=3)
# a stage that rewrites every part it reads and computes little (line_dedup): zstd level 1, no
# dictionary pages (text rarely repeats): ~40% less CPU to write and ~35% to read back, ~8% more
# bytes (benchmarks/bench_line_dedup.py, docs/dedup.md)
PARQUET_FAST_KW = dict(PARQUET_KW, use_dictionary=False)

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


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """The one atomic writer: yields a temp name beside `path` (unique per writer: two attempts
    of one task, a retry or a straggler of a killed run, never share a temp file); the caller
    writes the file there, then it is fsynced and renamed onto `path` (the last rename wins).
    On any error the temp file is removed and `path` is untouched. Crash points before the
    write and between the write and the rename (tests kill the process there)."""
    path = Path(path)
    crash_point(f"before writing {path.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # durable before it becomes visible: a power loss leaves old or new
        finally:
            os.close(fd)
        crash_point(f"{path.name} written, before its rename")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (atomic_path)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_json(path: Path, obj: Any, levels: int | None = None) -> None:
    """`obj` as JSON, atomically: indented by 2 at every level (levels=None: the stages' own
    files, whose bytes are outputs), or only at the top `levels` levels (json_text)."""
    text = json.dumps(obj, indent=2) if levels is None else json_text(obj, levels)
    atomic_write_bytes(path, (text + "\n").encode())


def json_text(obj: Any, levels: int, _pad: str = "") -> str:
    """JSON indented by 2 at the top `levels` levels of objects and arrays, each value below
    them on one line. The same value as json.dumps(obj, indent=2) (json.loads of either is
    equal) for a fraction of the CPU: json's C encoder writes only without indent, so the
    runner's files (manifest.json, pipeline_report.json, hash caches), rewritten at every
    commit, cost ~1 ms per 100 KB instead of ~5 ms."""
    if levels <= 0 or not isinstance(obj, (dict, list)) or not obj:
        return json.dumps(obj)
    inner = _pad + "  "
    if isinstance(obj, dict):
        rows = [f"{inner}{_key(k)}: {json_text(v, levels - 1, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(rows) + f"\n{_pad}}}"
    rows = [inner + json_text(v, levels - 1, inner) for v in obj]
    return "[\n" + ",\n".join(rows) + f"\n{_pad}]"


def _key(key: Any) -> str:
    """A dict key as json.dumps writes it (a non-str key by json's own conversion)."""
    return json.dumps(key) if isinstance(key, str) else json.dumps({key: 0})[1:-4]


def temp_path(path: Path) -> Path:
    """A temp name beside `path`, unique per writer (pid + random): see atomic_path."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")


def save_npy(path: Path, arr: np.ndarray) -> None:
    """np.save atomically; the bytes depend only on dtype, shape and data."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists. kill(pid, 0) raising PermissionError means it
    exists but belongs to another user: alive (a cleanup that asked must not delete what a live
    process may own; a watchdog that asked also watches its parent pid, see executor.py)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
