"""The token shard file format, in one place: uncompressed .npz shards (`input_ids`,
`segment_ids` [n, seq_len]) named shard_NNNNNN.npz beside a metadata.json. Memory-map a member in
place, write a shard atomically with deterministic bytes, read field headers (the one .npy
header parser: no numpy-private API); shard names and sizes. Shared by the shard stage,
`pipeline shuffle` and readers; decides nothing about content.
"""

from __future__ import annotations

import ast
import math
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError, short

METADATA_NAME = "metadata.json"
FORMAT_VERSION = 1
FIELDS = ("input_ids", "segment_ids")  # the arrays of a shard the shard stage writes, in order
WRITE_BYTES = 16 << 20  # write slice
_LOCAL_HEADER = 30  # bytes of a zip local file header before its name and extra field
# what zipfile and zlib raise on damaged bytes (unknown compression and encryption included)
_ZIP_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, struct.error,
    zlib.error, NotImplementedError, RuntimeError,
)  # fmt: skip


# ---------------------------------------------------------------- .npy headers
#
# The .npy format (numpy's NEP 1, docs "numpy.lib.format"): the magic b"\x93NUMPY", a major and
# minor version byte, the header length (little-endian: 2 bytes in 1.0, 4 bytes in 2.0 and 3.0),
# then the header: a Python dict literal {'descr', 'fortran_order', 'shape'} (latin-1 in 1.0 and
# 2.0, utf-8 in 3.0), space-padded and newline-terminated; the array's bytes follow. Parsed here
# from the bytes, so no numpy-private reader is needed and every numpy we allow reads the same.

NPY_MAGIC = b"\x93NUMPY"
NPY_VERSIONS = {(1, 0): ("<H", "latin1"), (2, 0): ("<I", "latin1"), (3, 0): ("<I", "utf8")}
NPY_MAX_HEADER = 1 << 20  # bytes; numpy writes < 64 KiB but for huge structured dtypes


@dataclass(frozen=True)
class Member:
    """One `<field>.npy` of an .npz: its header and where its array bytes are."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    offset: int  # byte offset of the array data in the .npz file (stored members only; else -1)
    stored: bool  # False: deflated, so it is decompressed rather than mapped

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _read_exact(f: Any, n: int, what: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ValueError(f"truncated {what} ({len(data)} of {n} bytes)")
    return data


def parse_npy_header(
    f: Any, limit: int | None = None
) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, header bytes incl. magic) of the .npy stream `f` positioned
    at its magic; `limit`: the member's size, which the header must fit in. ValueError (one
    line) for anything that is not a well-formed header of a version 1.0-3.0 file; object
    dtypes are refused (they would need pickle)."""
    limit = NPY_MAX_HEADER + 16 if limit is None else limit
    if limit < 8:
        raise ValueError(f"truncated magic ({limit} of 8 bytes)")
    magic = _read_exact(f, 8, "magic")
    if magic[:6] != NPY_MAGIC:
        raise ValueError("not a .npy member (bad magic)")
    version = (magic[6], magic[7])
    if version not in NPY_VERSIONS:
        raise ValueError(f".npy format version {version[0]}.{version[1]}, expected 1.0, 2.0, 3.0")
    fmt, encoding = NPY_VERSIONS[version]
    (length,) = struct.unpack(fmt, _read_exact(f, struct.calcsize(fmt), "header length"))
    head = 8 + struct.calcsize(fmt) + length
    if length > NPY_MAX_HEADER:
        raise ValueError(f".npy header of {length} bytes (at most {NPY_MAX_HEADER})")
    if head > limit:
        raise ValueError(f"truncated header ({head} bytes, the member has {limit})")
    try:
        text = _read_exact(f, length, "header").decode(encoding)
        header = ast.literal_eval(text)
    except (UnicodeDecodeError, SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        raise ValueError(".npy header is not a Python dict literal") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError(".npy header must have exactly the keys descr, fortran_order, shape")
    shape, fortran = header["shape"], header["fortran_order"]
    if not isinstance(shape, tuple) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63 for d in shape
    ):
        raise ValueError(f".npy shape {short(shape)} is not a tuple of non-negative ints")
    if not isinstance(fortran, bool):
        raise ValueError(f".npy fortran_order {short(fortran)} is not a bool")
    try:
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except Exception:  # noqa: BLE001 - any malformed descr: numpy raises many kinds
        raise ValueError(f".npy descr {short(header['descr'])} is not a dtype") from None
    if dtype.hasobject:
        raise ValueError("holds Python objects (would need pickle); refusing to load")
    return shape, fortran, dtype, head


def read_npy_header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) of the .npy stream `f`, positioned at its magic."""
    return parse_npy_header(f)[:3]


# ---------------------------------------------------------------- .npz files


def read_members(path: Path) -> dict[str, Member]:
    """{field: Member} of an .npz, from the zip directory and the .npy headers only. Each
    header must account for its member's bytes exactly (rows x row bytes == member size minus
    header), and a stored member must lie inside the file: DataError (one line) otherwise."""
    path = Path(path)
    out = {}
    try:
        size = os.path.getsize(path)
        with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                stored = info.compress_type == zipfile.ZIP_STORED
                if stored:
                    raw.seek(info.header_offset)
                    local = raw.read(_LOCAL_HEADER)
                    if len(local) != _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
                        raise ValueError(f"bad zip local header for {info.filename}")
                    name_len, extra_len = struct.unpack("<HH", local[26:30])
                    raw.seek(info.header_offset + _LOCAL_HEADER + name_len + extra_len)
                    shape, fortran, dtype, head = parse_npy_header(raw, info.file_size)
                    offset = raw.tell()
                    if offset - head + info.file_size > size:
                        raise ValueError(f"{info.filename} runs past the end of the file")
                else:
                    with zf.open(info) as f:
                        shape, fortran, dtype, head = parse_npy_header(f, info.file_size)
                    offset = -1
                m = Member(tuple(shape), dtype, fortran, offset, stored)
                if m.nbytes != info.file_size - head:
                    raise ValueError(
                        f"{info.filename}'s header says {list(shape)} {dtype} "
                        f"({m.nbytes:,} bytes), the member holds {info.file_size - head:,}"
                    )
                out[info.filename[:-4]] = m
    except _ZIP_ERRORS as exc:
        raise DataError(str(path), f"not a readable .npz shard ({exc})") from None
    return out


def open_member(path: Path, key: str, m: Member) -> np.ndarray:
    """The array of member `m` (= read_members(path)[key]): a read-only memmap when stored,
    decompressed whole when deflated."""
    if math.prod(m.shape) == 0:
        return np.zeros(m.shape, m.dtype)
    order = "F" if m.fortran else "C"
    if m.stored:
        return np.memmap(path, dtype=m.dtype, mode="r", offset=m.offset, shape=m.shape, order=order)
    try:
        with zipfile.ZipFile(path) as zf, zf.open(f"{key}.npy") as f:
            parse_npy_header(f)
            data = f.read(m.nbytes)
    except _ZIP_ERRORS as exc:
        raise DataError(str(path), f"cannot decompress {key}.npy ({exc})") from None
    if len(data) != m.nbytes:
        raise DataError(str(path), f"{key}.npy is truncated")
    return np.frombuffer(data, m.dtype).reshape(m.shape, order=order)


def npz_member(path: Path, key: str) -> np.ndarray:
    """Array `key` of an .npz: memory-mapped in place when stored uncompressed, else loaded."""
    path = Path(path)
    members = read_members(path)
    if key not in members:
        raise DataError(str(path), f"has no field {key!r} (fields: {', '.join(members)})")
    return open_member(path, key, members[key])


def npz_fields(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{field: (shape, dtype)} of an .npz, from the headers only."""
    return {k: (m.shape, m.dtype) for k, m in read_members(path).items()}


def _write_npy(fp: Any, arr: np.ndarray) -> None:
    """.npy bytes of a C-contiguous array, written in slices: no second copy of the data."""
    header = {
        "descr": np.lib.format.dtype_to_descr(arr.dtype),
        "fortran_order": False,
        "shape": arr.shape,
    }
    try:
        np.lib.format.write_array_header_1_0(fp, header)
    except ValueError:  # header over 64 KiB: format 2.0
        np.lib.format.write_array_header_2_0(fp, header)
    data = memoryview(np.ascontiguousarray(arr)).cast("B")
    for a in range(0, len(data), WRITE_BYTES):
        fp.write(data[a : a + WRITE_BYTES])


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Uncompressed .npz (members memory-mappable, loadable by np.load), written to a temp name
    then renamed. Deterministic bytes: fixed member dates (1980), members in dict order."""
    from pipeline.io import atomic_path  # the writer's side: the loader never loads io

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
            for key, arr in arrays.items():
                with zf.open(f"{key}.npy", "w", force_zip64=True) as fid:
                    _write_npy(fid, arr)


def shard_sizes(num_samples: int, shard_size: int) -> list[int]:
    """Full shards of shard_size, the last one holding the remainder."""
    full, rest = divmod(num_samples, shard_size)
    return [shard_size] * full + ([rest] if rest else [])


def shard_name(index: int) -> str:
    return f"shard_{index:06d}.npz"


# ---------------------------------------------------------------- metadata.json

# what every metadata.json beside shards holds (the shard stage's and `pipeline shuffle`'s);
# readers (pipeline.loader) rely on these; writers add their own provenance keys
METADATA_KEYS = (
    "num_samples",
    "dtype",
    "fields",
    "field_dtypes",
    "shard_size",
    "num_shards",
    "shard_sizes",
    "pre_shuffled",
    "seed",
    "permutation_seed",
    "shards",
    "version",
)


def shard_entry(file: str, num_samples: int, sha256: str) -> dict[str, Any]:
    """One element of metadata.json's `shards` list."""
    return {"file": file, "num_samples": num_samples, "sha256": sha256}


def write_metadata(folder: Path, meta: dict[str, Any]) -> None:
    """Write `folder`/metadata.json atomically: the one writer of the file. `meta` must hold
    METADATA_KEYS, consistent with its shards list (an internal invariant of both writers)."""
    from pipeline.io import atomic_write_json  # the writer's side: the loader never loads io

    missing = [k for k in METADATA_KEYS if k not in meta]
    assert not missing, f"metadata.json without {missing}"
    assert meta["num_shards"] == len(meta["shards"]) == len(meta["shard_sizes"])
    assert meta["shard_sizes"] == [s["num_samples"] for s in meta["shards"]]
    assert meta["num_samples"] == sum(meta["shard_sizes"])
    atomic_write_json(Path(folder) / METADATA_NAME, meta)
