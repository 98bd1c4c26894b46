"""ShardedTokenDataset: random access to a shard folder (metadata.json + `.npz` shards).

Uncompressed members are memory-mapped in place at their offset inside the zip (nothing is
read whole, so a dataset larger than RAM works); compressed shards, as older pipelines wrote
them, are decompressed whole into the same cache. At most `max_open_shards` shards are open
(LRU). Reads the format of pipeline.shards from the files and metadata.json alone, so shards
written by older pipelines (compressed, other writers) load too.
"""

from __future__ import annotations

import json
import mmap
import struct
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.hashing import sha256_file
from pipeline.shards import read_npy_header

METADATA_NAME = "metadata.json"
REQUIRED_FIELDS = ("input_ids", "segment_ids")
_LOCAL_HEADER = 30  # bytes of a zip local file header before its name and extra field


@dataclass(frozen=True)
class Member:
    """One `<field>.npy` inside a shard: where its data starts and what it holds."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    offset: int  # byte offset of the array data in the .npz file (stored members only)
    stored: bool  # False: deflated, so it is decompressed rather than mapped


# ---------------------------------------------------------------- format


def read_members(path: Path) -> dict[str, Member]:
    """{field: Member} of an .npz, from the zip directory and the .npy headers only."""
    out = {}
    try:
        with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                field = info.filename[:-4]
                stored = info.compress_type == zipfile.ZIP_STORED
                if stored:
                    raw.seek(info.header_offset)
                    local = raw.read(_LOCAL_HEADER)
                    if local[:4] != b"PK\x03\x04":
                        raise ValueError(f"bad zip local header for {info.filename}")
                    name_len, extra_len = struct.unpack("<HH", local[26:30])
                    raw.seek(info.header_offset + _LOCAL_HEADER + name_len + extra_len)
                    shape, fortran, dtype = read_npy_header(raw)
                    offset = raw.tell()
                else:
                    with zf.open(info) as f:
                        shape, fortran, dtype = read_npy_header(f)
                    offset = -1
                if dtype.hasobject:
                    raise ValueError(f"{info.filename} holds Python objects; refusing to load")
                out[field] = Member(tuple(shape), dtype, fortran, offset, stored)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise DataError(str(path), f"not a readable .npz shard ({exc})") from None
    return out


def _open_stored(path: Path, members: dict[str, Member]) -> dict[str, np.ndarray]:
    """Read-only arrays viewing one mmap of the file (closed when the last view is dropped)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
    arrays = {}
    for field, m in members.items():
        if int(np.prod(m.shape)) == 0 or mm is None:
            arrays[field] = np.zeros(m.shape, m.dtype)
            continue
        order = "F" if m.fortran else "C"
        arrays[field] = np.ndarray(m.shape, m.dtype, buffer=mm, offset=m.offset, order=order)
    return arrays


def _open_compressed(path: Path, fields: list[str]) -> dict[str, np.ndarray]:
    """Whole fields decompressed into memory (a deflated member cannot be mapped)."""
    with zipfile.ZipFile(path) as zf:
        out = {}
        for field in fields:
            with zf.open(f"{field}.npy") as f:
                out[field] = np.lib.format.read_array(f, allow_pickle=False)
        return out


# ---------------------------------------------------------------- dataset


class ShardedTokenDataset:
    """A shard folder (train/ or eval/) as one array of N samples.

    `ds[i]` -> {field: np.ndarray [seq_len]} (a copy); `get_batch(idx)` -> {field: [B, seq_len]}
    with one gather per shard touched (one row copy per sample when a batch is spread over
    many shards). Picklable (for DataLoader workers): maps are reopened
    lazily in each process. Thread-safe.
    """

    def __init__(self, path: str | Path, max_open_shards: int = 2, verify: bool = False):
        if max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1, got {max_open_shards}")
        self.path = Path(path)
        self.max_open_shards = int(max_open_shards)
        self.metadata = _read_metadata(self.path)
        self.seq_len = int(self.metadata["seq_len"])
        self.fields = list(self.metadata.get("fields") or REQUIRED_FIELDS)
        entries = _shard_entries(self.path, self.metadata)
        self.shard_files = [self.path / e["file"] for e in entries]
        self.shard_sizes = [int(e["num_samples"]) for e in entries]
        self._members = [
            self._check_shard(p, n) for p, n in zip(self.shard_files, self.shard_sizes, strict=True)
        ]
        self._bounds = np.cumsum([0, *self.shard_sizes]).astype(np.int64)
        declared = self.metadata.get("field_dtypes") or {}
        self.dtypes = {  # from the shards; metadata's only when there is no shard
            f: self._members[0][f].dtype if self._members else np.dtype(declared.get(f, "int32"))
            for f in self.fields
        }
        if verify:
            self.verify(entries)
        self._init_cache()

    # ------------------------------------------------------------ checks

    def _check_shard(self, path: Path, num_samples: int) -> dict[str, Member]:
        members = read_members(path)
        missing = [f for f in self.fields if f not in members]
        if missing:
            raise DataError(
                str(path),
                f"missing field(s) {missing}; metadata.json lists fields {self.fields}",
            )
        want_dtypes = self.metadata.get("field_dtypes") or {}
        for field in self.fields:
            m = members[field]
            if len(m.shape) != 2 or m.shape[1] != self.seq_len:
                raise DataError(
                    str(path),
                    f"{field} has shape {list(m.shape)}, expected [n, {self.seq_len}] "
                    f"(seq_len {self.seq_len} in metadata.json): shards of another run?",
                )
            if m.shape[0] != num_samples:
                raise DataError(
                    str(path),
                    f"{field} has {m.shape[0]} rows, metadata.json says {num_samples}: "
                    "the folder does not match its metadata; re-run the shard stage",
                )
            want = want_dtypes.get(field)
            if want is not None and np.dtype(want) != m.dtype:
                raise DataError(
                    str(path), f"{field} dtype {m.dtype}, metadata.json says {np.dtype(want)}"
                )
        return {f: members[f] for f in self.fields}

    def verify(self, entries: list[dict[str, Any]] | None = None) -> None:
        """sha256 of every shard against metadata.json (reads every byte once)."""
        entries = entries or self.metadata["shards"]
        for path, entry in zip(self.shard_files, entries, strict=True):
            want = entry.get("sha256")
            if want is None:
                raise DataError(str(path), "metadata.json has no sha256 for it; cannot verify")
            got = sha256_file(path)
            if got != want:
                raise DataError(
                    str(path),
                    f"sha256 {got[:12]}… does not match metadata.json's {want[:12]}…: "
                    "the shard changed or is corrupt",
                )

    # ------------------------------------------------------------ cache of open shards

    def _init_cache(self) -> None:
        self._open: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self.num_opens = 0  # shards opened (mapped or decompressed) so far, for benchmarks

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_open", "_lock"):
            state.pop(key)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_cache()

    def shard(self, s: int) -> dict[str, np.ndarray]:
        """Arrays of shard `s` ([n_s, seq_len] each), opening it (and evicting the least
        recently used shard past max_open_shards) if needed."""
        with self._lock:
            arrays = self._open.get(s)
            if arrays is not None:
                self._open.move_to_end(s)
                return arrays
        members = self._members[s]
        if all(m.stored for m in members.values()):
            arrays = _open_stored(self.shard_files[s], members)
        else:
            arrays = _open_compressed(self.shard_files[s], list(members))
        with self._lock:
            self.num_opens += 1
            self._open[s] = arrays
            self._open.move_to_end(s)
            while len(self._open) > self.max_open_shards:
                self._open.popitem(last=False)  # the map closes with its last view
        return arrays

    @property
    def num_open_shards(self) -> int:
        return len(self._open)

    def close(self) -> None:
        with self._lock:
            self._open.clear()

    # ------------------------------------------------------------ access

    def __len__(self) -> int:
        return int(self._bounds[-1])

    @property
    def num_shards(self) -> int:
        return len(self.shard_files)

    @property
    def pre_shuffled(self) -> bool:
        return bool(self.metadata.get("pre_shuffled", False))

    def locate(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shard, row inside the shard) of global indices (int64 arrays)."""
        idx = np.asarray(idx, np.int64)
        shard = np.searchsorted(self._bounds, idx, side="right") - 1
        return shard, idx - self._bounds[shard]

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample {i} out of range for {n} samples")
        s, row = self.locate(np.array([i]))
        arrays = self.shard(int(s[0]))
        return {f: np.array(arrays[f][int(row[0])]) for f in self.fields}

    def get_batch(self, idx: np.ndarray | list[int]) -> dict[str, np.ndarray]:
        """{field: np.ndarray [B, seq_len]} for global indices `idx` (in that order)."""
        idx = np.asarray(idx, np.int64).reshape(-1)
        if len(idx) and (idx.min() < 0 or idx.max() >= len(self)):
            bad = idx[(idx < 0) | (idx >= len(self))][0]
            raise IndexError(f"sample {bad} out of range for {len(self)} samples")
        out = {f: np.empty((len(idx), self.seq_len), self.dtypes[f]) for f in self.fields}
        shard, row = self.locate(idx)
        touched = np.unique(shard)
        if 4 * len(touched) > len(idx):
            # a global shuffle spreads a batch over ~B shards: the per-shard overhead of a fancy
            # gather (flatnonzero, index arrays, a temporary per field) costs more than copying
            # each row (one contiguous seq_len slice) on its own; measured 2.5x in bench_loader
            # rows visited shard by shard: each touched shard is opened once per batch even
            # when the batch touches more shards than max_open_shards
            by_shard = np.argsort(shard, kind="stable")
            last, arrays = -1, {}
            for i, s, r in zip(
                by_shard.tolist(), shard[by_shard].tolist(), row[by_shard].tolist(), strict=True
            ):
                if s != last:
                    arrays, last = self.shard(s), s
                for f in self.fields:
                    out[f][i] = arrays[f][r]
            return out
        for s in touched:
            sel = np.flatnonzero(shard == s)
            arrays = self.shard(int(s))
            for f in self.fields:
                out[f][sel] = arrays[f][row[sel]]  # one gather per field per shard
        return out

    def __repr__(self) -> str:
        return (
            f"ShardedTokenDataset({str(self.path)!r}, samples={len(self)}, "
            f"shards={self.num_shards}, seq_len={self.seq_len})"
        )


# ---------------------------------------------------------------- metadata


def _read_metadata(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise DataError(str(path), "not a folder; pass a shard folder such as <run>/shard/train")
    meta_path = path / METADATA_NAME
    if not meta_path.is_file():
        raise DataError(
            str(meta_path), "missing: a shard folder holds the shards and their metadata.json"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataError(str(meta_path), f"not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise DataError(str(meta_path), "expected a JSON object")
    for key in ("seq_len", "shards"):
        if key not in meta:
            raise DataError(str(meta_path), f"key '{key}' is missing")
    fields = meta.get("fields") or list(REQUIRED_FIELDS)
    missing = [f for f in REQUIRED_FIELDS if f not in fields]
    if missing:
        raise DataError(str(meta_path), f"fields {fields} lack {missing}: not token shards")
    return meta


def _shard_entries(path: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """metadata.json's shard list, checked against the folder and its own totals."""
    meta_path = path / METADATA_NAME
    entries = meta["shards"]
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and "file" in e and "num_samples" in e for e in entries
    ):
        raise DataError(str(meta_path), "'shards' must be a list of {file, num_samples, sha256}")
    listed = [e["file"] for e in entries]
    missing = [f for f in listed if not (path / f).is_file()]
    if missing:
        raise DataError(
            str(path), f"{len(missing)} shard(s) in metadata.json missing, first {missing[0]}"
        )
    extra = sorted(set(p.name for p in path.glob("*.npz")) - set(listed))
    if extra:
        raise DataError(
            str(path),
            f"{len(extra)} .npz file(s) not in metadata.json, first {extra[0]}: "
            "the folder does not match its metadata",
        )
    total = sum(int(e["num_samples"]) for e in entries)
    for key, want in (("num_samples", total), ("num_shards", len(entries))):
        if key in meta and int(meta[key]) != want:
            raise DataError(str(meta_path), f"{key} is {meta[key]}, the shard list gives {want}")
    sizes = meta.get("shard_sizes")
    if sizes is not None and [int(s) for s in sizes] != [int(e["num_samples"]) for e in entries]:
        raise DataError(str(meta_path), "shard_sizes disagrees with the shard list")
    return entries
