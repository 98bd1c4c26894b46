"""Shards on a URL, fetched into a bounded local cache: `ShardedTokenDataset("s3://bucket/run/
shard/train")` (or gs://, hdfs://, any fsspec URL; a query string passes options, e.g.
`?endpoint_override=host:port&scheme=http`) builds a RemoteTokenDataset over a ShardCache.

metadata.json is fetched when the dataset is built; a shard on its first use, streamed into a
temp file while its sha256 is computed, checked against metadata.json and only then renamed into
the cache: a file in the cache is always a verified one, across processes and restarts. Past
`cache_bytes`, the least recently used cached shards that are not in use are deleted (a deleted
file's map stays valid until it is closed). The cache folder defaults to $PIPELINE_SHARD_CACHE
or ~/.cache/pipeline/shards, one subfolder per URL. pyarrow's filesystems first (s3, gcs, hdfs,
local), fsspec for every other protocol; both imported only when a URL is opened.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.urlfs import url_filesystem

CACHE_BYTES = 64 << 30  # default bound of the local cache (64 GiB)
CHUNK = 8 << 20  # bytes per read from the URL
METADATA_NAME = "metadata.json"


def is_url(path: Any) -> bool:
    return "://" in str(path)


def open_url(url: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, path inside it) for `url`."""
    try:
        return url_filesystem(url)
    except LookupError as exc:
        raise DataError(url, f"no filesystem for this URL ({exc})") from None


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


class ShardCache:
    """The local copy of a URL's shard folder, at most `cache_bytes` of shards (more only while
    the shards in use need it). Picklable: the filesystem is reopened in each process."""

    def __init__(self, url: str, cache_dir: str | Path | None, cache_bytes: int):
        if cache_bytes <= 0:
            raise ValueError(f"cache_bytes must be > 0, got {cache_bytes}")
        self.url = str(url)
        self.folder = Path(cache_dir) if cache_dir is not None else default_cache_dir(self.url)
        self.cache_bytes = int(cache_bytes)
        self._fs, self._root = open_url(self.url)
        self._lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_fs", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fs, self._lock = None, threading.Lock()

    def _get(self, name: str, sha256: str | None) -> Path:
        if self._fs is None:
            self._fs, self._root = open_url(self.url)
        fetch(self._fs, f"{self._root}/{name}", self.folder / name, sha256)
        return self.folder / name

    def metadata(self) -> Path:
        """metadata.json fetched afresh (the URL's current one)."""
        return self._get(METADATA_NAME, None)

    def ensure(self, name: str, sha256: str | None, busy: set[str]) -> tuple[Path, bool]:
        """(local path, fetched now) of shard `name`, fetched and verified if it is not cached;
        a fetch then evicts other shards (never one in `busy`) down to the bound."""
        with self._lock:
            path = self.folder / name
            fetched = not path.is_file()
            if fetched:
                self._get(name, sha256)
                self.evict(busy | {name})
            os.utime(path)  # recency, for the eviction order
            return path, fetched

    def evict(self, busy: set[str]) -> None:
        """Delete least recently used cached shards (not in `busy`) until within the bound."""
        cached = [p for p in self.folder.iterdir() if p.is_file() and p.name != METADATA_NAME]
        cached = [p for p in cached if not p.name.startswith(".")]
        used = sum(p.stat().st_size for p in cached)
        for p in sorted(cached, key=lambda p: p.stat().st_mtime):
            if used <= self.cache_bytes:
                break
            if p.name not in busy:
                used -= p.stat().st_size
                p.unlink(missing_ok=True)

    def cached_bytes(self) -> int:
        """Bytes of shards in the cache folder now."""
        return sum(
            p.stat().st_size
            for p in self.folder.iterdir()
            if p.is_file() and p.name != METADATA_NAME and not p.name.startswith(".")
        )
