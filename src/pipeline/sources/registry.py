"""The source registry: name -> Source. `download.source` must name a registered source.

A source is a function `read(cfg, seed, progress)` yielding `Record`s (and `Malformed` for bad
input) in a deterministic order, where `cfg` is the recipe's `download:` block (DownloadConfig:
path, text_field, id_field, separator, max_docs, ...). Registering it is all it takes for the
recipe check, the download stage and `pipeline datasets` to know it (docs/overview.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pipeline.sources.records import Malformed, Record

Reader = Callable[[Any, int, bool], Iterator[Record | Malformed]]


@dataclass(frozen=True)
class Source:
    name: str  # the `download.source` value
    read: Reader  # (download config, download seed, show progress) -> records in order
    about: str  # one line for `pipeline datasets`
    kind: Literal["remote", "offline", "files"] = "offline"  # remote: downloaded once, cached
    needs_path: bool = False  # reads `download.path` (a file, folder or glob): required, checked
    labelled: bool = False  # records carry `label` (written as a column): the toy corpus
    columns: tuple[str, ...] = ()  # string columns its records carry in Record.columns (web)
    lenient: bool = False  # malformed records never stop the run (web crawls: some are bad)


SOURCES: dict[str, Source] = {}


def register_source(source: Source) -> None:
    """Make `source` available as `download.source: <name>`."""
    if source.name in SOURCES:
        raise ValueError(f"source {source.name!r} is already registered")
    SOURCES[source.name] = source


def unregister_source(name: str) -> None:
    """Remove a registered source (tests and plugins that registered one temporarily)."""
    del SOURCES[name]


def source_names(kind: str | None = None) -> list[str]:
    """Registered source names in registration order, optionally of one kind."""
    return [s.name for s in SOURCES.values() if kind is None or s.kind == kind]
