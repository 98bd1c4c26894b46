"""Where documents come from: every source registered under the name `download.source` takes.

Adding one is a reader function (see registry.py for its contract) and one `register_source`
line below; nothing else in the pipeline lists source names.
"""

from __future__ import annotations

from pipeline.sources import builtin, files, hf, python_docs, toy, warc
from pipeline.sources.records import Malformed, Record, fix_surrogates
from pipeline.sources.registry import (
    SOURCES,
    Source,
    register_source,
    source_names,
    unregister_source,
)

__all__ = [
    "SOURCES",
    "Malformed",
    "Record",
    "Source",
    "fix_surrogates",
    "register_source",
    "source_names",
    "unregister_source",
]

for _b in builtin.BUILTINS.values():
    register_source(Source(_b.name, builtin.read_source, _b.about, kind="remote"))
register_source(
    Source("jsonl", files.read_jsonl_source, "JSONL (.gz, .zst)", kind="files", needs_path=True)
)
register_source(
    Source("parquet", files.read_parquet_source, "Parquet files", kind="files", needs_path=True)
)
register_source(
    Source("text", files.read_text_source, "plain text files", kind="files", needs_path=True)
)
register_source(Source("hf", hf.read_source, hf.ABOUT, kind="remote"))
register_source(Source("toy", toy.read_source, toy.ABOUT, labelled=True))
register_source(Source("python_docs", python_docs.read_source, python_docs.ABOUT))
register_source(
    Source(
        "warc",
        warc.read_warc_source,
        "WARC / WET files (.gz): Common Crawl; HTML through download.html_extractor",
        kind="files",
        needs_path=True,
        columns=warc.COLUMNS,
        lenient=True,
    )
)
register_source(
    Source(
        "html",
        warc.read_html_source,
        "HTML files, one document each, through download.html_extractor",
        kind="files",
        needs_path=True,
        columns=warc.COLUMNS,
        lenient=True,
    )
)
