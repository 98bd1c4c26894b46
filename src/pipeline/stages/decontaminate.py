"""decontaminate: drop (or mark) documents that share a word n-gram with an evaluation text, as
GPT-3 and Llama did (13-grams of lowercased, punctuation-stripped words; pipeline.dedup.decontam).

The driver reads the eval files named in `eval_texts` once into sorted n-gram hash arrays (8
bytes per distinct n-gram; ~2 MB for WikiText-103's test set) in the stage's work folder; one
task per part hashes its documents' n-grams and looks them up. A document is contaminated by an
eval file when they share any n-gram. `mode: drop` writes contaminated documents to rejected/
(reason `contaminated`, the eval files and the first shared n-gram as columns, for `pipeline
inspect`); `mode: mark` keeps every document and adds those two columns. Parts are independent:
the same bytes for any worker count or executor. Runs after quality: see docs/dedup.md.
"""

from __future__ import annotations

import functools
import gzip
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from pipeline.config import bounded, option, setting
from pipeline.dedup import decontam
from pipeline.errors import DataError, RecipeError
from pipeline.io import save_npy
from pipeline.parts import read_table, write_kept_and_rejected
from pipeline.sources.files import expand_paths, read_jsonl, read_parquet
from pipeline.sources.records import Malformed
from pipeline.stage import Stage, StageContext, StageResult
from pipeline.text_files import decode_text

REASON = "contaminated"
WORK_DIR = ".decontam"
BATCH_CHARS = 1 << 20  # characters hashed per numpy batch: ~40 MB of temporaries


@dataclass(frozen=True)
class DecontaminateConfig:
    eval_texts: list[str] = field(
        default_factory=list,
        metadata={
            "doc": "eval files (.txt whole, .jsonl/.parquet `text` per record; globs, folders)",
            "input": True,
        },
    )
    ngram: int = bounded(
        13, ge=1, le=64, doc="words per n-gram (GPT-3, NeMo Curator: 13; datatrove: 12)"
    )
    mode: Literal["drop", "mark"] = option(
        "drop", "drop contaminated documents, or keep all and add `contaminated` columns"
    )
    num_examples: int = bounded(5, ge=0, doc="contaminated documents shown in the report")

    def validate(self, path: str) -> None:
        if not self.eval_texts:
            raise RecipeError(f"{path}.eval_texts", "name at least one evaluation text file")


@dataclass(frozen=True, slots=True)
class EvalFile:
    """One eval file: its path as the recipe named it (or as a glob/folder expanded)."""

    name: str
    path: Path


def eval_files(cfg: DecontaminateConfig) -> list[EvalFile]:
    """The files `eval_texts` names, in recipe then sorted order; an entry naming no file is a
    DataError."""
    out: list[EvalFile] = []
    for entry in cfg.eval_texts:
        found = expand_paths(entry)
        if not found:
            raise DataError(entry, "decontaminate.eval_texts: no such file (or the glob is empty)")
        out += [EvalFile(entry if len(found) == 1 else str(p), p) for p in found]
    names = [e.name for e in out]
    for name in names:
        if names.count(name) > 1:
            raise DataError(name, "decontaminate.eval_texts names this file twice")
    return out


def read_eval(path: Path) -> list[str]:
    """An eval file's texts: a .jsonl(.gz) or .parquet record's `text` each, else the file."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl") or name.endswith(".parquet"):
        reader = read_jsonl if name.endswith(".jsonl") else read_parquet
        texts = []
        for rec in reader([path], "text", None, "eval"):
            if isinstance(rec, Malformed):
                raise DataError(rec.where, f"{rec.detail} (an eval file: fix or remove it)")
            texts.append(rec.text)
        return texts
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except OSError as exc:
        raise DataError(str(path), f"cannot read the eval file ({exc})") from None
    return [decode_text(data, str(path))]


def _batches(texts: list[str]) -> list[tuple[int, int]]:
    """[lo, hi) ranges of about BATCH_CHARS characters."""
    out, lo, size = [], 0, 0
    for i, t in enumerate(texts):
        if i > lo and size + len(t) > BATCH_CHARS:
            out.append((lo, i))
            lo, size = i, 0
        size += len(t)
    if lo < len(texts):
        out.append((lo, len(texts)))
    return out


def _eval_index(texts: list[str], n: int) -> np.ndarray:
    grams = [decontam.text_ngrams(texts[lo:hi], n)[0] for lo, hi in _batches(texts)]
    return decontam.index(np.concatenate([np.zeros(0, np.uint64), *grams]))


def _contamination(texts: list[str], n: int, work: str, num_evals: int) -> list[list[int]]:
    """For each text, the eval files (indices) it shares an n-gram with."""
    union = np.load(Path(work) / "union.npy", mmap_mode="r", allow_pickle=False)
    bits = np.load(Path(work) / "bitmap.npy", allow_pickle=False)
    found: list[list[int]] = [[] for _ in texts]
    for lo, hi in _batches(texts):
        grams, doc = decontam.text_ngrams(texts[lo:hi], n)
        hit = decontam.contains(union, grams, bits)
        if not hit.any():
            continue
        grams, doc = grams[hit], doc[hit]
        for k in range(num_evals):
            ev = np.load(Path(work) / f"eval-{k:05d}.npy", mmap_mode="r", allow_pickle=False)
            for d in np.unique(doc[decontam.contains(ev, grams)]).tolist():
                found[lo + d].append(k)
    return found


def _part(item: tuple[int, str], cfg: DecontaminateConfig, work: str, names: list[str], out: str):
    """One part: find its contaminated documents, write kept (and rejected) rows."""
    index, path = item
    table = read_table(Path(path))
    if "text" not in table.column_names:
        raise DataError(path, f"column 'text' is missing; columns: {table.column_names}")
    if table.column("text").null_count:
        raise DataError(path, f"{table.column('text').null_count} rows have a null text")
    ours = [c for c in ("contaminated", "matched_ngram") if c in table.column_names]
    table = table.drop_columns(ours)  # a re-run on marked output: ours replace the old ones
    texts = table.column("text").to_pylist()
    found = _contamination(texts, cfg.ngram, work, len(names))
    union = np.load(Path(work) / "union.npy", mmap_mode="r", allow_pickle=False)
    hits = [d for d, ks in enumerate(found) if ks]
    by_eval = [[names[k] for k in ks] for ks in found]
    shared: list[str | None] = [None] * len(texts)
    for d in hits:
        shared[d] = decontam.first_shared(texts[d], cfg.ngram, union)
    per_eval = {name: 0 for name in names}
    for d in hits:
        for name in by_eval[d]:
            per_eval[name] += 1
    examples = [
        {"id": table.column("id")[d].as_py(), "eval": by_eval[d][0], "ngram": shared[d]}
        for d in hits[: cfg.num_examples]
    ]
    cols = {
        "contaminated": pa.array(by_eval, pa.list_(pa.string())),
        "matched_ngram": pa.array(shared, pa.string()),
    }
    keep = np.ones(len(texts), bool)
    if cfg.mode == "drop":
        keep[hits] = False
        sel = np.flatnonzero(~keep)
        extra = {k: v.take(pa.array(sel, pa.int64())) for k, v in cols.items()}
        outputs, counts = write_kept_and_rejected(
            Path(out), index, table, keep, [[REASON]] * len(hits), **extra
        )
    else:
        for name, col in cols.items():
            table = table.append_column(name, col)
        outputs, counts = write_kept_and_rejected(Path(out), index, table, keep, [])
    counts.dropped = {REASON: 0, **counts.dropped} if cfg.mode == "drop" else counts.dropped
    return {
        "outputs": outputs,
        "counts": counts,
        "per_eval": per_eval,
        "hits": len(hits),
        "examples": examples,
    }


def run(cfg: DecontaminateConfig, ctx: StageContext) -> StageResult:
    if not ctx.input_parts:
        raise DataError(str(ctx.run_dir), "decontaminate needs an upstream stage with documents")
    evals = eval_files(cfg)
    work = ctx.out_dir / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    names, sizes, records = [], [], []
    indexes = []
    for k, ev in enumerate(evals):  # the driver holds every file's distinct n-grams: 8 B each
        texts = read_eval(ev.path)
        idx = _eval_index(texts, cfg.ngram)
        save_npy(work / f"eval-{k:05d}.npy", idx)
        names.append(ev.name)
        sizes.append(len(idx))
        records.append(len(texts))
        indexes.append(idx)
    union = decontam.index(np.concatenate([np.zeros(0, np.uint64), *indexes]))
    save_npy(work / "union.npy", union)
    save_npy(work / "bitmap.npy", decontam.bitmap(union))
    del indexes, union
    fn = functools.partial(_part, cfg=cfg, work=str(work), names=names, out=str(ctx.out_dir))
    items = [(i, str(p)) for i, p in enumerate(ctx.input_parts)]
    results = ctx.executor.map(fn, items, desc="decontaminate")
    shutil.rmtree(work, ignore_errors=True)
    per_eval = {name: sum(r["per_eval"][name] for r in results) for name in names}
    stats: dict[str, Any] = {
        **setting(cfg, "ngram"),
        **setting(cfg, "mode"),
        "contaminated_docs": sum(r["hits"] for r in results),
        "eval_files": [
            {"path": n, "records": r, "ngrams": s, "contaminated_docs": per_eval[n]}
            for n, r, s in zip(names, records, sizes, strict=True)
        ],
        "contaminated_docs_by_eval": per_eval,
        "examples": [e for r in results for e in r["examples"]][: cfg.num_examples],
    }
    outputs = [o for r in results for o in r["outputs"]]
    return StageResult(outputs=outputs, stats=stats, counts=[r["counts"] for r in results])


STAGE = Stage("decontaminate", DecontaminateConfig, run, version="2", needs=("download",))
