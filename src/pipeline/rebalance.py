"""`pipeline shuffle`: rebalance unbalanced .npz shards into shuffled, equal ones in two phases.
The command's file work lives here (top level, beside export and inspect); the plan of how many
rows each output shard takes from each source is pipeline.shuffle.apportion (pure).

Phase 1 permutes each input shard field by field into temp .npy files; phase 2 builds each output
shard from a proportional slice of every source and permutes it again. All-or-nothing output;
the memory bound and the plan are in docs/shards.md.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError, PipelineError
from pipeline.io import pid_alive, sha256_file
from pipeline.shards import (
    FORMAT_VERSION,
    METADATA_NAME,
    npz_fields,
    npz_member,
    parse_npy_header,
    save_npz,
    shard_entry,
    shard_name,
    shard_sizes,
    write_metadata,
)
from pipeline.shuffle import ShuffleStats, apportion
from pipeline.text_files import read_json_file

COPY_BYTES = 4 << 20  # copy block of both phases: the scratch memory beside field / shard


# ---------------------------------------------------------------- the command


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt so `finally` blocks clean up as on Ctrl-C."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def scan_inputs(input_dir: Path) -> tuple[list[Path], dict[str, Any], list[int], dict[str, Any]]:
    """Input shards, their common fields {name: (row shape, dtype)}, rows per shard, metadata."""
    input_dir = Path(input_dir)
    if not input_dir.is_dir():
        raise DataError(str(input_dir), "input folder not found")
    paths = sorted(input_dir.glob("*.npz"))
    if not paths:
        raise DataError(str(input_dir), "no .npz shards found")
    meta_path = input_dir / METADATA_NAME
    meta = read_json_file(meta_path, METADATA_NAME) if meta_path.is_file() else {}
    if not isinstance(meta, dict):
        raise DataError(str(meta_path), f"expected a JSON object, got {type(meta).__name__}")
    fields: dict[str, Any] = {}
    rows = []
    for p in paths:
        found = npz_fields(p)
        if not found:
            raise DataError(str(p), "holds no arrays")
        firsts = {shape[0] if shape else None for shape, _ in found.values()}
        if len(firsts) != 1 or None in firsts:
            raise DataError(
                str(p),
                f"fields do not share the first dimension: { {k: v[0] for k, v in found.items()} }",
            )
        spec = {k: (shape[1:], dtype) for k, (shape, dtype) in found.items()}
        if not fields:
            fields = spec
        elif spec != fields:
            raise DataError(str(p), f"fields {spec} differ from {paths[0].name}'s {fields}")
        rows.append(int(firsts.pop()))
    return paths, fields, rows, meta


def _phase1(
    paths: list[Path], fields: dict[str, Any], rows: list[int], seed: int, work: Path
) -> None:
    """Each input shard: one permutation, applied field by field, saved as work/*.npy."""
    for i, (path, n) in enumerate(zip(paths, rows, strict=True)):
        perm = np.random.default_rng([seed, 0, i]).permutation(n)
        np.save(work / f"{i:06d}.perm.npy", perm)
        for name, (row_shape, dtype) in fields.items():
            src = npz_member(path, name)  # mmap: at most this one field becomes resident
            step = max(1, COPY_BYTES // _row_bytes(row_shape, dtype))
            with open(work / f"{i:06d}.{name}.npy", "wb") as f:
                header = {
                    "descr": np.lib.format.dtype_to_descr(dtype),
                    "fortran_order": False,
                    "shape": (n, *row_shape),
                }
                np.lib.format.write_array_header_2_0(f, header)
                for a in range(0, n, step):
                    f.write(memoryview(np.ascontiguousarray(src[perm[a : a + step]])).cast("B"))
            del src


def _row_bytes(row_shape: tuple[int, ...], dtype: np.dtype) -> int:
    return max(1, int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize)


def _read_rows(path: Path, a: int, b: int, out: np.ndarray, dest: np.ndarray) -> None:
    """Rows [a, b) of a work .npy into out[dest], COPY_BYTES at a time (no mmap residue)."""
    with open(path, "rb") as f:
        parse_npy_header(f)  # the one .npy header reader
        row = _row_bytes(out.shape[1:], out.dtype)
        f.seek(a * row, os.SEEK_CUR)
        step = max(1, COPY_BYTES // row)
        for lo in range(a, b, step):
            hi = min(b, lo + step)
            buf = np.frombuffer(f.read((hi - lo) * row), out.dtype).reshape(hi - lo, *out.shape[1:])
            out[dest[lo - a : hi - a]] = buf


def _phase2(
    fields: dict[str, Any],
    rows: list[int],
    plan: np.ndarray,
    seed: int,
    work: Path,
    out: Path,
    stats: ShuffleStats,
) -> list[dict[str, Any]]:
    """Each output shard: a slice of every permuted source, placed at random positions, saved."""
    offsets = np.cumsum(rows) - np.asarray(rows)
    start = np.zeros(len(rows), np.int64)
    shards = []
    for j, takes in enumerate(plan):
        m = int(takes.sum())
        pos = np.random.default_rng([seed, 1, j]).permutation(m)
        arrays = {name: np.empty((m, *shape), dtype) for name, (shape, dtype) in fields.items()}
        src_of = np.empty(m, np.int64)
        orig = np.empty(m, np.int64)
        k = 0
        for s in np.flatnonzero(takes):
            a, b = int(start[s]), int(start[s] + takes[s])
            dest = pos[k : k + b - a]
            for name in fields:
                _read_rows(work / f"{s:06d}.{name}.npy", a, b, arrays[name], dest)
            perm = np.load(work / f"{s:06d}.perm.npy", mmap_mode="r", allow_pickle=False)
            src_of[dest] = s
            orig[dest] = offsets[s] + perm[a:b]
            del perm
            start[s], k = b, k + b - a
        stats.add(src_of, orig)
        name = shard_name(j)
        save_npz(out / name, arrays)
        del arrays
        shards.append(shard_entry(name, m, sha256_file(out / name)))
    return shards


def shuffle_shards(input_dir: Path, output_dir: Path, shard_size: int, seed: int) -> dict[str, Any]:
    """Rebalance + shuffle `input_dir`'s shards into `output_dir`; returns the new metadata.

    `input_dir` is a flat folder of .npz shards, or a shard stage folder (train/ + eval/): then
    train/ is shuffled into output_dir/train. An eval/ folder is copied unchanged.
    All-or-nothing: work happens in a hidden temp folder beside output_dir, renamed at the end;
    on any error, Ctrl-C or SIGTERM the temp folder is removed and output_dir is untouched.
    """
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    if shard_size < 1:
        raise PipelineError(f"--shard-size must be >= 1, got {shard_size}")
    if seed < 0:
        raise PipelineError(f"--seed must be >= 0, got {seed}")
    if output_dir.resolve() == input_dir.resolve():
        raise DataError(str(output_dir), "output folder must differ from the input folder")
    _check_output(output_dir)
    nested = not any(input_dir.glob("*.npz")) and (input_dir / "train").is_dir()
    src = input_dir / "train" if nested else input_dir
    paths, fields, rows, meta = scan_inputs(src)
    sweep_stale_temps(output_dir)
    tmp = output_dir.parent / f"{_temp_prefix(output_dir)}{os.getpid()}"
    out = tmp / "train" if nested else tmp
    with _sigterm_as_interrupt():
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            (tmp / "work").mkdir(parents=True)
            out.mkdir(exist_ok=True)
            _phase1(paths, fields, rows, seed, tmp / "work")
            sizes = shard_sizes(sum(rows), shard_size)
            stats = ShuffleStats(np.asarray(rows))
            plan = apportion(np.asarray(rows), sizes)
            shards = _phase2(fields, rows, plan, seed, tmp / "work", out, stats)
            shutil.rmtree(tmp / "work")
            if (input_dir / "eval").is_dir():
                shutil.copytree(input_dir / "eval", tmp / "eval")
            new = _metadata(meta, fields, sizes, shard_size, seed, shards, stats.result())
            new["shuffled_from"] = {
                "input_dir": str(src),
                "num_shards": len(paths),
                "seed_before": meta.get("seed"),
            }
            write_metadata(out, new)
            if output_dir.exists():
                output_dir.rmdir()  # empty, checked above
            tmp.rename(output_dir)
        finally:
            _remove_uninterrupted(tmp)
    return new


def _check_output(output_dir: Path) -> None:
    """One-line errors for an output path that cannot become a new folder of shards."""
    parent = output_dir.parent
    if output_dir.exists() and not output_dir.is_dir():
        raise DataError(str(output_dir), "exists and is not a folder; choose a new --output-dir")
    if output_dir.is_dir() and any(output_dir.iterdir()):
        raise DataError(str(output_dir), "output folder exists and is not empty")
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise DataError(str(p), "is a file, so --output-dir cannot be created under it")
            if not os.access(p, os.W_OK | os.X_OK):
                raise DataError(str(p), "is not writable; choose another --output-dir")
            break


def _temp_prefix(output_dir: Path) -> str:
    return f".{output_dir.name}.tmp-shuffle-"


def sweep_stale_temps(output_dir: Path) -> list[Path]:
    """Remove temp folders that killed runs (SIGKILL, power loss) left beside `output_dir`:
    those whose process no longer runs. Returns what was removed."""
    removed = []
    prefix = _temp_prefix(output_dir)
    parent = output_dir.parent
    if not parent.is_dir():
        return removed
    for path in parent.glob(f"{prefix}*"):
        pid = path.name[len(prefix) :]
        # our own pid: left by an earlier call in this process that was interrupted
        if path.is_dir() and pid.isdigit() and (int(pid) == os.getpid() or not pid_alive(int(pid))):
            _remove_uninterrupted(path)
            removed.append(path)
    return removed


def _remove_uninterrupted(path: Path) -> None:
    """rmtree with SIGINT/SIGTERM held until it is done: a second Ctrl-C during cleanup cannot
    leave half a temp folder (the held signal is delivered right after)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (AttributeError, ValueError, OSError):  # no pthread_sigmask on this platform
        old = None
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _metadata(
    meta: dict[str, Any],
    fields: dict[str, Any],
    sizes: list[int],
    shard_size: int,
    seed: int,
    shards: list[dict[str, Any]],
    stats: dict[str, float],
) -> dict[str, Any]:
    """The input's metadata (if any) updated for the new shards."""
    new = dict(meta)
    main = "input_ids" if "input_ids" in fields else next(iter(fields))
    shape, dtype = fields[main]
    new.update(
        {
            "num_samples": sum(sizes),
            "fields": list(fields),
            "dtype": str(dtype),
            "field_dtypes": {k: str(v[1]) for k, v in fields.items()},
            "shard_size": shard_size,
            "num_shards": len(sizes),
            "shard_sizes": sizes,
            "pre_shuffled": True,
            "seed": seed,
            "permutation_seed": seed,  # the new train order's; shard's metadata has the same key
            "shards": shards,
            "version": meta.get("version", FORMAT_VERSION),
            "shuffle_stats": stats,
        }
    )
    if shape:
        new.setdefault("seq_len", int(shape[0]))
    return new
