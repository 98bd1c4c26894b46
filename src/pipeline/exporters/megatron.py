"""Megatron-LM / NeMo indexed dataset: `<split>.bin` (the tokens) + `<split>.idx` (the index), the
MMIDIDX format megatron.core.datasets.indexed_dataset.IndexedDataset reads (`--data-path` /
`--train-data-path OUT/train --valid-data-path OUT/val`).

One sequence per segment of a packed row (a document, or a piece of one the pack stage cut at
seq_len), padding dropped; each sequence is its own document (document_indices 0..n), as
Megatron's preprocess_data.py writes unsplit documents. Megatron's GPTDataset re-packs sequences
into samples of its own --seq-length. The .idx layout (little-endian):

    b"MMIDIDX\\x00\\x00"  uint64 version=1  uint8 dtype code  uint64 sequence_count
    uint64 document_count  int32 lengths[sequence_count]  int64 byte pointers[sequence_count]
    int64 document_indices[document_count]
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipeline.errors import DataError
from pipeline.exporters.common import Split, segments, write_bytes

INDEX_HEADER = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "uint16": 8}


def bin_dtype(split: Split) -> np.dtype:
    """uint16 when the vocab fits, else int32 (Megatron has no uint32 code)."""
    dtype = split.token_dtype()
    if dtype == np.uint16:
        return dtype
    vocab = split.meta.get("vocab_size")
    if vocab is not None and int(vocab) > 2**31:
        raise DataError(str(split.folder), f"vocab_size {vocab} does not fit Megatron's int32")
    return np.dtype(np.int32)


def write_index(path: Path, dtype: np.dtype, lengths: np.ndarray) -> None:
    """The .idx of sequences of `lengths` tokens, stored back to back, one document each."""
    lengths = np.asarray(lengths, np.int64)
    if len(lengths) and int(lengths.max()) >= 2**31:
        raise DataError(str(path), "a sequence longer than 2^31 tokens does not fit int32")
    pointers = np.zeros(len(lengths), np.int64)
    np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    docs = np.arange(len(lengths) + 1, dtype=np.int64)
    with open(path, "wb") as f:
        f.write(INDEX_HEADER)
        f.write(struct.pack("<Q", INDEX_VERSION))
        f.write(struct.pack("<B", DTYPE_CODES[dtype.name]))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(docs)))
        write_bytes(f, lengths.astype(np.int32))
        write_bytes(f, pointers)
        write_bytes(f, docs)


def write_split(split: Split, out: Path, progress: Callable[[int], None]) -> int:
    """`<out>/<split>.bin` and `.idx`; returns the number of sequences."""
    dtype = bin_dtype(split)
    lengths = []
    with open(out / f"{split.name}.bin", "wb") as f:
        for ids, seg in split.blocks():
            tokens, lens = segments(ids, seg)
            write_bytes(f, tokens.astype(dtype, copy=False))
            lengths.append(lens)
            progress(len(ids))
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    write_index(out / f"{split.name}.idx", dtype, lengths)
    return len(lengths)


def write(splits: list[Split], out: Path, progress: Callable[[int], None]) -> dict[str, int]:
    return {s.name: write_split(s, out, progress) for s in splits}
