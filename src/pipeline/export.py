"""`pipeline export`: a stage's kept records, or the token shards, as a Hugging Face `datasets`
folder (`load_from_disk`), JSONL or Parquet files (`load_dataset(OUT)` reads both).

Documents keep every column the stages added (text, source, quality, cluster, ...); tokenize
adds `input_ids` per document (EOS included), pack and `--shards` give one row per sequence of
`input_ids`/`segment_ids`. Token columns are int32, as `datasets` stores tokenizer output.
Shards export as splits `train` and `validation` (shard/eval: HF's name for a held-out split).
Everything is written into a unique temp folder beside OUT and renamed into place under a lock
(pipeline.publish): OUT is never partial, never the run folder, never inside or around it.
Rejected documents are not exported (`pipeline inspect` shows them). `--shards --to megatron|mds|
nanogpt|litdata` writes a trainer's own format instead (pipeline.exporters), through the same
temp folder, lock and rename.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import exporters
from pipeline.errors import DataError, PipelineError
from pipeline.io import PARQUET_EXPORT_KW
from pipeline.loader.schema import check_metadata
from pipeline.manifest import Manifest
from pipeline.parts import group_parts, numeric_column, part_name, read_table
from pipeline.progress import Progress
from pipeline.publish import check_target, staged_output
from pipeline.shards import METADATA_NAME, npz_member
from pipeline.text_files import read_json_file

FORMATS = ("hf", "jsonl", "parquet", *exporters.TRAINER_FORMATS)
SHARD_SPLITS = {"train": "train", "eval": "validation"}  # shard/<folder> -> split name
ROWS_PER_BATCH = 4096  # sequences converted to Arrow at a time (~32 MB at seq_len 2048)
TOKEN_TYPE = pa.int32()  # what datasets uses for input_ids; torch embeddings take int32


@dataclass
class Exported:
    out: Path
    fmt: str
    rows: dict[str, int]  # split -> rows written ("train" alone for documents)
    shards: bool = False

    def summary(self) -> str:
        counts = ", ".join(f"{split} {n:,}" for split, n in self.rows.items())
        if not self.shards:
            counts = f"{sum(self.rows.values()):,}"
        how = {
            "hf": f"datasets.load_from_disk({str(self.out)!r})",
            "jsonl": f"datasets.load_dataset({str(self.out)!r})",
            "parquet": f"datasets.load_dataset({str(self.out)!r})",
        }.get(self.fmt) or exporters.READERS[self.fmt].replace("OUT", str(self.out))
        unit = exporters.UNITS.get(self.fmt, "rows")
        return f"{self.out}: {counts} {unit} ({self.fmt}); load with {how}"


# ---------------------------------------------------------------- readers: Arrow tables


def _token_list(values: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """list<int32> array: row i holds the next lengths[i] values."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.int32)))


def _sequences(ids: np.ndarray, seg: np.ndarray) -> Iterator[pa.Table]:
    """[n, seq_len] arrays -> tables of fixed-size lists, ROWS_PER_BATCH rows at a time."""
    n, seq_len = ids.shape
    for lo in range(0, n, ROWS_PER_BATCH):
        hi = min(lo + ROWS_PER_BATCH, n)
        cols = {}
        for name, arr in (("input_ids", ids), ("segment_ids", seg)):
            flat = pa.array(np.ascontiguousarray(arr[lo:hi], dtype=np.int32).reshape(-1))
            cols[name] = pa.FixedSizeListArray.from_arrays(flat, seq_len)
        yield pa.table(cols)


RERUN = "re-run the stage (`pipeline data`)"


def _read_part(path: Path) -> pa.Table:
    try:
        return read_table(path)
    except (OSError, pa.ArrowException) as exc:  # pyarrow raises several types for a damaged file
        raise DataError(str(path), f"cannot read Parquet part ({exc}); {RERUN}") from None


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:  # truncated, not .npy, pickled objects
        raise DataError(str(path), f"cannot read .npy part ({exc}); {RERUN}") from None


def _doc_tables(parts: list[Path]) -> Iterator[pa.Table]:
    for part in parts:
        yield _read_part(part)


def _tokenize_tables(parts: list[Path]) -> Iterator[pa.Table]:
    for group in group_parts(parts, {"tokens": "tokens.npy", "docs": "docs.parquet"}, "tokenize"):
        docs = _read_part(group["docs"])
        tokens = _load_npy(group["tokens"])
        if "num_tokens" not in docs.column_names:
            raise DataError(str(group["docs"]), f"no 'num_tokens' column; {RERUN}")
        lengths = numeric_column(docs.column("num_tokens"), np.int64)
        if tokens.ndim != 1 or int(lengths.sum()) != len(tokens):
            raise DataError(str(group["tokens"]), "token count differs from its docs.parquet")
        yield docs.append_column("input_ids", _token_list(np.asarray(tokens), lengths))


def _pack_tables(parts: list[Path]) -> Iterator[pa.Table]:
    kinds = {"input_ids": "input_ids.npy", "segment_ids": "segment_ids.npy", "seqs": "seqs.parquet"}
    for group in group_parts(parts, kinds, "pack"):
        ids, seg = _load_npy(group["input_ids"]), _load_npy(group["segment_ids"])
        seqs = _read_part(group["seqs"])
        if ids.ndim != 2 or ids.shape != seg.shape or len(ids) != seqs.num_rows:
            raise DataError(
                str(group["input_ids"]),
                f"input_ids {list(ids.shape)} / segment_ids {list(seg.shape)} / "
                f"{seqs.num_rows} rows of seqs.parquet, expected [n, seq_len] twice and n; {RERUN}",
            )
        start = 0
        for table in _sequences(ids, seg):
            side = seqs.slice(start, table.num_rows)
            start += table.num_rows
            for name in side.column_names:
                table = table.append_column(name, side.column(name))
            yield table


def _shard_tables(folder: Path) -> Iterator[pa.Table]:
    """One split of shard/: its .npz files in metadata order, as sequence tables."""
    meta_path = folder / METADATA_NAME
    meta = check_metadata(read_json_file(meta_path, METADATA_NAME), meta_path)  # the loader's
    for entry in meta["shards"]:  # plain names inside the folder
        path = folder / entry["file"]
        ids, seg = npz_member(path, "input_ids"), npz_member(path, "segment_ids")
        if ids.ndim != 2 or ids.shape != seg.shape or ids.shape[1] != meta["seq_len"]:
            raise DataError(
                str(path),
                f"input_ids {list(ids.shape)} / segment_ids {list(seg.shape)}, expected "
                f"[n, {meta['seq_len']}] (seq_len in metadata.json); re-run the shard stage",
            )
        if len(ids) != int(entry["num_samples"]):  # what the loader refuses too
            raise DataError(
                str(path),
                f"has {len(ids)} rows, metadata.json says {entry['num_samples']}: the folder "
                "does not match its metadata; re-run the shard stage",
            )
        yield from _sequences(ids, seg)


def stage_tables(run_dir: Path, stage: str) -> Iterator[pa.Table]:
    """A finished stage's kept records as Arrow tables, in part order."""
    manifest = Manifest.load(run_dir)
    if stage not in manifest.stages:
        done = ", ".join(manifest.stages) or "none"
        raise PipelineError(f"{run_dir}: stage {stage!r} has no output (finished stages: {done})")
    parts = manifest.parts(stage)
    missing = [p for p in parts if not p.is_file()]
    if missing:
        raise DataError(str(missing[0]), "is missing; re-run the stage (`pipeline data`)")
    if stage == "shard":
        raise PipelineError("shard writes token shards: export them with --shards")
    names = {p.name for p in parts}
    if any(n.endswith(".tokens.npy") for n in names):
        return _tokenize_tables(parts)
    if any(n.endswith(".input_ids.npy") for n in names):
        return _pack_tables(parts)
    return _doc_tables([p for p in parts if p.suffix == ".parquet"])


def shard_splits(run_dir: Path) -> dict[str, Iterator[pa.Table]]:
    """split name -> tables, for each of shard/train and shard/eval that exists."""
    root = Path(run_dir) / "shard"
    out = {
        split: _shard_tables(root / folder)
        for folder, split in SHARD_SPLITS.items()
        if (root / folder / METADATA_NAME).is_file()
    }
    if not out:
        raise PipelineError(f"{root}: no shards (metadata.json); run the shard stage first")
    return out


# ---------------------------------------------------------------- writers


def _write_parquet(tables: Iterator[pa.Table], folder: Path, bar: Progress) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    rows = 0
    for i, table in enumerate(tables):
        pq.write_table(table, folder / part_name(i), **PARQUET_EXPORT_KW)
        rows += table.num_rows
        bar.update(table.num_rows)
    return rows


def _write_jsonl(tables: Iterator[pa.Table], folder: Path, bar: Progress) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    rows = 0
    for i, table in enumerate(tables):
        with open(folder / part_name(i, ".jsonl"), "w", encoding="utf-8") as f:
            for row in table.to_pylist():
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        rows += table.num_rows
        bar.update(table.num_rows)
    return rows


def _write_arrow(tables: Iterator[pa.Table], path: Path, bar: Progress) -> int:
    """All tables into one Arrow stream file (what datasets memory-maps), one batch at a time."""
    rows = 0
    writer = schema = None
    try:
        for table in tables:
            if writer is None:
                schema = table.schema
                writer = pa.ipc.new_stream(str(path), schema)
            writer.write_table(table.cast(schema))
            rows += table.num_rows
            bar.update(table.num_rows)
    finally:
        if writer is not None:
            writer.close()
    return rows


def _write_hf(splits: dict[str, Iterator[pa.Table]], out: Path, bar: Progress, dict_: bool) -> dict:
    try:
        import datasets
    except ImportError:
        raise PipelineError(
            "--to hf needs the `datasets` package (the `hf` extra): pip install -e '.[hf]'"
        ) from None

    if not bar.enabled:
        datasets.disable_progress_bars()
    # scratch Arrow files beside `out`, inside the export's work folder (removed with it)
    scratch = out.parent / f".{out.name}.arrow-tmp"
    scratch.mkdir()
    rows, parts = {}, {}
    for split, tables in splits.items():
        rows[split] = _write_arrow(tables, scratch / f"{split}.arrow", bar)
        if rows[split]:
            parts[split] = datasets.Dataset.from_file(str(scratch / f"{split}.arrow"))
    if not parts:
        raise PipelineError("nothing to export: the stage kept no records")
    if dict_:
        datasets.DatasetDict(parts).save_to_disk(str(out))
    else:
        next(iter(parts.values())).save_to_disk(str(out))
    del parts  # datasets maps the scratch files: drop the maps before they are removed
    return rows


def _write(splits: dict[str, Iterator[pa.Table]], fmt: str, out: Path, shards: bool, bar) -> dict:
    if fmt == "hf":
        return _write_hf(splits, out, bar, dict_=shards)
    writer = _write_parquet if fmt == "parquet" else _write_jsonl
    # documents: files at the top (load_dataset calls them "train"); shards: one folder a split
    return {s: writer(t, out / s if shards else out, bar) for s, t in splits.items()}


def export(
    run_dir: Path,
    out: Path,
    fmt: str,
    stage: str | None = None,
    shards: bool = False,
    force: bool = False,
    progress: bool = True,
) -> Exported:
    """Export a stage's kept records (or, with `shards`, shard/train and shard/eval) to `out`."""
    run_dir, out = Path(run_dir), Path(out)
    if fmt not in FORMATS:
        raise PipelineError(f"--to: got {fmt!r}, expected one of {', '.join(FORMATS)}")
    if fmt in exporters.TRAINER_FORMATS and not shards:
        raise PipelineError(f"--to {fmt} writes the token shards for a trainer: add --shards")
    check_target(run_dir, out, force)
    if shards:
        if stage not in (None, "shard"):
            raise PipelineError(f"--shards exports the shard stage's output, not {stage!r}")
        splits = shard_splits(run_dir)
    elif stage is None:
        raise PipelineError("give --stage STAGE (documents of that stage) or --shards")
    else:
        splits = {"train": stage_tables(run_dir, stage)}
    bar = Progress(None, f"export {fmt}", enabled=progress, unit="rows")
    try:
        with staged_output(run_dir, out, force) as tmp:
            if fmt != "hf":
                tmp.mkdir()
            if fmt in exporters.TRAINER_FORMATS:
                rows = exporters.write(fmt, run_dir, tmp, bar.update)
            else:
                rows = _write(splits, fmt, tmp, shards, bar)
    finally:
        bar.close()
    return Exported(out, fmt, rows, shards)
