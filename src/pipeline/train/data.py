"""What a proxy run reads from a data run: shard/train, shard/eval, the tokenizer, eval texts.

The train stream is pipeline.loader's GlobalSampler + TokenLoader, epoch after epoch, behind a
BatchPrefetcher. The prefetcher runs ahead of the training step, so the loader state to
checkpoint is not the loader's own (that of the last batch the prefetch thread took) but the
one recorded with each batch as the step consumes it (`TrainStream.state`).
Bad input (no shards, no tokenizer, a missing or empty eval text) is one DataError line.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from pipeline.errors import DataError, PipelineError
from pipeline.loader import BatchPrefetcher, GlobalSampler, ShardedTokenDataset, TokenLoader
from pipeline.loader.schema import check_int
from pipeline.tokenizer import Tokenizer
from pipeline.tokenizer import load as load_tokenizer


class RunData:
    """A data run's artifacts: `train` and `eval` datasets (eval may be None), the tokenizer,
    seq_len and vocab_size (from the shards' metadata and the tokenizer)."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        shard = self.run_dir / "shard"
        if not (shard / "train" / "metadata.json").is_file():
            what = "is not a folder" if not self.run_dir.is_dir() else "has no shard/train/"
            raise DataError(
                str(self.run_dir),
                f"{what} with metadata.json: build the shards first "
                f"(`pipeline data --config recipes/data_demo.yaml`), or pass --run DIR",
            )
        self.train = ShardedTokenDataset(shard / "train")
        if len(self.train) == 0:
            raise DataError(str(shard / "train"), "holds no sequences: nothing to train on")
        ev = shard / "eval"
        self.eval = ShardedTokenDataset(ev) if (ev / "metadata.json").is_file() else None
        if self.eval is not None and len(self.eval) == 0:
            self.eval = None
        self.seq_len = self.train.seq_len
        self.tokenizer_path = _tokenizer_path(self.run_dir)
        self.tokenizer: Tokenizer | None = None
        meta = self.train.metadata
        vocab = meta.get("vocab_size")
        if vocab is None:  # older shards: the tokenizer says
            vocab = self.load_tokenizer().vocab_size
        where = str(shard / "train" / "metadata.json")
        self.vocab_size = check_int(where, "vocab_size", vocab, 1)
        for key in ("eos_id", "pad_id"):  # ids the shards hold: the embedding must cover them
            if meta.get(key) is not None and meta[key] >= self.vocab_size:
                raise DataError(
                    where,
                    f"vocab_size {self.vocab_size} does not cover {key} {meta[key]}: "
                    "shards of another tokenizer? re-run the shard stage",
                )
        self.tokenizer_sha256 = meta.get("tokenizer_sha256")

    def load_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            if self.tokenizer_path is None:
                raise DataError(
                    str(self.run_dir / "tokenize"),
                    "no tokenizer.json: eval_texts need the run's own tokenizer "
                    "(re-run the tokenize stage)",
                )
            self.tokenizer = load_tokenizer(self.tokenizer_path)
        return self.tokenizer

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint records of the data it trained on."""
        return {
            "run_dir": str(self.run_dir),
            "num_samples": len(self.train),
            "seq_len": self.seq_len,
            "vocab_size": self.vocab_size,
            "tokenizer_sha256": self.tokenizer_sha256,
        }


def _tokenizer_path(run_dir: Path) -> Path | None:
    for p in (
        run_dir / "tokenize" / "tokenizer.json",
        run_dir / "tokenize/hf_tokenizer/tokenizer.json",
    ):
        if p.is_file():
            return p
    return None


# ---------------------------------------------------------------- eval texts


def read_eval_texts(path: str | Path) -> list[str]:
    """The documents of one eval file: a .txt is one document; a .jsonl one per line
    (field `text`). DataError naming the file (and line) when missing, unreadable or empty."""
    p = Path(path)
    if not p.is_file():
        raise DataError(str(p), "eval text not found (pretrain.eval_texts / --eval-texts)")
    try:
        raw = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(str(p), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if p.suffix == ".txt":
        texts = [raw] if raw.strip() else []
    else:
        texts = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{p}:{n}", f"not a JSON line ({exc.msg})") from None
            text = obj.get("text") if isinstance(obj, dict) else None
            if not isinstance(text, str):
                raise DataError(f"{p}:{n}", "field 'text' is missing or not a string")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:  # a JSON escape like \ud800: no UTF-8 bytes
                raise DataError(
                    f"{p}:{n}",
                    f"field 'text' holds a lone surrogate at character {exc.start}, which has "
                    "no UTF-8 bytes: fix or drop the line",
                ) from None
            if text:
                texts.append(text)
    if not texts:
        raise DataError(str(p), "holds no text to evaluate on")
    return texts


# ---------------------------------------------------------------- the train stream


class TrainStream:
    """This rank's micro-batches, epoch after epoch, from a loader state or the start.

    `next_batch()` -> {"input_ids", "segment_ids"} int64 [B, L] on `device`; after it, `state`
    is the loader state to checkpoint (the position after that batch). `stats()` gives the
    prefetcher's stall time. Close it when done (stops the prefetch thread).
    """

    def __init__(
        self,
        ds: ShardedTokenDataset,
        batch_size: int,
        *,
        seed: int,
        world_size: int,
        rank: int,
        order: str,
        device: torch.device,
        workers: int = 0,
        state: dict[str, Any] | None = None,
    ):
        gb = batch_size * world_size
        if len(ds) < gb:
            raise PipelineError(
                f"{ds.path}: {len(ds)} sequences, fewer than one step of batch_size {batch_size}"
                f" x world size {world_size}; lower pretrain.batch_size"
            )
        sampler = GlobalSampler(
            ds,
            batch_size,
            seed=seed,
            world_size=world_size,
            rank=rank,
            order=order,
            drop_last=True,
        )
        self.loader = TokenLoader(ds, sampler, num_workers=workers, prefetch=2)
        if state is not None:
            try:
                self.loader.load_state_dict(state)
            except ValueError as exc:
                msg = f"checkpoint's loader state does not fit {ds.path}: {exc}"
                raise PipelineError(msg) from None
        self.state: dict[str, Any] = self.loader.state_dict()
        self._states: collections.deque = collections.deque()
        self.prefetcher = BatchPrefetcher(self._epochs(), device, depth=2)
        self._it = iter(self.prefetcher)
        self.device = device

    def _epochs(self) -> Iterator[dict[str, torch.Tensor]]:
        """Runs in the prefetch thread: each batch is preceded by the state after it."""
        epoch = self.loader.state_dict()["epoch"]
        while True:
            self.loader.set_epoch(epoch)  # the same epoch keeps a resumed cursor
            for batch in self.loader:
                self._states.append(self.loader.state_dict())
                yield batch
            epoch += 1

    def next_batch(self) -> dict[str, torch.Tensor]:
        batch = next(self._it)
        self.state = self._states.popleft()
        if batch["input_ids"].device != self.device:  # CPU: the loader's int64 tensors
            batch = {k: v.to(self.device) for k, v in batch.items()}
        return {k: v.long() for k, v in batch.items()}

    def stats(self) -> dict[str, Any]:
        return self.prefetcher.stats()

    def close(self) -> None:
        self._it.close()  # the prefetcher's finally: stop and join its thread
