"""download.sources: a weighted mix of sources, upsampled by repetition or downsampled.

A source of weight w is read floor(w) times in full ("passes"), then once more keeping each
document with probability w - floor(w): weight 3 is three passes ("wiki × 3"), 2.5 two passes
and a seeded half, 0.3 one seeded 30% pass. The keep draw of a document is a keyed hash of (the
stage seed, the source name, its position in the source): streaming, O(1) memory, the same for
any worker count. Sources come in recipe order, each source's passes one after the other.

Pass p > 0 of a document is a copy: id `<name>/<id>@<p>` (pass 0: `<name>/<id>`) and column
`mix_copy` = p. Dedup treats each pass as its own corpus (pipeline.stages.dedup salts the keys
of copies with `mix_copy`), so exact dedup does not delete the copies the mix asked for, while
duplicates inside a source are still removed from every pass (docs/sources.md).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.io import atomic_write_json
from pipeline.sources import SOURCES
from pipeline.sources.files import paths_and_label
from pipeline.sources.records import Malformed, Record

MIX_FILE = "mix.json"  # the mix as realised: read by shard (its metadata.json records it)
COPY_COLUMN = "mix_copy"  # int32: 0 for a document's first pass, p for its p-th repetition
_M64 = (1 << 64) - 1


def source_name(src: Any) -> str:
    """A mix entry's name: its `name`, else a builtin's name, else its files' stem."""
    if src.name:
        return src.name
    if SOURCES[src.source].needs_path:
        return paths_and_label(src)[1]
    if src.source == "hf" and src.hf_path:
        return Path(src.hf_path).name or src.source
    return src.source


def _mix64(x: int) -> int:
    """splitmix64's finaliser on one Python int (the scalar form of pipeline.permute)."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def source_key(seed: int, name: str) -> int:
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return _mix64((seed & _M64) ^ int.from_bytes(digest, "little"))


def keep_draw(key: int, position: int) -> float:
    """Uniform [0, 1) draw of the document at `position` (0-based, in source order)."""
    return (_mix64(key ^ position) >> 11) / float(1 << 53)


@dataclass(frozen=True)
class Plan:
    full_passes: int  # passes that keep every document
    fraction: float  # keep probability in the one sampled pass after them (0: none)

    @property
    def num_passes(self) -> int:
        return self.full_passes + (self.fraction > 0)


def plan(weight: float) -> Plan:
    full = math.floor(weight)
    return Plan(full, round(weight - full, 12))


def label(name: str, weight: float) -> str:
    """How the report shows an entry: `wiki × 3`, `web × 0.5`."""
    return f"{name} × {weight:g}"


@dataclass
class SourceTally:
    """One mix entry's counts: read in its first pass, written over all passes."""

    weight: float
    docs_before: int = 0  # valid documents in the source (its first pass)
    docs_after: int = 0  # documents written over all passes
    docs_not_sampled: int = 0  # read in the sampled pass and not kept
    malformed: int = 0

    def stats(self, name: str) -> dict[str, Any]:
        p = plan(self.weight)
        return {
            "weight": self.weight,
            "shown_as": label(name, self.weight),
            "full_passes": p.full_passes,
            "sampled_pass_fraction": p.fraction,
            "docs_before": self.docs_before,
            "docs_after": self.docs_after,
            "realised_weight": round(self.docs_after / self.docs_before, 4)
            if self.docs_before
            else 0.0,
        }


@dataclass
class MixItem:
    """What the mix yields: a document to write (with its pass) or a record to drop."""

    item: Record | Malformed
    name: str
    copy: int  # the pass
    dropped: str | None = None  # a reason when the document is read but not kept


def mixed(
    sources: list[Any], names: list[str], seed: int, progress: bool, tallies: list[SourceTally]
) -> Iterator[MixItem]:
    """Every source's passes in order. Malformed records are yielded in the first pass only
    (the same records come again in later passes); records read past a source's max_docs are
    not read. A document's copies get ids `<name>/<id>@<pass>` and `mix_copy` = pass."""
    for src, name, tally in zip(sources, names, tallies, strict=True):
        p = plan(src.weight)
        key = source_key(seed, name)
        for pass_ in range(p.num_passes):
            sampled = pass_ == p.full_passes
            position = 0
            for item in SOURCES[src.source].read(src, seed, progress):
                if src.max_docs is not None and position >= src.max_docs:
                    break
                if isinstance(item, Malformed):
                    if pass_ == 0:
                        tally.malformed += 1
                        yield MixItem(item, name, 0)
                    continue
                if pass_ == 0:
                    tally.docs_before += 1
                suffix = f"@{pass_}" if pass_ else ""
                doc = Record(
                    f"{name}/{item.id}{suffix}",
                    item.text,
                    name,
                    item.label,
                    {**(item.columns or {}), COPY_COLUMN: pass_},
                )
                keep = not sampled or keep_draw(key, position) < p.fraction
                position += 1
                if keep:
                    tally.docs_after += 1
                    yield MixItem(doc, name, pass_)
                else:
                    tally.docs_not_sampled += 1
                    yield MixItem(doc, name, pass_, dropped="mix_not_sampled")


def write_mix_file(out_dir: Path, per_source: dict[str, dict[str, Any]], seed: int) -> str:
    """`mix.json` in the stage folder: {seed, sources: {name: weight, counts...}}; its name."""
    atomic_write_json(Path(out_dir) / MIX_FILE, {"seed": seed, "sources": per_source})
    return MIX_FILE
