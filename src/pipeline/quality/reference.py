"""The reference set the n-gram LM learns from: a builtin corpus, a JSONL/Parquet/text file, or
`self` (this corpus's documents that pass the heuristic with a margin, chosen by the stage).

Reading stops after `max_docs` documents: training is a function of a bounded sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import DataError
from pipeline.sources import Malformed, Record
from pipeline.sources.builtin import BUILTINS, read_builtin
from pipeline.sources.files import read_jsonl, read_parquet, read_text

SELF = "self"


def describe(reference: str) -> str:
    if reference == SELF:
        return "self"
    return f"builtin:{reference}" if reference in BUILTINS else f"file:{reference}"


def check(reference: str) -> str | None:
    """Why `reference` cannot work (for the recipe check), or None."""
    if reference == SELF or reference in BUILTINS:
        return None
    if not Path(reference).is_file():
        return (
            f"{reference!r} is neither 'self', a builtin corpus ({', '.join(BUILTINS)}) "
            "nor an existing .jsonl/.parquet/.txt file"
        )
    return None


def _paragraphs(records: Iterator[Record | Malformed]) -> Iterator[Record | Malformed]:
    for rec in records:
        if isinstance(rec, Malformed):
            yield rec
            continue
        for i, para in enumerate(rec.text.split("\n\n")):
            yield Record(f"{rec.id}:{i}", para, rec.source)


def read_reference(reference: str, max_chars: int, progress: bool = False) -> list[str]:
    """Non-empty texts of a builtin or file reference (not `self`), in file order, until they
    hold `max_chars` characters."""
    if reference in BUILTINS:
        records = read_builtin(reference, progress)
    else:
        path = Path(reference)
        name = path.name.lower()
        if name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz")):
            records = read_jsonl([path], "text", None, "reference")
        elif name.endswith(".parquet"):
            records = read_parquet([path], "text", None, "reference")
        else:  # plain text: one document per blank-line-separated paragraph block
            records = _paragraphs(read_text([path], None, "reference"))
    texts, chars = [], 0
    for rec in records:
        if isinstance(rec, Malformed):
            raise DataError(rec.where, f"bad reference record: {rec.detail}")
        if rec.text.strip():
            texts.append(rec.text)
            chars += len(rec.text)
            if chars >= max_chars:
                break
    return texts
