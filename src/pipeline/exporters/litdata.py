"""litdata (Lightning; litgpt's pretraining data): per split a folder `<split>/` of
`chunk-0-N.bin` files and an `index.json`, litdata's optimized format for its `TokensLoader`:
`litdata.StreamingDataset(OUT/train, item_loader=TokensLoader(block_size=seq_len))` yields the
packed rows as int tensors of seq_len tokens (litgpt: `--data LitData --data.data_path OUT`, whose
blocks are max_seq_length + 1 tokens: train with max_seq_length = seq_len - 1).

One item per packed row (input_ids, padding kept: TokensLoader cuts blocks from each chunk's
token stream, so whole rows per chunk give back exactly our rows); segment_ids are not part of
this format. A chunk is what litdata's BinaryWriter writes for TokensLoader:

    uint32 num_items  uint32 offsets[num_items + 1] (from the file start)  tokens (no header)

and index.json lists each chunk (`chunk_bytes` file size, `chunk_size` items, `dim` tokens) with
the writer config (`data_format: no_header_numpy:<litdata dtype code>`). Written by our code, so
exporting needs no litdata install (and no network: litdata reads a local folder offline).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.exporters.common import Split, write_bytes

CHUNK_BYTES = 1 << 26  # target bytes of token data per chunk (64 MiB)
INDEX_NAME = "index.json"
NUMPY_DTYPE_CODES = {"uint16": 5, "uint32": 6}  # litdata.constants._NUMPY_DTYPES_MAPPING
LEAF_SPEC = '[1, {"type": null, "context": null, "children_spec": []}]'  # one array per item


def config(dtype: np.dtype) -> dict[str, Any]:
    """BinaryWriter.get_config() for a TokensLoader dataset of uncompressed numpy items."""
    return {
        "chunk_bytes": CHUNK_BYTES,
        "chunk_size": None,
        "compression": None,
        "compression_batch_size": None,
        "compression_level": None,
        "data_format": [f"no_header_numpy:{NUMPY_DTYPE_CODES[dtype.name]}"],
        "data_spec": LEAF_SPEC,
        "encryption": None,
        "ipc_compression": None,
        "item_loader": "TokensLoader",
        "types": "json",
    }


def _write_chunk(path: Path, rows: np.ndarray) -> dict[str, Any]:
    n, length = rows.shape
    header = 4 * (n + 2)
    offsets = header + rows.dtype.itemsize * length * np.arange(n + 1, dtype=np.int64)
    with open(path, "wb") as f:
        write_bytes(f, np.array([n], np.uint32))
        write_bytes(f, offsets.astype(np.uint32))
        write_bytes(f, rows)
    return {"chunk_bytes": int(offsets[-1]), "chunk_size": n, "dim": n * length,
            "filename": path.name}  # fmt: skip


def write_split(split: Split, out: Path, progress: Callable[[int], None]) -> int:
    """`<out>/<split>/` with chunks and index.json; returns the number of rows."""
    folder = out / split.name
    folder.mkdir()
    dtype = split.token_dtype()
    per_chunk = max(CHUNK_BYTES // (split.seq_len * dtype.itemsize), 1)
    chunks: list[dict[str, Any]] = []
    pending: list[np.ndarray] = []
    total = 0
    for ids, _ in split.blocks():
        pending.append(np.ascontiguousarray(ids, dtype=dtype))
        total += len(ids)
        if sum(len(p) for p in pending) >= per_chunk:
            rows = np.concatenate(pending)
            full = len(rows) // per_chunk * per_chunk
            for lo in range(0, full, per_chunk):
                chunks.append(_write_chunk(folder / f"chunk-0-{len(chunks)}.bin",
                                           rows[lo : lo + per_chunk]))  # fmt: skip
            pending = [rows[full:]] if full < len(rows) else []
        progress(len(ids))
    if pending and sum(len(p) for p in pending):
        chunks.append(_write_chunk(folder / f"chunk-0-{len(chunks)}.bin", np.concatenate(pending)))
    index = {"chunks": chunks, "config": config(dtype), "updated_at": "0"}
    (folder / INDEX_NAME).write_text(json.dumps(index, sort_keys=True), encoding="utf-8")
    return total


def write(splits: list[Split], out: Path, progress: Callable[[int], None]) -> dict[str, int]:
    return {s.name: write_split(s, out, progress) for s in splits}
