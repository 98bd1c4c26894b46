"""RepackingDataset: the tokenize stage's documents packed again for every epoch.

The pack stage fixes each document's neighbours once; here an epoch is a pure function of
(seed, epoch): documents in a seeded order, packed (`bfd`: best-fit-decreasing over all of them
or over windows of `window_docs` documents of that order, no document shorter than seq_len cut;
`concat`: joined and cut every seq_len tokens), then the sequences in a seeded order. So a
document meets other neighbours each epoch (design doc 003: "re-pack every epoch for variety").

Reads `<run>/tokenize/part-*.tokens.npy` (memory-mapped; documents end with EOS, which is how
they are told apart: no Parquet needed) and `meta.json` (eos/pad ids). Imports numpy,
pipeline.packing and pipeline.permute only. Memory: 16 bytes per document (start, length)
plus one packing (~50 bytes per document) at a time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.errors import DataError
from pipeline.packing import Packing, pack_bfd, pack_concat
from pipeline.permute import key_stream

METHODS = ("bfd", "concat")
# bfd: documents packed together; None = all of them: one BFD whose ties (documents of equal
# length, interchangeable) fall in a new seeded order each epoch, ~3 us/doc (bench_repack.py).
# Windows of a few thousand documents mix lengths too but cost ~15x more (~45 us/doc).
DEFAULT_WINDOW_DOCS = None
STATE_KEYS = ("seed", "epoch", "cursor")


def _rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng(key_stream(seed, epoch, "repack"))  # its own (seed, epoch) stream


def epoch_packing(
    lengths: np.ndarray,
    seq_len: int,
    seed: int,
    epoch: int,
    method: str,
    window_docs: int | None = DEFAULT_WINDOW_DOCS,
) -> tuple[Packing, np.ndarray, np.ndarray]:
    """Pack documents of `lengths` (int64 [D], tokens incl. EOS) for one epoch.

    Returns (packing, bin_order, bin_starts): items of the packing are sorted by bin; sequence i
    of the epoch is bin `bin_order[i]`, whose items are `bin_starts[b] : bin_starts[b + 1]`.
    Pure: the same arguments give the same arrays."""
    rng = _rng(seed, epoch)
    order = rng.permutation(len(lengths)).astype(np.int64)
    if method == "concat":
        packing = pack_concat(lengths, seq_len, order)
    else:
        parts, first_bin = [], 0
        window = window_docs or max(len(order), 1)
        for lo in range(0, len(order), window):
            docs = order[lo : lo + window]
            p = pack_bfd(lengths[docs], seq_len)
            p.item_doc = docs[p.item_doc]  # window positions -> document indices
            p.item_bin = p.item_bin + first_bin
            first_bin += p.num_bins
            parts.append(p)
        packing = _join(parts, first_bin)
    starts = np.searchsorted(packing.item_bin, np.arange(packing.num_bins + 1))
    bin_order = rng.permutation(packing.num_bins).astype(np.int64)
    return packing, bin_order, starts.astype(np.int64)


def _join(parts: list[Packing], num_bins: int) -> Packing:
    if not parts:
        z = np.zeros(0, np.int64)
        return Packing(z, z, z, z, z, z, 0)
    cat = {
        k: np.concatenate([getattr(p, k) for p in parts])
        for k in ("item_doc", "item_offset", "item_len", "item_bin", "item_pos", "item_seg")
    }
    return Packing(**cat, num_bins=num_bins)


def _read_documents(run_dir: Path) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, dict]:
    """(token maps per part, document starts int64 [D] as global token offsets, lengths int64
    [D] incl. EOS, meta.json) of `<run_dir>/tokenize`."""
    folder = Path(run_dir) / "tokenize"
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise DataError(str(meta_path), "missing: run the tokenize stage first (its folder)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        eos = int(meta["eos_id"])
        int(meta["pad_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(str(meta_path), f"not the tokenize stage's meta.json ({exc})") from None
    paths = sorted(folder.glob("part-*.tokens.npy"))
    if not paths:
        raise DataError(str(folder), "no part-*.tokens.npy: the tokenize stage wrote no tokens")
    maps, starts, lengths, base = [], [], [], 0
    for p in paths:
        try:
            tokens = np.load(p, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise DataError(str(p), f"not a readable .npy token file ({exc})") from None
        if tokens.ndim != 1:
            raise DataError(str(p), f"expected a 1-D token array, got shape {tokens.shape}")
        if len(tokens) and tokens[-1] != eos:
            raise DataError(str(p), f"does not end with EOS {eos}: not a tokenize part")
        ends = np.flatnonzero(np.asarray(tokens) == eos).astype(np.int64) + 1
        first = np.concatenate([[0], ends[:-1]]).astype(np.int64)
        starts.append(first + base)
        lengths.append(ends - first)
        maps.append(tokens)
        base += len(tokens)
    return maps, np.concatenate(starts), np.concatenate(lengths), meta


class RepackingDataset:
    """The tokenize stage's documents as `len(ds)` sequences of `seq_len` tokens, re-packed
    for each epoch (pure in seed and epoch).

    Same contract as ShardedTokenDataset: `get_batch(idx)` -> {"input_ids", "segment_ids"}
    [B, seq_len] (0 = padding, 1..k = k-th document piece in the sequence), `ds[i]`, `len(ds)`,
    `metadata` (so `GlobalSampler(ds, B, ...)` works: build it per epoch, since bfd's number of
    sequences can differ by a few between epochs). Sequences are already in a seeded order, so
    `next_batch` reads them in turn; its state is {seed, epoch, cursor} and resume is exact.
    """

    def __init__(
        self,
        run_dir: str | Path,
        seq_len: int,
        *,
        seed: int,
        epoch: int = 0,
        method: str = "bfd",
        window_docs: int | None = DEFAULT_WINDOW_DOCS,
    ):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        for name, value, low in (("seq_len", seq_len, 2), ("window_docs", window_docs, 1)):
            if value is None and name == "window_docs":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.run_dir, self.seq_len, self.method = Path(run_dir), int(seq_len), method
        self.window_docs = None if window_docs is None else int(window_docs)
        self._maps, self.doc_starts, self.doc_lengths, meta = _read_documents(self.run_dir)
        self._part_bounds = np.cumsum([0] + [len(m) for m in self._maps]).astype(np.int64)
        self.eos_id, self.pad_id = int(meta["eos_id"]), int(meta["pad_id"])
        self.dtype = np.dtype(self._maps[0].dtype)
        self.seg_dtype = np.dtype(np.uint16 if self.seq_len < 1 << 16 else np.uint32)
        self.fields = ["input_ids", "segment_ids"]
        self.metadata: dict[str, Any] = {
            "seq_len": self.seq_len,
            "pre_shuffled": True,  # sequences come in a seeded order already
            "eos_id": self.eos_id,
            "pad_id": self.pad_id,
            "method": method,
        }
        self.seed = int(seed)
        self.epoch = -1
        self.cursor = 0
        self.set_epoch(epoch)

    @property
    def num_docs(self) -> int:
        return len(self.doc_lengths)

    def set_epoch(self, epoch: int) -> None:
        """Pack `epoch` (a new epoch starts at cursor 0; the current one keeps it)."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"epoch must be an integer >= 0, got {epoch!r}")
        if int(epoch) == self.epoch:
            return
        self.epoch, self.cursor = int(epoch), 0
        self.packing, self.bin_order, self._bin_starts = epoch_packing(
            self.doc_lengths, self.seq_len, self.seed, self.epoch, self.method, self.window_docs
        )

    def __len__(self) -> int:
        return self.packing.num_bins

    def sequence_docs(self, i: int) -> np.ndarray:
        """Document indices (int64, in sequence order) of sequence `i` of this epoch."""
        b = int(self.bin_order[i])
        return self.packing.item_doc[self._bin_starts[b] : self._bin_starts[b + 1]]

    def _tokens(self, start: int, length: int) -> np.ndarray:
        """Global tokens [start, start + length) (one document piece: never spans two parts)."""
        p = int(np.searchsorted(self._part_bounds, start, side="right")) - 1
        lo = start - int(self._part_bounds[p])
        return self._maps[p][lo : lo + length]

    def get_batch(self, idx: np.ndarray | list[int]) -> dict[str, np.ndarray]:
        """{"input_ids": [B, seq_len], "segment_ids": [B, seq_len]} for sequences `idx`."""
        idx = np.asarray(idx, np.int64).reshape(-1)
        n = len(self)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            bad = idx[(idx < 0) | (idx >= n)][0]
            raise IndexError(f"sample {bad} out of range for {n} samples")
        ids = np.full((len(idx), self.seq_len), self.pad_id, self.dtype)
        seg = np.zeros((len(idx), self.seq_len), self.seg_dtype)
        pk = self.packing
        for row, b in enumerate(self.bin_order[idx].tolist()):
            for k in range(int(self._bin_starts[b]), int(self._bin_starts[b + 1])):
                pos, length = int(pk.item_pos[k]), int(pk.item_len[k])
                start = int(self.doc_starts[pk.item_doc[k]]) + int(pk.item_offset[k])
                ids[row, pos : pos + length] = self._tokens(start, length)
                seg[row, pos : pos + length] = pk.item_seg[k]
        return {"input_ids": ids, "segment_ids": seg}

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        i = int(i) + (len(self) if int(i) < 0 else 0)
        batch = self.get_batch([i])
        return {f: batch[f][0] for f in self.fields}

    def next_batch(self, batch_size: int) -> dict[str, np.ndarray] | None:
        """The next `batch_size` sequences of this epoch (fewer at its end), cursor moved past
        them; None once the epoch is used up (then `set_epoch(epoch + 1)`)."""
        if self.cursor >= len(self):
            return None
        hi = min(self.cursor + int(batch_size), len(self))
        batch = self.get_batch(np.arange(self.cursor, hi))
        self.cursor = hi
        return batch

    def state_dict(self) -> dict[str, Any]:
        """{seed, epoch, cursor} plus what checks the state fits this data (JSON-serialisable)."""
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "cursor": self.cursor,
            "method": self.method,
            "seq_len": self.seq_len,
            "num_docs": self.num_docs,
            "window_docs": self.window_docs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where `state` stopped: the epoch re-packed, the cursor restored."""
        missing = [k for k in STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"repacking state lacks {missing}")
        for key in ("method", "seq_len", "num_docs", "window_docs"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(
                    f"repacking state has {key}={state[key]!r}, this dataset "
                    f"{getattr(self, key)!r}: another run or setting?"
                )
        self.seed, self.epoch = int(state["seed"]), -1
        self.set_epoch(int(state["epoch"]))
        cursor = int(state["cursor"])
        if not 0 <= cursor <= len(self):
            raise ValueError(f"repacking state cursor {cursor} outside [0, {len(self)}]")
        self.cursor = cursor

    def __repr__(self) -> str:
        return (
            f"RepackingDataset({str(self.run_dir)!r}, docs={self.num_docs}, samples={len(self)}, "
            f"seq_len={self.seq_len}, method={self.method!r}, epoch={self.epoch})"
        )
