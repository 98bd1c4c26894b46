"""User files: JSONL (plain, .gz, .zst), Parquet, and plain text.

`path` is a file, a folder (every file in it) or a glob; files are read in sorted order. A bad
line (invalid JSON or UTF-8, missing or non-string text) is yielded as `Malformed`, never raised.
"""

from __future__ import annotations

import glob
import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import DataError
from pipeline.sources.records import Malformed, Record, fix_surrogates
from pipeline.text_files import bom_encoding


def expand_paths(pattern: str) -> list[Path]:
    path = Path(pattern).expanduser()
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    if path.is_file():
        return [path]
    return sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())


def _open_binary(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    if path.suffix == ".zst":
        # pyarrow ships zstd: no extra dependency for .zst input
        return pa.CompressedInputStream(pa.OSFile(str(path), "rb"), "zstd")
    return open(path, "rb")


def _lines(path: Path) -> Iterator[bytes]:
    """The file's lines without newlines; a UTF-8 byte-order mark is dropped, a UTF-16/32 one
    refused (its lines are not newline-separated bytes)."""
    first = True
    for line in _raw_lines(path):
        if first:
            first = False
            line = strip_bom(path, line)
        yield line


def strip_bom(path: Path | str, first_line: bytes) -> bytes:
    """The file's first line without a UTF-8 byte-order mark; DataError for a UTF-16/32 one."""
    encoding = bom_encoding(first_line[:4])
    if encoding == "utf-8-sig":
        return first_line[3:]
    if encoding is not None:
        raise DataError(
            str(path),
            f"is {encoding.upper()} (byte-order mark); JSONL must be UTF-8: convert it "
            f"(iconv -f {encoding.upper()} -t UTF-8)",
        )
    return first_line


def _raw_lines(path: Path) -> Iterator[bytes]:
    try:
        f = _open_binary(path)
    except OSError as exc:
        raise DataError(str(path), f"cannot open ({exc.strerror or exc})") from None
    try:
        if isinstance(f, pa.NativeFile):
            buf = b""
            while chunk := f.read(1 << 20):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                yield from lines
            if buf:
                yield buf
        else:
            for line in f:
                yield line.rstrip(b"\n")
    except (OSError, EOFError, pa.ArrowInvalid) as exc:
        raise DataError(
            str(path), f"cannot read ({exc}); is the file truncated or mislabelled?"
        ) from None
    finally:
        f.close()


def _missing_field(text_field: str, obj: dict) -> str:
    """Say which fields the record has and which recipe key picks the text."""
    names = [str(k) for k in obj]
    shown = ", ".join(repr(n) for n in names[:12]) + (", ..." if len(names) > 12 else "")
    has = f"the record has {shown}" if names else "the record is an empty object"
    return f"field '{text_field}' is missing ({has}); set download.text_field to the text's field"


def read_jsonl(
    paths: list[Path],
    text_field: str,
    id_field: str | None,
    source: str,
    url_field: str | None = None,
) -> Iterator[Record | Malformed]:
    for path in paths:
        stem = path.name
        for lineno, raw in enumerate(_lines(path), start=1):
            item = parse_jsonl_line(
                raw, f"{path}:{lineno}", f"{stem}:{lineno}", text_field, id_field, source, url_field
            )
            if item is not None:
                yield item


def parse_jsonl_line(
    raw: bytes,
    where: str,
    made_id: str,
    text_field: str,
    id_field: str | None,
    source: str,
    url_field: str | None = None,
) -> Record | Malformed | None:
    """One JSONL line (without its newline): a Record, a Malformed, or None for a blank line.
    `where` is "file:line" for malformed lines, `made_id` the id of a record without one;
    `url_field`'s value (a string, else null) goes to the record's `url` column."""
    if not raw.strip():
        return None  # blank lines are not records
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Malformed(
            where,
            "invalid_utf8",
            f"invalid UTF-8 at byte {exc.start}",
            raw.decode("utf-8", "replace"),
        )
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return Malformed(where, "bad_json", f"bad JSON ({exc.msg} at column {exc.colno})", line)
    except RecursionError:
        return Malformed(where, "bad_json", "JSON nested too deeply", line)
    if not isinstance(obj, dict):
        return Malformed(where, "bad_json", "a JSON object per line expected", line)
    if text_field not in obj:
        return Malformed(where, "missing_text", _missing_field(text_field, obj), line)
    text = obj[text_field]
    if not isinstance(text, str):
        return Malformed(
            where,
            "text_not_string",
            f"field '{text_field}' is {type(text).__name__}, not a string",
            line,
        )
    text, _ = fix_surrogates(text)
    doc_id = obj.get(id_field) if id_field else None
    doc_id = str(doc_id) if doc_id is not None else made_id
    if url_field is None:
        return Record(fix_surrogates(doc_id)[0], text, source)
    url = obj.get(url_field)
    url = fix_surrogates(url)[0] if isinstance(url, str) else None
    return Record(fix_surrogates(doc_id)[0], text, source, columns={"url": url})


def read_parquet(
    paths: list[Path],
    text_field: str,
    id_field: str | None,
    source: str,
    url_field: str | None = None,
) -> Iterator[Record | Malformed]:
    for path in paths:
        try:
            pf = pq.ParquetFile(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise DataError(str(path), f"not a readable Parquet file ({exc})") from None
        names = pf.schema_arrow.names
        if text_field not in names:
            raise DataError(
                str(path),
                f"no column '{text_field}' (columns: {', '.join(names)}); set download.text_field",
            )
        if url_field and url_field not in names:
            raise DataError(
                str(path),
                f"no column '{url_field}' (columns: {', '.join(names)}); set download.url_field",
            )
        has_id = bool(id_field and id_field in names)
        cols = [text_field] + ([id_field] if has_id else []) + ([url_field] if url_field else [])
        row = 0
        for batch in pf.iter_batches(columns=cols, batch_size=4096):
            texts = batch.column(0).to_pylist()
            ids = batch.column(1).to_pylist() if has_id else [None] * len(texts)
            links = batch.column(len(cols) - 1).to_pylist() if url_field else None
            for k, (text, doc_id) in enumerate(zip(texts, ids, strict=False)):
                row += 1
                where = f"{path}:row {row}"
                if not isinstance(text, str):
                    yield Malformed(
                        where,
                        "text_not_string",
                        f"column '{text_field}' is {type(text).__name__}",
                        str(text),
                    )
                    continue
                doc_id = str(doc_id) if doc_id is not None else f"{path.name}:{row}"
                if links is None:
                    yield Record(doc_id, text, source)
                else:
                    url = links[k] if isinstance(links[k], str) else None
                    yield Record(doc_id, text, source, columns={"url": url})


def read_text(
    paths: list[Path], separator: str | None, source: str
) -> Iterator[Record | Malformed]:
    """One document per file, or per piece between lines equal to `separator`."""
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DataError(str(path), f"cannot read ({exc.strerror or exc})") from None
        encoding = bom_encoding(data[:4]) or "utf-8"  # a BOM is dropped; UTF-16/32 decoded
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            yield Malformed(
                str(path),
                "invalid_utf8",
                f"invalid {encoding.removesuffix('-sig').upper()} at byte {exc.start}",
                data.decode("utf-8", "replace"),
            )
            continue
        if separator is None:
            yield Record(path.name, text, source)
            continue
        for i, piece in enumerate(split_on_line(text.splitlines(keepends=True), separator)):
            yield Record(f"{path.name}:{i}", piece, source)


def split_on_line(lines: Iterable[str], separator: str) -> Iterator[str]:
    """Pieces between lines that equal `separator` (surrounding whitespace ignored), stripped;
    empty pieces are dropped. Streams: a 2 GB file is never held in memory whole."""
    cur: list[str] = []
    for line in lines:
        if line.strip() == separator:
            piece = "".join(cur).strip()
            if piece:
                yield piece
            cur = []
        else:
            cur.append(line)
    piece = "".join(cur).strip()
    if piece:
        yield piece


def paths_and_label(cfg: Any) -> tuple[list[Path], str]:
    """The files `download.path` matches, and the `source` value their records get: the file's
    stem, or the folder/glob's, else the source name."""
    paths = expand_paths(cfg.path or "")
    if not paths:
        raise DataError(str(cfg.path), "no input file matches")
    label = Path(paths[0]).stem if len(paths) == 1 else Path(cfg.path or "").stem or cfg.source
    return paths, label.replace("*", "") or cfg.source


def read_jsonl_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    """The registered `jsonl` source: download.path, text_field, id_field."""
    paths, label = paths_and_label(cfg)
    return read_jsonl(paths, cfg.text_field, cfg.id_field, label, cfg.url_field)


def read_parquet_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    """The registered `parquet` source: download.path, text_field, id_field."""
    paths, label = paths_and_label(cfg)
    return read_parquet(paths, cfg.text_field, cfg.id_field, label, cfg.url_field)


def read_text_source(cfg: Any, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    """The registered `text` source: download.path, separator."""
    paths, label = paths_and_label(cfg)
    return read_text(paths, cfg.separator, label)
