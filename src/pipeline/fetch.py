"""Resumable HTTP downloads into a cache folder (outside any run folder). Top level, not in
sources/: it writes (the cache, its records), and sources/ only reads; the builtin corpora
(sources/builtin.py) fetch through it.

A file streams into `<name>.part`; an interrupted download resumes with an HTTP Range request;
the finished file is checked by size (and sha256 where known) and only then renamed into place.
Beside it `<name>.sha256` records the size and sha256 of that first download and the size the
server reported (`server_size`, or `placed: true` for a file found in the cache without a
record: put there by hand); every later cache hit is re-checked against it (and against the
pinned size / sha256, if any), and a cached file that no longer matches is downloaded again.
Only http:// and https:// URLs are fetched.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from pipeline.errors import DataError, PipelineError, short
from pipeline.hashing import sha256_file
from pipeline.io import atomic_write_json
from pipeline.progress import Progress

CHUNK_BYTES = 1 << 20
TIMEOUT_S = 30.0
SCHEMES = ("http", "https")
log = logging.getLogger("pipeline")


class Unreachable(PipelineError):
    """The server could not be reached (no network, DNS failure, refused, timeout)."""


def cache_dir() -> Path:
    return Path(os.environ.get("PIPELINE_CACHE_DIR", "~/.cache/pipeline")).expanduser()


def check_url(url: str) -> str:
    """`url` if it is http(s); DataError otherwise (file://, ftp://, a plain path...)."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in SCHEMES or not urllib.parse.urlsplit(url).netloc:
        raise DataError(
            short(url),
            "not an http:// or https:// URL; only those are downloaded "
            "(a PIPELINE_URL_<NAME> override must be a URL too)",
        )
    return url


def _open(req: urllib.request.Request, timeout: float):
    check_url(req.full_url)
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
    """Download `url` to `dest` unless a verified copy is there; resume a partial download."""
    dest = Path(dest)
    check_url(url)
    if dest.is_file():
        problem = cached_problem(dest, size_bytes, sha256)
        if problem is None:
            return dest  # verified cache hit
        log.warning("cached %s %s; downloading it again", dest, problem)
        dest.unlink()
        _sidecar(dest).unlink(missing_ok=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"Range": f"bytes={offset}-"} if offset else {})
    resp = _open(req, timeout)
    if isinstance(resp, urllib.error.HTTPError):  # 416: the partial file already holds it all
        crange = resp.headers.get("Content-Range", "") if resp.headers else ""  # bytes */N
        resp.close()
        last = crange.rsplit("/", 1)[-1]
        total = int(last) if last.isdigit() else None
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
    digest = sha256 or sha256_file(part)
    os.replace(part, dest)
    # recorded after the rename: a crash in between leaves a file without a record, which the
    # next run hashes and records (pinned files are checked against their pin regardless)
    atomic_write_json(_sidecar(dest), {"size": got, "sha256": digest, "server_size": total})
    return dest


def _sidecar(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256")


def cache_record(dest: Path) -> dict:
    """The record kept beside cached `dest` ({} when there is none or it is unreadable)."""
    try:
        record = json.loads(_sidecar(dest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def cached_problem(dest: Path, size_bytes: int | None, sha256: str | None) -> str | None:
    """Why the cached `dest` cannot be used (None: it can): its size or sha256 differs from
    the pin or from the record of its first download."""
    record = cache_record(dest)
    size = dest.stat().st_size
    want_size = size_bytes if size_bytes is not None else record.get("size")
    if want_size is not None and size != want_size:
        return f"is {size:,} bytes, expected {want_size:,}"
    want_sha = sha256 or record.get("sha256")
    digest = sha256_file(dest)
    if want_sha is not None and digest != want_sha:
        return f"has sha256 {digest[:12]}…, expected {str(want_sha)[:12]}…"
    if not record:  # placed by hand (or cached before records): trusted, recorded, flagged
        atomic_write_json(_sidecar(dest), {"size": size, "sha256": digest, "placed": True})
    return None
