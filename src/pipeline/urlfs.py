"""URL -> (pyarrow FileSystem, path inside it): pyarrow's own filesystems first (local, s3, gcs,
hdfs), any other fsspec protocol through PyFileSystem(FSSpecHandler). One resolver for run
folders on a URL (run/storage.py) and URL shards (loader/remote.py); pyarrow and fsspec are
imported only when a URL is opened, so importing this module costs nothing."""

from __future__ import annotations

from typing import Any


def url_filesystem(url: str) -> tuple[Any, str]:
    """(filesystem, root path without a trailing slash); LookupError(reason) when neither pyarrow
    nor fsspec can open `url` (the caller words the error for its own user)."""
    import pyarrow as pa
    import pyarrow.fs as pafs

    try:
        fs, root = pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        try:
            import fsspec

            ffs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise LookupError(str(exc)) from None
        fs = pafs.PyFileSystem(pafs.FSSpecHandler(ffs))
    return fs, root.rstrip("/")
