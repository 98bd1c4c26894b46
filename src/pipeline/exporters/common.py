"""What every exporter shares: the run's shard folders as `Split`s read block by block, the
segments of packed rows, raw array writes. Pure numpy + the shard format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError, PipelineError, short
from pipeline.loader.schema import check_int, check_metadata
from pipeline.shards import METADATA_NAME, npz_member

SPLITS = {"train": "train", "eval": "val"}  # shard/<folder> -> split name in the export
ROWS_PER_BLOCK = 8192  # rows converted at a time: 32 MiB of uint16 input_ids at seq_len 2048


@dataclass(frozen=True)
class Split:
    """One shard folder to export: its name in the export, metadata.json, shard files."""

    name: str
    folder: Path
    meta: dict[str, Any]
    files: list[Path]

    @property
    def seq_len(self) -> int:
        return int(self.meta["seq_len"])

    @property
    def num_rows(self) -> int:
        return sum(int(s["num_samples"]) for s in self.meta["shards"])

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(input_ids, segment_ids), each [<= ROWS_PER_BLOCK, seq_len], over every shard in order
        (memory-mapped: a block is read when it is used)."""
        for path in self.files:
            ids, seg = npz_member(path, "input_ids"), npz_member(path, "segment_ids")
            if ids.ndim != 2 or ids.shape != seg.shape or ids.shape[1] != self.seq_len:
                raise DataError(
                    str(path),
                    f"input_ids {list(ids.shape)} / segment_ids {list(seg.shape)}, expected "
                    f"[n, {self.seq_len}] (seq_len in metadata.json); re-run the shard stage",
                )
            for lo in range(0, len(ids), ROWS_PER_BLOCK):
                yield ids[lo : lo + ROWS_PER_BLOCK], seg[lo : lo + ROWS_PER_BLOCK]

    def token_dtype(self) -> np.dtype:
        """uint16 when every id fits (vocab <= 65,536), else uint32: from vocab_size, or the
        shards' own dtype when metadata.json has none."""
        vocab = self.meta.get("vocab_size")
        if vocab is not None:
            return np.dtype(np.uint16 if int(vocab) <= 1 << 16 else np.uint32)
        dtype = np.dtype(self.meta.get("dtype") or "uint32")
        return np.dtype(np.uint16 if dtype.itemsize <= 2 else np.uint32)


def _check_dtype(path: Path, dtype: Any) -> None:
    try:
        ok = isinstance(dtype, str) and np.dtype(dtype).kind in "iu"  # token ids: integers
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise DataError(str(path), f"field 'dtype' must be an integer dtype, got {short(dtype)}")


def shard_splits(run_dir: Path) -> list[Split]:
    """The run's shard folders that exist (train first), read from their metadata.json."""
    root = Path(run_dir) / "shard"
    out = []
    for folder, name in SPLITS.items():
        path = root / folder / METADATA_NAME
        if not path.is_file():
            continue
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            files = [root / folder / s["file"] for s in meta["shards"]]
            int(meta["seq_len"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(str(path), f"unreadable shard metadata ({exc})") from None
        check_metadata(meta, path)  # the loader's schema: every key it and export read
        if meta.get("vocab_size") is not None:
            check_int(str(path), "vocab_size", meta["vocab_size"], 1)
        if meta.get("dtype") is not None:
            _check_dtype(path, meta["dtype"])
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise DataError(str(missing[0]), "is listed in metadata.json but missing")
        out.append(Split(name, root / folder, meta, files))
    if not out:
        raise PipelineError(f"{root}: no shards (metadata.json); run the shard stage first")
    return out


def segments(ids: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, lengths) of the segments of packed rows, in row order, padding dropped.

    ids, seg: [n, seq_len] (segment id 0 = padding; a segment is a maximal run of one non-zero id
    inside a row). tokens: 1-D, the segments' tokens concatenated (ids' dtype); lengths: int64
    [num_segments]. Rows [[5,6,7,0]] with segments [[1,1,2,0]] -> tokens [5,6,7], lengths [2,1].
    Vectorised: a few bool passes over the block, no Python loop per row or segment.
    """
    seg = np.asarray(seg)
    ids = np.asarray(ids)
    keep = seg != 0
    starts = np.empty(seg.shape, bool)
    starts[:, :1] = keep[:, :1]
    np.not_equal(seg[:, 1:], seg[:, :-1], out=starts[:, 1:])
    starts[:, 1:] &= keep[:, 1:]
    if keep.all():  # fully packed rows (the common case): no gather
        tokens, first = ids.reshape(-1), np.flatnonzero(starts)
    else:
        flat = keep.reshape(-1)
        tokens, first = ids.reshape(-1)[flat], np.flatnonzero(starts.reshape(-1)[flat])
    lengths = np.diff(first, append=len(tokens)).astype(np.int64)
    return tokens, lengths


def write_bytes(f: Any, arr: np.ndarray) -> None:
    """A C-contiguous array's raw bytes to an open binary file."""
    f.write(memoryview(np.ascontiguousarray(arr)).cast("B"))
