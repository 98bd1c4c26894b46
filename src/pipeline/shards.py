"""The token shard file format, in one place: uncompressed .npz shards (`input_ids`,
`segment_ids` [n, seq_len]) named shard_NNNNNN.npz beside a metadata.json. Memory-map a member in
place, write a shard atomically with deterministic bytes, read field headers; shard names and
sizes. Shared by the shard stage, `pipeline shuffle` and readers; decides nothing about content.
"""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError

METADATA_NAME = "metadata.json"
FORMAT_VERSION = 1
FIELDS = ("input_ids", "segment_ids")  # the arrays of a shard the shard stage writes, in order
WRITE_BYTES = 16 << 20  # write slice


# ---------------------------------------------------------------- .npz files


def read_npy_header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran_order, dtype) of the .npy stream `f`, positioned at its magic."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    return np.lib.format._read_array_header(f, version)  # 3.0: utf-8 header, no public reader


def npz_member(path: Path, key: str) -> np.ndarray:
    """Array `key` of an .npz: memory-mapped in place when stored uncompressed, else loaded."""
    path = Path(path)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(f"{key}.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            with zf.open(info) as f:
                return np.lib.format.read_array(f, allow_pickle=False)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        if local[:4] != b"PK\x03\x04":
            raise DataError(str(path), f"bad zip local header for {key}.npy")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        f.seek(info.header_offset + 30 + name_len + extra_len)
        shape, fortran, dtype = read_npy_header(f)
        if dtype.hasobject:
            raise DataError(str(path), f"{key}.npy holds Python objects; refusing to load")
        offset = f.tell()
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype)
    return np.memmap(
        path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C"
    )


def npz_fields(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{field: (shape, dtype)} of an .npz, from the headers only."""
    out = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as f:
                    shape, _, dtype = read_npy_header(f)
                out[info.filename[:-4]] = (tuple(shape), dtype)
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DataError(str(path), f"not a readable .npz ({exc})") from None
    return out


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
    path = Path(path)
    from pipeline.io import crash_point, temp_path  # the writer's side: the loader never loads io

    tmp = temp_path(path)
    crash_point(f"before writing {path.name}")
    try:
        with open(tmp, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
            for key, arr in arrays.items():
                with zf.open(f"{key}.npy", "w", force_zip64=True) as fid:
                    _write_npy(fid, arr)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def shard_sizes(num_samples: int, shard_size: int) -> list[int]:
    """Full shards of shard_size, the last one holding the remainder."""
    full, rest = divmod(num_samples, shard_size)
    return [shard_size] * full + ([rest] if rest else [])


def shard_name(index: int) -> str:
    return f"shard_{index:06d}.npz"
