"""What a source yields: `Record`s (and `Malformed` for bad input lines) in a deterministic
order; the download stage turns them into Parquet parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Record:
    id: str
    text: str
    source: str
    label: str | None = None  # only the toy corpus knows what each document is
    columns: dict[str, str | None] | None = None  # the source's extra columns (Source.columns)


@dataclass
class Malformed:
    where: str  # "file:line"
    reason: str  # short snake_case, becomes dropped_<reason>
    detail: str  # one line for the report
    raw: str  # the offending input, decoded with replacement, for the rejected part


def fix_surrogates(text: str) -> tuple[str, bool]:
    """Lone surrogates (from JSON escapes like \\ud800) cannot be stored as UTF-8: replace each
    with U+FFFD. Returns the text and whether anything was replaced."""
    try:
        text.encode("utf-8")
        return text, False
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text), True
