"""Web archives: `.warc`, `.warc.gz`, `.wet`, `.wet.gz` (Common Crawl's per-record gzip members
or a plain file) into documents with `url`, `date` and `content_type` columns.

Record framing uses warcio when installed (the `web` extra), else the minimal reader below
(version line, headers, Content-Length block); both hand the same content blocks to the same
HTTP parsing, so the documents do not depend on which one ran. WARC `response` and `resource`
records go through the HTML extractor (pipeline.sources.html); WET `conversion` records are
text already. `warcinfo`, `request`, `metadata` and `revisit` records are not documents and are
skipped. A bad record is yielded as `Malformed` (counted, inspectable in `rejected/`), never
raised; damage that loses the framing (a corrupt gzip member) ends that file with one.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pipeline.errors import DataError
from pipeline.sources import html
from pipeline.sources.files import paths_and_label
from pipeline.sources.records import Malformed, Record

COLUMNS = ("url", "date", "content_type")  # the string columns web records add to a part
DOC_TYPES = ("response", "resource", "conversion")  # WARC-Type values that hold a document
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain",)
RAW_CHARS = 2000  # characters of a bad record kept in rejected/ (headers, start of the block)
SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz", ".arc.gz")


@dataclass
class WarcRecord:
    number: int  # 1-based position in its file
    headers: dict[str, str]  # WARC headers, names lower-cased
    block: bytes  # the content block (a response's: HTTP status line, headers, body)


@dataclass
class BadRecord:
    number: int
    detail: str
    raw: bytes


# ---------------------------------------------------------------- framing


def _open(path: Path) -> BinaryIO:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by name)."""
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")  # noqa: SIM115


def _header_lines(f: BinaryIO) -> list[bytes] | None:
    lines = []
    while True:
        line = f.readline()
        if not line:
            return None  # end of file inside the headers
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.rstrip(b"\r\n"))


def read_records_builtin(f: BinaryIO) -> Iterator[WarcRecord | BadRecord]:
    """The minimal reader: `WARC/x.y` line, `Name: value` headers, a blank line, then
    Content-Length bytes of block. A record without a version line is skipped up to the next
    one (one BadRecord); a missing or bad Content-Length or a short block ends the file."""
    number = 0
    pending: bytes | None = None
    while True:
        line = pending if pending is not None else f.readline()
        pending = None
        if not line:
            return
        if not line.strip():
            continue  # the two CRLFs between records
        number += 1
        if not line.startswith(b"WARC/"):
            junk = [line]
            while (nxt := f.readline()) and not nxt.startswith(b"WARC/"):
                if len(junk) < 20:
                    junk.append(nxt)
            pending = nxt
            yield BadRecord(number, "no WARC/ version line", b"".join(junk))
            continue
        lines = _header_lines(f)
        if lines is None:
            yield BadRecord(number, "file ends inside the record's headers", line)
            return
        headers = {}
        for h in lines:
            name, sep, value = h.partition(b":")
            if sep:
                headers[name.strip().lower().decode("latin-1")] = value.strip().decode(
                    "utf-8", "replace"
                )
        raw_head = line + b"\n".join(lines)
        try:
            length = int(headers.get("content-length", ""))
            if length < 0:
                raise ValueError
        except ValueError:
            yield BadRecord(number, "no valid Content-Length header", raw_head)
            return
        block = f.read(length)
        if len(block) < length:
            yield BadRecord(number, f"truncated: {len(block)} of {length} bytes", raw_head)
            return
        yield WarcRecord(number, headers, block)


def read_records_warcio(f: BinaryIO) -> Iterator[WarcRecord | BadRecord]:
    """warcio's ArchiveIterator over the file as stored (it reads gzip members itself; no HTTP
    parsing: the block goes to `parse_http` as with the built-in reader). It stops at damage it
    cannot frame, and a record shorter than its Content-Length: one BadRecord ends the file."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    number = 0
    try:
        for rec in ArchiveIterator(f, no_record_parse=True):
            number += 1
            headers = {k.lower(): v for k, v in rec.rec_headers.headers}
            block = rec.raw_stream.read()
            length = headers.get("content-length", "")
            if not length.isdigit() or int(length) != len(block):  # warcio yields cut records
                raw = b"\n".join(f"{k}: {v}".encode() for k, v in headers.items())
                yield BadRecord(number, f"truncated: {len(block)} of {length} bytes", raw)
                return
            yield WarcRecord(number, headers, block)
    except (ArchiveLoadFailed, ValueError) as exc:
        yield BadRecord(number + 1, f"unreadable record ({exc})".replace("\n", " "), b"")


def warcio_available() -> bool:
    try:
        import warcio.archiveiterator  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_reader(name: str) -> str:
    """`auto` -> warcio when installed, else builtin; warcio when it is not: ImportError."""
    if name == "auto":
        return "warcio" if warcio_available() else "builtin"
    if name == "warcio" and not warcio_available():
        raise ImportError("warc reader 'warcio' is not installed (pip install '.[web]')")
    return name


def iter_file(path: Path, use_warcio: bool) -> Iterator[WarcRecord | BadRecord]:
    """The records of one file; gzip damage becomes a last BadRecord."""
    try:
        f = open(path, "rb") if use_warcio else _open(path)  # noqa: SIM115 (warcio: gzip itself)
    except OSError as exc:
        raise DataError(str(path), f"cannot open ({exc.strerror or exc})") from None
    number = 0
    try:
        reader = read_records_warcio if use_warcio else read_records_builtin
        for item in reader(f):
            number = item.number
            yield item
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        yield BadRecord(number + 1, f"unreadable compressed data ({exc})", b"")
    finally:
        f.close()


# ---------------------------------------------------------------- HTTP and documents


def _dechunk(body: bytes) -> bytes:
    out, at = [], 0
    while True:
        end = body.find(b"\r\n", at)
        if end < 0:
            raise ValueError("bad chunked encoding")
        size = int(body[at:end].split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        at = end + 2 + size + 2


def parse_http(block: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-cased names, body) of an HTTP response block; the body is
    de-chunked and gunzipped/inflated as its headers say. ValueError when it is not HTTP."""
    head, sep, body = block.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = block.partition(b"\n\n")
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    status_line = lines[0].decode("latin-1").split()
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise ValueError("no HTTP status line")
    status = int(status_line[1])
    headers = {}
    for h in lines[1:]:
        name, colon, value = h.partition(b":")
        if colon:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(body)
    coding = headers.get("content-encoding", "").lower()
    if coding in ("gzip", "x-gzip"):
        body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
    elif coding == "deflate":
        body = zlib.decompress(body)
    return status, headers, body


def _media_type(value: str | None) -> str | None:
    return value.split(";")[0].strip().lower() or None if value else None


def to_item(rec: WarcRecord, path: Path, extractor: str, source: str) -> Record | Malformed | None:
    """The document of one record, a Malformed for a bad or unusable one, None when the record
    type holds no document (warcinfo, request, metadata, revisit)."""
    h = rec.headers
    kind = h.get("warc-type", "").lower()
    if kind not in DOC_TYPES:
        return None
    where = f"{path}:record {rec.number}"
    url, date = h.get("warc-target-uri"), h.get("warc-date")
    if url and url.startswith("<") and url.endswith(">"):  # WARC/1.0 as wget writes it
        url = url[1:-1]
    doc_id = h.get("warc-record-id", "").strip("<>") or f"{path.name}:{rec.number}"
    raw = rec.block[:RAW_CHARS].decode("utf-8", "replace")
    body, ctype = rec.block, h.get("content-type")
    if kind == "response" and ctype and "application/http" in ctype.lower():
        try:
            status, http_headers, body = parse_http(rec.block)
        except (ValueError, zlib.error) as exc:
            return Malformed(where, "warc_malformed", f"bad HTTP payload ({exc})", raw)
        if not 200 <= status < 300:
            return Malformed(where, "warc_http_status", f"HTTP status {status}", raw)
        ctype = http_headers.get("content-type")
    media = _media_type(ctype) or ("text/plain" if kind == "conversion" else None)
    if media not in HTML_TYPES + TEXT_TYPES:
        return Malformed(where, "warc_unsupported_type", f"content type {media}", raw)
    text = html.decode(body, ctype)
    if media in HTML_TYPES:
        text = html.extract_text(text, extractor)
    if not text.strip():
        return Malformed(where, "warc_no_text", "no text after extraction", raw)
    columns = {"url": url, "date": date, "content_type": media}
    return Record(doc_id, text, source, columns=columns)


def read_warc(
    paths: list[Path], extractor: str, source: str, use_warcio: bool | None = None
) -> Iterator[Record | Malformed]:
    """Documents of the WARC/WET files in order (`use_warcio` None: when installed)."""
    use = warcio_available() if use_warcio is None else use_warcio
    for path in paths:
        for item in iter_file(path, use):
            if isinstance(item, BadRecord):
                where = f"{path}:record {item.number}"
                raw = item.raw[:RAW_CHARS].decode("utf-8", "replace")
                yield Malformed(where, "warc_malformed", item.detail, raw)
                continue
            doc = to_item(item, path, extractor, source)
            if doc is not None:
                yield doc


def read_html(paths: list[Path], extractor: str, source: str) -> Iterator[Record | Malformed]:
    """One document per HTML file (no URL or date: those columns stay null)."""
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DataError(str(path), f"cannot read ({exc.strerror or exc})") from None
        text = html.extract_text(html.decode(data, None), extractor)
        if not text.strip():
            raw = data[:RAW_CHARS].decode("utf-8", "replace")
            yield Malformed(str(path), "html_no_text", "no text after extraction", raw)
            continue
        columns = {"url": None, "date": None, "content_type": "text/html"}
        yield Record(path.name, text, source, columns=columns)


def file_reader(cfg: Any) -> tuple[list[Path], str, Callable[[list[Path]], Iterator]]:
    """(files, `source` label, reader of a list of files) for a `warc` or `html` download
    config: the serial source and the per-file tasks (stages/download/files_parallel.py)."""
    paths, label = paths_and_label(cfg)
    extractor = html.resolve(cfg.html_extractor)
    if cfg.source == "html":
        return paths, label, functools.partial(read_html, extractor=extractor, source=label)
    use = resolve_reader(cfg.warc_reader) == "warcio"
    label = _label(label)
    return (
        paths,
        label,
        functools.partial(read_warc, extractor=extractor, source=label, use_warcio=use),
    )


def read_warc_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    """The registered `warc` source: download.path (WARC/WET files), html_extractor."""
    paths, _, read = file_reader(cfg)
    return read(paths)


def read_html_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    """The registered `html` source: download.path (HTML files), html_extractor."""
    paths, _, read = file_reader(cfg)
    return read(paths)


def _label(stem: str) -> str:
    """`CC-MAIN-x.warc` (the stem of x.warc.gz) -> `CC-MAIN-x`."""
    for suffix in (".warc", ".wet", ".arc"):
        stem = stem.removesuffix(suffix)
    return stem
