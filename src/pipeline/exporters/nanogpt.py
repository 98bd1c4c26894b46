"""nanoGPT: `train.bin` / `val.bin`, one flat memmap of token ids each (uint16; uint32 when the
vocab exceeds 65,536 ids), documents separated by eos, and `meta.json` (vocab_size, dtype, eos /
pad ids, tokens per split). nanoGPT's get_batch reads it as
`np.memmap(OUT / "train.bin", dtype=np.uint16, mode="r")` and draws its own windows.

The stream is the shards' segments in order, padding dropped. Each document already ends with
eos (the tokenize stage appends it); a segment that does not (a piece of a document the pack
stage cut at seq_len) gets one, so no two pieces run together. JSON, not nanoGPT's meta.pkl:
nothing here is ever a pickle.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipeline.exporters.common import Split, segments, write_bytes

META_NAME = "meta.json"


def with_eos(tokens: np.ndarray, lengths: np.ndarray, eos_id: int | None) -> np.ndarray:
    """`tokens` with eos inserted after each segment whose last token is not eos."""
    if eos_id is None or not len(lengths):
        return tokens
    ends = np.cumsum(lengths)
    missing = ends[tokens[ends - 1] != eos_id]
    return np.insert(tokens, missing, eos_id) if len(missing) else tokens


def write_split(split: Split, out: Path, progress: Callable[[int], None]) -> int:
    """`<out>/<split>.bin`; returns the number of tokens."""
    dtype = split.token_dtype()
    eos = split.meta.get("eos_id")
    n = 0
    with open(out / f"{split.name}.bin", "wb") as f:
        for ids, seg in split.blocks():
            tokens = with_eos(*segments(ids, seg), None if eos is None else int(eos))
            write_bytes(f, tokens.astype(dtype, copy=False))
            n += len(tokens)
            progress(len(ids))
    return n


def write(splits: list[Split], out: Path, progress: Callable[[int], None]) -> dict[str, int]:
    tokens = {s.name: write_split(s, out, progress) for s in splits}
    first = splits[0].meta
    meta = {
        "vocab_size": first.get("vocab_size"),
        "dtype": splits[0].token_dtype().name,
        "eos_id": first.get("eos_id"),
        "pad_id": first.get("pad_id"),
        "num_tokens": tokens,
        "tokenizer_sha256": first.get("tokenizer_sha256"),
        "source_seq_len": splits[0].seq_len,
    }
    (out / META_NAME).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return tokens
