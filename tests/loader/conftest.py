"""Small shard folders written like the shard stage writes them (metadata.json + .npz)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.shards import save_npz


def sample_rows(first: int, n: int, seq_len: int) -> dict[str, np.ndarray]:
    """Rows for global samples first..first+n-1: input_ids[g, 0] = g (identifies the sample),
    then g + j; segment_ids: documents of g % 3 + 2 tokens, then padding (0) in the last two."""
    g = np.arange(first, first + n, dtype=np.int64)[:, None]
    j = np.arange(seq_len)[None, :]
    ids = ((g + j) % 65536).astype(np.uint16)
    seg = (j // (g % 3 + 2) + 1).astype(np.uint16)
    seg[:, max(seq_len - 2, 1) :] = 0
    return {"input_ids": ids, "segment_ids": seg}


def write_shards(
    folder: Path,
    sizes: list[int],
    seq_len: int = 8,
    compressed: bool = False,
    pre_shuffled: bool = False,
) -> Path:
    """Shards of `sizes` samples under `folder`, sample ids 0..N-1 in order, + metadata.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shards, first = [], 0
    for i, n in enumerate(sizes):
        path = folder / f"shard_{i:06d}.npz"
        arrays = sample_rows(first, n, seq_len)
        if compressed:
            np.savez_compressed(path, **arrays)
        else:
            save_npz(path, arrays)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        shards.append({"file": path.name, "num_samples": n, "sha256": digest})
        first += n
    meta = {
        "num_samples": first,
        "seq_len": seq_len,
        "dtype": "uint16",
        "fields": ["input_ids", "segment_ids"],
        "field_dtypes": {"input_ids": "uint16", "segment_ids": "uint16"},
        "num_shards": len(sizes),
        "shard_sizes": list(sizes),
        "pre_shuffled": pre_shuffled,
        "seed": 3 if pre_shuffled else None,
        "shards": shards,
        "version": 1,
    }
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


def ids_of(batch: dict) -> list[int]:
    """Global sample ids of a batch (numpy or torch), from input_ids[:, 0]."""
    return [int(x) for x in np.asarray(batch["input_ids"])[:, 0]]


@pytest.fixture
def shard_dir(tmp_path):
    """100 samples in shards of 30, 30, 30, 10 (seq_len 8)."""
    return write_shards(tmp_path / "train", [30, 30, 30, 10])
