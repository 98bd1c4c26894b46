"""Reading text a user hands us: byte-order marks, UTF-8/16/32 decoding with a one-line
DataError naming the file and byte, small text and JSON files read whole. Reading only, no
run-folder writes (those are pipeline.io's), so the input side (sources/, a tokenizer.json or a
seed set a recipe names) can use it.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

from pipeline.errors import DataError

# UTF-32 first: the UTF-32-LE mark starts with the UTF-16-LE one
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def bom_encoding(head: bytes) -> str | None:
    """The encoding a byte-order mark at the start of `head` announces, or None."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    return None


def decode_text(data: bytes, where: str) -> str:
    """UTF-8 text with any byte-order mark removed; UTF-16/32 with a mark are decoded too.
    DataError naming `where` and the byte offset if the bytes are not valid text."""
    encoding = bom_encoding(data[:4]) or "utf-8"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(
            where, f"not valid {encoding.removesuffix('-sig').upper()} text (byte {exc.start})"
        ) from None


def read_text_file(path: Path, what: str = "file") -> str:
    """A small text file (recipe, JSON metadata) read whole: BOM-aware, one-line errors."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(str(path), f"cannot read {what} ({exc.strerror or exc})") from None
    return decode_text(data, str(path))


def parse_json(text: str, where: str, what: str = "JSON file") -> Any:
    """JSON text; DataError naming `where` (and the line) on invalid or too deeply nested JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}:{exc.lineno}", f"{what} is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DataError(where, f"{what} is nested too deeply") from None


def read_json_file(path: Path, what: str = "JSON file") -> Any:
    """A JSON file (BOM-aware); DataError on unreadable, invalid or too deeply nested JSON."""
    return parse_json(read_text_file(path, what), str(path), what)
