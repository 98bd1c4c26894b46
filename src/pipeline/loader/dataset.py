"""ShardedTokenDataset: random access to a shard folder (metadata.json + `.npz` shards).

Uncompressed members are memory-mapped in place at their offset inside the zip (nothing is
read whole, so a dataset larger than RAM works); compressed shards, as older pipelines wrote
them, are decompressed whole into the same cache. At most `max_open_shards` shards are open
(LRU; default: every shard, up to a quarter of the open-file limit, since each map holds one
file descriptor). A URL (s3://, gs://, any fsspec URL) reads through a bounded local cache
(pipeline.loader.remote). Reads the format of pipeline.shards from the files and
metadata.json alone, so shards written by older pipelines (compressed, other writers) load too.
"""

from __future__ import annotations

import json
import mmap
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.hashing import sha256_file
from pipeline.loader.remote import CACHE_BYTES, ShardCache, is_url
from pipeline.loader.schema import REQUIRED_FIELDS, check_metadata
from pipeline.shards import Member, open_member, read_members

METADATA_NAME = "metadata.json"
FD_SHARE = 4  # open shard maps may use 1/FD_SHARE of RLIMIT_NOFILE (each map keeps one fd)


def default_max_open_shards(num_shards: int) -> int:
    """Every shard open (a global shuffle then opens each shard once per process: 64 shards at
    2 open maps reopened one per row, ~8x slower, docs/loader.md), bounded by the soft
    open-file limit / FD_SHARE so the maps never exhaust the process's descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = soft // FD_SHARE if soft != resource.RLIM_INFINITY else num_shards
    return max(1, min(int(num_shards), int(budget)))


# ---------------------------------------------------------------- format


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


def _open_compressed(path: Path, members: dict[str, Member]) -> dict[str, np.ndarray]:
    """Whole fields decompressed into memory (a deflated member cannot be mapped)."""
    return {field: open_member(path, field, m) for field, m in members.items()}


# ---------------------------------------------------------------- dataset


class ShardedTokenDataset:
    """A shard folder (train/ or eval/) as one array of N samples.

    `ds[i]` -> {field: np.ndarray [seq_len]} (a copy); `get_batch(idx)` -> {field: [B, seq_len]}
    with one gather per shard touched (one row copy per sample when a batch is spread over
    many shards). Picklable (for DataLoader workers): maps are reopened
    lazily in each process. Thread-safe.
    """

    def __new__(cls, path: str | Path | None = None, *args: Any, **kwargs: Any):
        if cls is ShardedTokenDataset and path is not None and is_url(path):
            return super().__new__(RemoteTokenDataset)  # a URL: through a local cache
        return super().__new__(cls)

    def __init__(self, path: str | Path, max_open_shards: int | None = None, verify: bool = False):
        if max_open_shards is not None and max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1, got {max_open_shards}")
        self.path = Path(path)
        self.metadata = _read_metadata(self.path)
        self.seq_len = int(self.metadata["seq_len"])
        self.fields = list(self.metadata.get("fields") or REQUIRED_FIELDS)
        entries = _shard_entries(self.path, self.metadata)
        self.shard_files = [self.path / e["file"] for e in entries]
        self.shard_sizes = [int(e["num_samples"]) for e in entries]
        self.max_open_shards = (
            default_max_open_shards(len(entries)) if max_open_shards is None else max_open_shards
        )
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
            arrays = _open_compressed(self.shard_files[s], members)
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
    return check_metadata(meta, meta_path)


def _shard_entries(path: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """metadata.json's shard list, checked against the folder and its own totals."""
    entries = meta["shards"]  # checked by check_metadata: names, counts, totals
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
    return entries


class RemoteTokenDataset(ShardedTokenDataset):
    """ShardedTokenDataset over a URL (pipeline.loader.remote): each shard is fetched and
    sha256-verified into `cache_dir` on first use; the cache holds at most `cache_bytes` of
    shards (more only while the open ones need it). `verify=True` fetches every shard now."""

    def __init__(
        self,
        path: str,
        max_open_shards: int | None = None,
        verify: bool = False,
        *,
        cache_dir: str | Path | None = None,
        cache_bytes: int = CACHE_BYTES,
    ):
        if max_open_shards is not None and max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1, got {max_open_shards}")
        self.url = str(path)
        self.cache = ShardCache(self.url, cache_dir, cache_bytes)
        self.cache.metadata()
        self.path = self.cache.folder
        self.metadata = meta = _read_metadata(self.path)
        if "split" not in meta and self.url.split("?")[0].rstrip("/").endswith("/eval"):
            meta["split"] = "eval"  # the URL names an eval folder: GlobalSampler reads in order
        self.seq_len = int(meta["seq_len"])
        self.fields = list(meta.get("fields") or REQUIRED_FIELDS)
        self._entries = list(meta["shards"])
        self.shard_files = [self.path / e["file"] for e in self._entries]
        self.shard_sizes = [int(e["num_samples"]) for e in self._entries]
        self.max_open_shards = max_open_shards or default_max_open_shards(len(self._entries))
        self._members: list[dict[str, Member] | None] = [None] * len(self._entries)
        self._bounds = np.cumsum([0, *self.shard_sizes]).astype(np.int64)
        declared = meta.get("field_dtypes") or {}
        self.dtypes = {f: np.dtype(declared.get(f, "int32")) for f in self.fields}
        self._init_cache()
        if self._entries:
            self.dtypes = {f: m.dtype for f, m in self._fetch(0).items()}
        for s in range(len(self._entries)) if verify else ():
            self._fetch(s)

    def _fetch(self, s: int) -> dict[str, Member]:
        """Shard s in the cache (fetched and verified if needed) and its checked members."""
        busy = {self.shard_files[i].name for i in list(self._open)}
        entry = self._entries[s]
        path, fetched = self.cache.ensure(entry["file"], entry.get("sha256"), busy)
        if fetched or self._members[s] is None:
            self._members[s] = self._check_shard(path, self.shard_sizes[s])
        return self._members[s]

    def shard(self, s: int) -> dict[str, np.ndarray]:
        if s not in self._open:  # a miss: fetched and checked before the base class maps it
            self._fetch(s)
        return super().shard(s)

    def verify(self, entries: list[dict[str, Any]] | None = None) -> None:
        """Every shard fetched now (each is verified when fetched)."""
        for s in range(len(self._entries)):
            self._fetch(s)

    def __repr__(self) -> str:
        return f"RemoteTokenDataset({self.url!r}, samples={len(self)}, cache={self.cache.folder})"
