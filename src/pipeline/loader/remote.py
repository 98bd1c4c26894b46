"""Shards on a URL: `ShardedTokenDataset("s3://bucket/run/shard/train")` (or gs://, hdfs://, any
fsspec URL, a query string passing options: `?endpoint_override=host:port&scheme=http`) reads
through a local cache folder bounded to `cache_bytes`.

metadata.json is fetched when the dataset is built; a shard on its first use, streamed into a
temp file while its sha256 is computed, checked against metadata.json and only then renamed into
the cache (a file in the cache is always a verified one, across processes and restarts). Past
the bound, the least recently used cached shards that are not open are deleted (a deleted file's
map stays valid until closed). The cache folder defaults to
$PIPELINE_SHARD_CACHE or ~/.cache/pipeline/shards, one subfolder per URL. pyarrow's filesystems
first (s3, gcs, hdfs, local), fsspec for every other protocol; both imported only here.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.loader.dataset import (
    METADATA_NAME,
    ShardedTokenDataset,
    _read_metadata,
    default_max_open_shards,
)

CACHE_BYTES = 64 << 30  # default bound of the local cache (64 GiB)
CHUNK = 8 << 20  # bytes per read from the URL


def open_url(url: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, path inside it) for `url`."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        fs, root = pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        try:
            import fsspec

            ffs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise DataError(url, f"no filesystem for this URL ({exc})") from None
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(ffs))
    return fs, root.rstrip("/")


def default_cache_dir(url: str) -> Path:
    base = os.environ.get("PIPELINE_SHARD_CACHE") or Path.home() / ".cache" / "pipeline" / "shards"
    return Path(base) / hashlib.sha256(url.encode()).hexdigest()[:16]


def fetch(fs: Any, src: str, dest: Path, want_sha256: str | None) -> None:
    """Copy `src` to `dest` through a temp file, refusing it if its sha256 is not `want`."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    h = hashlib.sha256()
    try:
        with fs.open_input_stream(src) as f, open(tmp, "wb") as out:
            while block := f.read(CHUNK):
                h.update(block)
                out.write(block)
        if want_sha256 is not None and h.hexdigest() != want_sha256:
            raise DataError(
                src,
                f"sha256 {h.hexdigest()[:12]}… does not match metadata.json's "
                f"{want_sha256[:12]}…: the shard changed or is corrupt on the URL",
            )
        os.replace(tmp, dest)
    except FileNotFoundError:
        raise DataError(src, "listed in metadata.json but missing on the URL") from None
    finally:
        tmp.unlink(missing_ok=True)


class RemoteTokenDataset(ShardedTokenDataset):
    """ShardedTokenDataset over a URL; shards are fetched (and verified) on first use into
    `cache_dir`, which holds at most `cache_bytes` of shards (at least the open ones)."""

    def __init__(
        self,
        path: str,
        max_open_shards: int | None = None,
        verify: bool = False,
        *,
        cache_dir: str | Path | None = None,
        cache_bytes: int = CACHE_BYTES,
    ):
        if cache_bytes <= 0:
            raise ValueError(f"cache_bytes must be > 0, got {cache_bytes}")
        self.url = str(path)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir(self.url)
        self.cache_bytes = int(cache_bytes)
        fs, self._root = open_url(self.url)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fetch(fs, f"{self._root}/{METADATA_NAME}", self.cache_dir / METADATA_NAME, None)
        meta = _read_metadata(self.cache_dir)
        if "split" not in meta and self.url.split("?")[0].rstrip("/").endswith("/eval"):
            meta["split"] = "eval"  # the folder name says eval: GlobalSampler reads it in order
        self._remote_meta = meta
        self.path = self.cache_dir
        self.metadata = meta
        self.seq_len = int(meta["seq_len"])
        self.fields = list(meta.get("fields") or ("input_ids", "segment_ids"))
        self._entries = list(meta["shards"])
        self.shard_files = [self.cache_dir / e["file"] for e in self._entries]
        self.shard_sizes = [int(e["num_samples"]) for e in self._entries]
        if max_open_shards is not None and max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1, got {max_open_shards}")
        self.max_open_shards = max_open_shards or default_max_open_shards(len(self._entries))
        self._members = [None] * len(self._entries)  # read when the shard is first fetched
        import numpy as np

        self._bounds = np.cumsum([0, *self.shard_sizes]).astype(np.int64)
        declared = meta.get("field_dtypes") or {}
        self.dtypes = {f: np.dtype(declared.get(f, "int32")) for f in self.fields}
        self._init_cache()
        if self._entries:
            self.dtypes = {f: m.dtype for f, m in self._local(0).items()}
        if verify:
            for s in range(len(self._entries)):
                self._local(s)  # every shard fetched once, so verified once

    # ------------------------------------------------------------ the local cache

    def _init_cache(self) -> None:
        super()._init_cache()
        self._fetch_lock = threading.Lock()
        self._fs = None  # reopened lazily in each process (filesystems do not pickle)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for key in ("_fetch_lock", "_fs"):
            state.pop(key, None)
        return state

    def _local(self, s: int) -> dict:
        """Members of shard s, fetching (and verifying) it into the cache first if needed."""
        path = self.shard_files[s]
        if not path.is_file():
            if self._fs is None:
                self._fs, self._root = open_url(self.url)
            name = self._entries[s]["file"]
            fetch(self._fs, f"{self._root}/{name}", path, self._entries[s].get("sha256"))
            self._members[s] = None
            self._evict(keep=path)
        os.utime(path)  # recency, for the eviction order
        if self._members[s] is None:
            self._members[s] = self._check_shard(path, self.shard_sizes[s])
        return self._members[s]

    def _evict(self, keep: Path) -> None:
        """Delete the least recently used cached shards, never an open one nor `keep`, until
        the cache holds at most cache_bytes (or only shards in use)."""
        cached = [p for p in self.shard_files if p.is_file()]
        used = sum(p.stat().st_size for p in cached)
        busy = {self.shard_files[i] for i in list(self._open)} | {keep}
        for p in sorted(cached, key=lambda p: p.stat().st_mtime):
            if used <= self.cache_bytes:
                break
            if p not in busy:
                used -= p.stat().st_size
                p.unlink(missing_ok=True)

    def cached_bytes(self) -> int:
        """Bytes of shards in the cache folder now."""
        return sum(p.stat().st_size for p in self.shard_files if p.is_file())

    def shard(self, s: int) -> dict:
        if s not in self._open:  # a miss: fetch and check it before the base class maps it
            with self._fetch_lock:
                self._local(s)
                return super().shard(s)
        return super().shard(s)

    def __repr__(self) -> str:
        return f"RemoteTokenDataset({self.url!r}, samples={len(self)}, cache={self.cache_dir})"
