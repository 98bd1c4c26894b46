"""Mosaic MDS (mosaicml-streaming, llm-foundry): per split a folder `<split>/` of
`shard.NNNNN.mds` files and an `index.json`, read by `streaming.StreamingDataset(local=OUT/train)`
and by llm-foundry's text dataloader.

One sample per packed row: `tokens` (llm-foundry's column name; `ndarray:int32:<seq_len>`, the
encoding llm-foundry's own converter writes, so embeddings take it as is) and `segment_ids`
(`ndarray:<shard dtype>:<seq_len>`). Written by our own code rather than streaming's MDSWriter:
MDSWriter encodes one sample at a time in Python, here a block of rows is one array operation,
and writing needs no streaming install. The bytes are MDSWriter's own, for the same columns and
size limit (the test compares both): an MDS shard is

    uint32 num_samples  uint32 offsets[num_samples + 1] (from the file start)  config JSON
    samples (fixed-size columns only: each sample is its columns' bytes in column-name order)

and a new shard starts where MDSWriter's would (4 + 4 + len(config) + Σ (sample + 4) bytes must
stay within size_limit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.exporters.common import Split, write_bytes

SIZE_LIMIT = 1 << 26  # bytes per MDS shard: MDSWriter's default (64 MiB)
TOKEN_DTYPE = np.dtype(np.int32)  # llm-foundry: `tokens` as ndarray:int32
INDEX_NAME = "index.json"


def columns(split: Split, seg_dtype: np.dtype) -> dict[str, tuple[str, np.dtype]]:
    """column name -> (MDS encoding, dtype), in MDSWriter's (sorted) order."""
    length = split.seq_len
    cols = {
        "segment_ids": (f"ndarray:{seg_dtype.name}:{length}", seg_dtype),
        "tokens": (f"ndarray:{TOKEN_DTYPE.name}:{length}", TOKEN_DTYPE),
    }
    return dict(sorted(cols.items()))


def shard_config(cols: dict[str, tuple[str, np.dtype]], seq_len: int) -> dict[str, Any]:
    """MDSWriter.get_config() for these columns, no compression, no hashes."""
    return {
        "version": 2,
        "format": "mds",
        "compression": None,
        "hashes": [],
        "size_limit": SIZE_LIMIT,
        "column_names": list(cols),
        "column_encodings": [enc for enc, _ in cols.values()],
        "column_sizes": [seq_len * dt.itemsize for _, dt in cols.values()],
    }


def samples_per_shard(sample_bytes: int, config_bytes: int) -> int:
    """Rows MDSWriter puts in one shard before its size limit (at least one)."""
    return max((SIZE_LIMIT - 8 - config_bytes) // (sample_bytes + 4), 1)


def _fill(buf: np.ndarray, at: int, arrays: dict[str, np.ndarray], cols) -> None:
    """Rows of `arrays` into buf[at:] (uint8 [rows, sample_bytes]): each column cast straight
    into its byte range (no temporary per column)."""
    n, lo = len(next(iter(arrays.values()))), 0
    for name, (_, dt) in cols.items():
        hi = lo + arrays[name].shape[1] * dt.itemsize
        np.copyto(buf[at : at + n, lo:hi].view(dt), arrays[name], casting="unsafe")
        lo = hi


def _write_shard(path: Path, rows: np.ndarray, config: bytes) -> dict[str, Any]:
    n, size = rows.shape
    header = 4 + 4 * (n + 1) + len(config)
    offsets = header + size * np.arange(n + 1, dtype=np.int64)
    with open(path, "wb") as f:
        write_bytes(f, np.array([n], np.uint32))
        write_bytes(f, offsets.astype(np.uint32))
        f.write(config)
        write_bytes(f, rows)
    return {"basename": path.name, "bytes": int(offsets[-1]), "hashes": {}}


def write_split(split: Split, out: Path, progress: Callable[[int], None]) -> int:
    """`<out>/<split>/` with MDS shards and index.json; returns the number of samples."""
    folder = out / split.name
    folder.mkdir()
    seg_dtype = np.dtype(split.meta.get("field_dtypes", {}).get("segment_ids") or "uint16")
    cols = columns(split, seg_dtype)
    cfg = shard_config(cols, split.seq_len)
    config = json.dumps(cfg, sort_keys=True).encode("utf-8")
    per_shard = samples_per_shard(sum(cfg["column_sizes"]), len(config))
    shards: list[dict[str, Any]] = []
    sample_bytes = sum(cfg["column_sizes"])
    buf = np.empty((min(per_shard, split.num_rows), sample_bytes), np.uint8)  # one shard's rows
    fill = total = 0

    def flush() -> None:
        info = _write_shard(folder / f"shard.{len(shards):05d}.mds", buf[:fill], config)
        shards.append({"samples": fill, "raw_data": info, "zip_data": None, **cfg})

    for ids, seg in split.blocks():
        lo = 0
        while lo < len(ids):
            take = min(len(ids) - lo, len(buf) - fill)
            arrays = {"tokens": ids[lo : lo + take], "segment_ids": seg[lo : lo + take]}
            _fill(buf, fill, arrays, cols)
            fill, lo = fill + take, lo + take
            if fill == len(buf):
                flush()
                fill = 0
        total += len(ids)
        progress(len(ids))
    if fill:
        flush()
    index = {"shards": shards, "version": 2}
    (folder / INDEX_NAME).write_text(json.dumps(index, sort_keys=True), encoding="utf-8")
    return total


def write(splits: list[Split], out: Path, progress: Callable[[int], None]) -> dict[str, int]:
    return {s.name: write_split(s, out, progress) for s in splits}
