"""download: read a registered source (builtin corpus, JSONL, Parquet, text, a Hugging Face
dataset, WARC / WET / HTML, toy, python_docs), or a weighted mix of several (`sources`,
download/mix.py), into Parquet parts of `docs_per_part` documents with columns id, text, source
(+ label for toy; url, date, content_type for web files; mix_copy for a mix).

The source order defines the corpus: part k holds documents k·docs_per_part onwards. JSONL
(without max_docs) is read by executor tasks over byte ranges (download/split.py: same bytes),
several WARC / HTML files by one task each (download/files_parallel.py: same bytes); other
sources are read in order in the driver. Parts are then the unit of parallel work for every
later stage. Malformed input lines go to `rejected/`.
"""

from __future__ import annotations

import difflib
import functools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import pyarrow as pa

from pipeline.config import RunConfig, bounded, input_path, option, setting
from pipeline.errors import DataError, RecipeError
from pipeline.parts import part_name, write_table
from pipeline.progress import Progress
from pipeline.sources import SOURCES, Malformed, Record, builtin, hf, html, warc
from pipeline.sources.files import expand_paths, paths_and_label
from pipeline.stage import DocCounts, Stage, StageContext, StageResult
from pipeline.stages.download import files_parallel, mix
from pipeline.stages.download.split import Parse, read_split, rejected_table, write_part

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class SourceConfig:
    """What one source reads: the `download:` block's reader keys, and each `download.sources`
    entry's."""

    source: str = option(
        "tinystories", "a registered source (`pipeline datasets`): corpus, jsonl, warc, toy..."
    )
    path: str | None = input_path(doc="jsonl/parquet/text/warc/html: a file, a folder or a glob")
    text_field: str = option("text", "jsonl/parquet/hf: the field holding the document text")
    id_field: str | None = option(
        "id", "jsonl/parquet/hf: id field; absent ids become file:line (hf: row)"
    )
    url_field: str | None = option(
        None, "jsonl/parquet: the field kept as the `url` column (clean's URL lists); null: none"
    )
    hf_path: str | None = option(
        None, "hf: hub name (org/name), local data folder or save_to_disk folder"
    )
    hf_name: str | None = option(None, "hf: the dataset's config name (load_dataset's `name`)")
    split: str = option(
        "train", "hf: the split to read (load_dataset slicing like 'train[:1%]' works)"
    )
    streaming: bool = option(
        False, "hf: stream rows (nothing prepared in the cache; stops at max_docs)"
    )
    revision: str | None = option(None, "hf: hub branch, tag or commit; null: the default branch")
    separator: str | None = option(
        None, "text: split files on lines equal to this; null: 1 doc/file"
    )
    max_docs: int | None = bounded(None, ge=1, doc="stop after this many documents (toy: how many)")
    toy_junk_fraction: float = bounded(0.15, ge=0.0, le=1.0, doc="toy: share of junk documents")
    html_extractor: Literal["auto", "resiliparse", "trafilatura", "tags"] = option(
        "auto", "warc/html: HTML to text; auto = resiliparse, else trafilatura, else tags"
    )
    warc_reader: Literal["auto", "warcio", "builtin"] = option(
        "auto", "warc: record framing; auto = warcio when installed, else our own"
    )

    def validate(self, path: str) -> None:
        if self.source not in SOURCES:
            close = difflib.get_close_matches(self.source, list(SOURCES), n=1)
            raise RecipeError(
                f"{path}.source",
                f"got {self.source!r}, expected one of {', '.join(SOURCES)}",
                close[0] if close else None,
            )
        if SOURCES[self.source].needs_path:
            if not self.path:
                raise RecipeError(
                    f"{path}.path",
                    f"is required when source is '{self.source}' (a file, folder or glob)",
                )
            if not expand_paths(self.path):
                raise RecipeError(f"{path}.path", f"no file matches {self.path!r}")
        if self.source == "hf":
            hf.check_config(path, self.hf_path, self.split, self.streaming)
        if self.source in ("warc", "html"):
            try:
                html.resolve(self.html_extractor)
            except ImportError as exc:
                raise RecipeError(f"{path}.html_extractor", f"{exc}; or use auto / tags") from None
            try:
                warc.resolve_reader(self.warc_reader)
            except ImportError as exc:
                raise RecipeError(f"{path}.warc_reader", f"{exc}; or use auto / builtin") from None


@dataclass(frozen=True)
class MixSource(SourceConfig):
    """One entry of `download.sources`: a source with its name and weight in the mix."""

    RECIPE_SECTION: ClassVar[str] = "download.sources[]"

    name: str | None = option(
        None, "the `source` column value and report name; null: the corpus or file stem"
    )
    weight: float = bounded(
        1.0, gt=0.0, le=1000.0, doc="> 1: repeat (2.5 = 2 passes + a seeded half); < 1: sample"
    )


@dataclass(frozen=True)
class DownloadConfig(SourceConfig):
    docs_per_part: int = bounded(
        5000, ge=1, doc="documents per Parquet part (the unit of parallelism)"
    )
    max_malformed_fraction: float = bounded(
        0.05, ge=0.0, le=1.0, doc="stop the run above this share (not warc/html: counted only)"
    )
    sources: list[MixSource] | None = option(
        None, "a weighted mix of sources (each: source keys + name + weight); replaces source"
    )

    def validate(self, path: str) -> None:
        if self.sources is None:
            super().validate(path)
            return
        if not self.sources:
            raise RecipeError(f"{path}.sources", "is empty; list at least one source or use null")
        for key in ("path", "hf_path"):
            if getattr(self, key):
                raise RecipeError(
                    f"{path}.{key}",
                    "is not read when download.sources is set: put it in a sources entry",
                )
        seen: dict[str, int] = {}
        for i, src in enumerate(self.sources):
            name = mix.source_name(src)
            if name in seen:
                raise RecipeError(
                    f"{path}.sources[{i}].name",
                    f"{name!r} is also source {seen[name]}'s name; give each a distinct name",
                )
            seen[name] = i


def iter_source(cfg: DownloadConfig, seed: int, progress: bool) -> Iterator[Record | Malformed]:
    return SOURCES[cfg.source].read(cfg, seed, progress)


def part_columns(sources: list[SourceConfig], mixed: bool) -> dict[str, pa.DataType]:
    """The extra columns of the parts: every source's (web: url, date, content_type), in
    first-seen order, null in rows of a source without them; `mix_copy` for a mix."""
    cols: dict[str, pa.DataType] = {}
    for src in sources:
        cols.update(dict.fromkeys(SOURCES[src.source].columns, pa.string()))
        if src.url_field and src.source in ("jsonl", "parquet"):
            cols["url"] = pa.string()
    if mixed:
        cols[mix.COPY_COLUMN] = pa.int32()
    return cols


class _PartWriter:
    """Buffers records and writes them as numbered parts; `rejected/` gets its own numbering."""

    def __init__(
        self,
        out_dir: Path,
        docs_per_part: int,
        labelled: bool,
        columns: dict[str, pa.DataType] | None = None,
    ):
        self.out_dir, self.size, self.labelled = out_dir, docs_per_part, labelled
        self.columns = columns or {}
        self.buf: list[Record] = []
        self.bad: list[Malformed] = []
        self.outputs: list[str] = []
        self.num_parts = self.num_rejected_parts = 0
        self.bytes_out = 0

    def add(self, rec: Record) -> None:
        self.buf.append(rec)
        if len(self.buf) >= self.size:
            self.flush()

    def reject(self, bad: Malformed) -> None:
        self.bad.append(bad)
        if len(self.bad) >= self.size:
            self.flush_rejected()

    def flush(self) -> None:
        if not self.buf:
            return
        rel, nbytes = write_part(
            self.out_dir, self.num_parts, self.buf, self.labelled, self.columns
        )
        self.outputs.append(rel)
        self.num_parts += 1
        self.bytes_out += nbytes
        self.buf = []

    def flush_rejected(self) -> None:
        if not self.bad:
            return
        rel = f"rejected/{part_name(self.num_rejected_parts)}"
        table = rejected_table(
            [b.where for b in self.bad], [b.raw for b in self.bad], [b.reason for b in self.bad]
        )
        write_table(self.out_dir / rel, table)
        self.outputs.append(rel)
        self.num_rejected_parts += 1
        self.bad = []


def run(cfg: DownloadConfig, ctx: StageContext) -> StageResult:
    if cfg.sources is not None:
        return _run_mix(cfg, ctx)
    if cfg.source == "jsonl" and cfg.max_docs is None:
        return _run_split(cfg, ctx)
    if cfg.source in ("warc", "html") and cfg.max_docs is None and ctx.executor.workers > 1:
        if len(expand_paths(cfg.path or "")) > 1:
            return _run_files(cfg, ctx)
    return _run_serial(cfg, ctx)


def _run_files(cfg: DownloadConfig, ctx: StageContext) -> StageResult:
    """WARC / HTML files, one executor task each (download/files_parallel.py: same bytes)."""
    paths, label, read = warc.file_reader(cfg)
    columns = tuple(part_columns([cfg], mixed=False))
    check = functools.partial(_check, cfg, cfg.max_malformed_fraction)
    outputs, res = files_parallel.read_files(
        paths, read, label, columns, cfg.docs_per_part, ctx.out_dir, ctx.executor, check
    )
    counts = DocCounts(res.docs_in, res.docs_out, dict(res.dropped), res.bytes_in, res.bytes_out)
    stats: dict[str, Any] = {
        **setting(cfg, "source"),
        "num_parts": sum(not o.startswith("rejected/") for o in outputs),
        "docs_per_source": {label: res.docs_out},
    }
    if res.examples:
        stats["malformed_examples"] = res.examples
    stats.update(_web_stats([cfg]))
    return StageResult(outputs=outputs, stats=stats, counts=[counts])


def _check(src: SourceConfig, fraction: float, docs_in: int, bad: int, first: str | None) -> None:
    """The stage's errors on what was read: too many malformed records (a web source only
    counts them), or no document."""
    where = str(src.path or src.hf_path or src.source)
    lenient = SOURCES[src.source].lenient
    if docs_in and bad / docs_in > fraction and not lenient:
        raise DataError(
            where,
            f"{bad} of {docs_in} records malformed "
            f"({bad / docs_in:.1%} > download.max_malformed_fraction "
            f"{fraction:.1%}); first: {first}",
        )
    if docs_in - bad == 0:
        raise DataError(where, "the source produced no documents")


def _run_split(cfg: DownloadConfig, ctx: StageContext) -> StageResult:
    """JSONL (with no max_docs: the serial reader stops early, this one reads all to count)
    through executor tasks over byte ranges (download/split.py)."""
    paths, label = paths_and_label(cfg)
    parse = Parse(cfg.text_field, cfg.id_field, label, cfg.url_field)
    check = functools.partial(_check, cfg, cfg.max_malformed_fraction)
    outputs, res = read_split(paths, parse, cfg.docs_per_part, ctx.out_dir, ctx.executor, check)
    counts = DocCounts(res.docs_in, res.docs_out, dict(res.dropped), res.bytes_in, res.bytes_out)
    stats: dict[str, Any] = {
        **setting(cfg, "source"),
        "num_parts": sum(not o.startswith("rejected/") for o in outputs),
        "docs_per_source": {label: res.docs_out},
    }
    if res.examples:
        stats["malformed_examples"] = res.examples
    return StageResult(outputs=outputs, stats=stats, counts=[counts])


def _run_serial(cfg: DownloadConfig, ctx: StageContext) -> StageResult:
    source = SOURCES[cfg.source]
    columns = part_columns([cfg], mixed=False)
    writer = _PartWriter(ctx.out_dir, cfg.docs_per_part, source.labelled, columns)
    dropped: Counter[str] = Counter()
    examples: list[str] = []
    per_source: Counter[str] = Counter()
    docs_in = docs_out = bytes_in = 0
    bar = Progress(cfg.max_docs, f"download {cfg.source}", enabled=ctx.progress)
    for item in iter_source(cfg, ctx.seed, ctx.progress):
        if cfg.max_docs is not None and docs_out >= cfg.max_docs:
            break
        docs_in += 1
        if isinstance(item, Malformed):
            dropped[item.reason] += 1
            bytes_in += len(item.raw.encode("utf-8", "replace"))
            if len(examples) < MAX_EXAMPLES:
                examples.append(f"{item.where}: {item.detail}")
            writer.reject(item)
            continue
        size = len(item.text.encode("utf-8"))
        bytes_in += size
        docs_out += 1
        per_source[item.source] += 1
        writer.add(item)
        bar.update(1)
    bar.close()
    bad = sum(dropped.values())
    _check(cfg, cfg.max_malformed_fraction, docs_in, bad, examples[0] if examples else None)
    writer.flush()
    writer.flush_rejected()
    counts = DocCounts(docs_in, docs_out, dict(dropped), bytes_in, writer.bytes_out)
    stats: dict[str, Any] = {
        **setting(cfg, "source"),
        "num_parts": writer.num_parts,
        "docs_per_source": dict(sorted(per_source.items())),
    }
    if examples:
        stats["malformed_examples"] = examples
    stats.update(_web_stats([cfg]))
    stats.update(_cache_stats(cfg, ctx))
    return StageResult(outputs=writer.outputs, stats=stats, counts=[counts])


def _run_mix(cfg: DownloadConfig, ctx: StageContext) -> StageResult:
    """download.sources: every entry's passes (stages/download/mix.py) into one set of parts;
    per source, documents before and after the mix."""
    sources = cfg.sources or []
    names = [mix.source_name(s) for s in sources]
    tallies = [mix.SourceTally(s.weight) for s in sources]
    labelled = any(SOURCES[s.source].labelled for s in sources)
    writer = _PartWriter(ctx.out_dir, cfg.docs_per_part, labelled, part_columns(sources, True))
    dropped: Counter[str] = Counter()
    examples: list[str] = []
    docs_in = docs_out = bytes_in = 0
    bar = Progress(None, "download mix", enabled=ctx.progress)
    for m in mix.mixed(sources, names, ctx.seed, ctx.progress, tallies):
        docs_in += 1
        item = m.item
        if isinstance(item, Malformed):
            dropped[item.reason] += 1
            bytes_in += len(item.raw.encode("utf-8", "replace"))
            if len(examples) < MAX_EXAMPLES:
                examples.append(f"{item.where}: {item.detail}")
            writer.reject(item)
            continue
        bytes_in += len(item.text.encode("utf-8"))
        if m.dropped:
            dropped[m.dropped] += 1
            writer.reject(Malformed(item.id, m.dropped, "", item.text))
            continue
        docs_out += 1
        writer.add(item)
        bar.update(1)
    bar.close()
    for src, tally in zip(sources, tallies, strict=True):
        first = examples[0] if examples else None
        read = tally.docs_before + tally.malformed
        _check(src, cfg.max_malformed_fraction, read, tally.malformed, first)
    writer.flush()
    writer.flush_rejected()
    counts = DocCounts(docs_in, docs_out, dict(dropped), bytes_in, writer.bytes_out)
    per = {n: t.stats(n) for n, t in zip(names, tallies, strict=True)}
    stats: dict[str, Any] = {
        "source": "mix",
        "source_key": "download.sources",
        "num_parts": writer.num_parts,
        "docs_per_source": {n: t.docs_after for n, t in zip(names, tallies, strict=True)},
        "mix": per,
        "mix_summary": ", ".join(
            f"{p['shown_as']} ({p['docs_before']:,} -> {p['docs_after']:,} docs)"
            for p in per.values()
        ),
        **setting(RunConfig, "seed", "mix_seed", value=ctx.seed),
    }
    if examples:
        stats["malformed_examples"] = examples
    stats.update(_web_stats(sources))
    outputs = writer.outputs + [mix.write_mix_file(ctx.out_dir, per, ctx.seed)]
    return StageResult(outputs=outputs, stats=stats, counts=[counts])


def _web_stats(sources: list[SourceConfig]) -> dict[str, Any]:
    """Which HTML extractor ran (the text depends on it) and which WARC reader."""
    web = [s for s in sources if s.source in ("warc", "html")]
    if not web:
        return {}
    readers = {warc.resolve_reader(s.warc_reader) for s in web if s.source == "warc"}
    return {
        "html_extractor": sorted({html.resolve(s.html_extractor) for s in web}),
        **({"warc_reader": sorted(readers)} if readers else {}),
    }


def _cache_stats(cfg: DownloadConfig, ctx: StageContext) -> dict[str, Any]:
    """A builtin's cached files: how each was checked; a warning for an unverified one."""
    if cfg.source not in builtin.BUILTINS:
        return {}
    status = builtin.cache_status(cfg.source)
    for name, how in status.items():
        if how.startswith(builtin.UNVERIFIED):
            ctx.log.warning("[download] %s: %s", name, how)
    return {"cache_verification": status}


STAGE = Stage("download", DownloadConfig, run, version="2")
