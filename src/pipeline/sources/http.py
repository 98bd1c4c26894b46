"""Resumable HTTP downloads into a cache folder.

A file streams into `<name>.part`; an interrupted download resumes with an HTTP Range request;
the finished file is checked by size (and sha256 where known) and only then renamed into place.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path

from pipeline.errors import DataError, PipelineError
from pipeline.io import sha256_file
from pipeline.progress import Progress

CHUNK_BYTES = 1 << 20
TIMEOUT_S = 30.0


class Unreachable(PipelineError):
    """The server could not be reached (no network, DNS failure, refused, timeout)."""


def cache_dir() -> Path:
    return Path(os.environ.get("PIPELINE_CACHE_DIR", "~/.cache/pipeline")).expanduser()


def _open(req: urllib.request.Request, timeout: float):
    try:
        return urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416:
            return exc  # range not satisfiable: handled by the caller
        raise DataError(req.full_url, f"HTTP {exc.code} {exc.reason}") from None
    except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise Unreachable(f"cannot reach {req.full_url} ({reason})") from None


def head_size(url: str, timeout: float = 10.0) -> int | None:
    """Remote size in bytes from a HEAD request; raises Unreachable or DataError."""
    with _open(urllib.request.Request(url, method="HEAD"), timeout) as resp:
        length = resp.headers.get("Content-Length")
        return int(length) if length is not None else None


def fetch(
    url: str,
    dest: Path,
    size_bytes: int | None = None,
    sha256: str | None = None,
    progress: bool = True,
    timeout: float = TIMEOUT_S,
) -> Path:
    """Download `url` to `dest` unless it is already there; resume a partial download."""
    dest = Path(dest)
    if dest.is_file() and (size_bytes is None or dest.stat().st_size == size_bytes):
        return dest  # cache hit
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    resp = _open(req, timeout)
    if isinstance(resp, urllib.error.HTTPError):  # 416: the partial file already holds it all
        resp.close()
        total = offset
    else:
        with resp:
            status = resp.status
            if status == 206:
                crange = resp.headers.get("Content-Range", "")
                total = (
                    int(crange.rsplit("/", 1)[-1])
                    if "/" in crange and not crange.endswith("*")
                    else None
                )
                mode = "ab"
            else:  # 200: the server ignored the range; start again
                offset, mode = 0, "wb"
                length = resp.headers.get("Content-Length")
                total = int(length) if length is not None else None
            bar = Progress(total, f"download {dest.name}", enabled=progress, unit="bytes")
            bar.update(offset)
            try:
                with open(part, mode) as f:
                    while chunk := resp.read(CHUNK_BYTES):
                        f.write(chunk)
                        bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as exc:
                raise DataError(
                    url,
                    f"connection dropped after {part.stat().st_size:,} bytes "
                    f"({type(exc).__name__}); re-run to resume from {part}",
                ) from None
            finally:
                bar.close()
    got = part.stat().st_size
    if total is not None and got < total:  # the connection dropped mid-way
        raise DataError(url, f"downloaded {got:,} of {total:,} bytes; re-run to resume from {part}")
    if size_bytes is not None and got != size_bytes:
        part.unlink()
        raise DataError(
            url,
            f"the server's file is {got:,} bytes, expected {size_bytes:,}; the "
            "URL is wrong or the file changed upstream (partial file removed)",
        )
    if sha256 is not None:
        digest = sha256_file(part)
        if digest != sha256:
            part.unlink()
            raise DataError(
                url,
                f"sha256 {digest[:16]}… does not match the expected "
                f"{sha256[:16]}…; the partial file was removed, re-run to retry",
            )
    os.replace(part, dest)
    return dest
