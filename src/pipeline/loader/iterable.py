"""IterableTokenShards: a torch IterableDataset over a shard folder, split by rank and by
DataLoader worker (no sample twice), shuffled through a seeded, index-only shuffle buffer.

Each sample carries `index` (its global sample index) and `worker` (the DataLoader worker that
read it). `track(loader)` follows the delivered batches in the main process and keeps, per
worker, the buffer state after the last delivered sample: `state_dict()` is that (indices only)
and a run resumed from it continues exactly. Resuming needs the same world size, rank and
number of workers (the global sampler, not this mode, is the elastic one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from pipeline.loader.dataset import ShardedTokenDataset
from pipeline.loader.schema import StateError, check_iterable_state
from pipeline.loader.stream import ShuffleBuffer, worker_stream

log = logging.getLogger("pipeline.loader")
STATE_VERSION = 1


class IterableTokenShards(IterableDataset):
    """Samples {input_ids, segment_ids (int64 [seq_len]), index, worker} of this rank, every
    rank getting ceil(N / world_size) of them (the tail padded by wrapping)."""

    def __init__(
        self,
        path: str | Path,
        *,
        seed: int = 0,
        world_size: int = 1,
        rank: int = 0,
        shuffle_buffer: int = 1000,
        max_open_shards: int | None = None,
    ):
        super().__init__()
        if not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank {rank}, world {world_size}")
        if shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer must be >= 0, got {shuffle_buffer}")
        self.ds = ShardedTokenDataset(path, max_open_shards=max_open_shards)
        self.seed, self.world_size, self.rank = int(seed), int(world_size), int(rank)
        self.shuffle_buffer = int(shuffle_buffer)
        self.epoch = 0
        self._states: list[dict[str, Any]] | None = None  # per worker, where streams start
        self._tracked: list[ShuffleBuffer] | None = None  # main process: delivered so far
        self._next_worker = 0  # stream whose batch comes next (DataLoader takes turns)

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its beginning (call before creating the loader's iterator)."""
        if epoch != self.epoch:
            self.epoch, self._states, self._tracked = int(epoch), None, None
            self._next_worker = 0

    def stream(self, num_workers: int, worker: int) -> ShuffleBuffer:
        """Index stream of one worker, at the delivered state when there is one."""
        s = worker_stream(
            self.ds.shard_sizes,
            self.seed,
            self.epoch,
            self.world_size,
            self.rank,
            num_workers,
            worker,
            self.shuffle_buffer,
        )
        if self._states is not None:
            if len(self._states) != num_workers:
                raise StateError(
                    "iterable state",
                    f"is for {len(self._states)} DataLoader worker(s), this loader has "
                    f"{num_workers}: resume with the same num_workers",
                )
            s.load_state_dict(self._states[worker])
        return s

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        num_workers, worker = (info.num_workers, info.id) if info else (1, 0)
        # DataLoader asks its workers for batches in turn, from worker 0: rotating which stream
        # each worker plays makes a resumed loader continue with the stream that was next
        worker = (worker + self._next_worker) % num_workers
        for i in self.stream(num_workers, worker):
            item = self.ds[i]
            yield {
                **{k: torch.from_numpy(v.astype(np.int64)) for k, v in item.items()},
                "index": i,
                "worker": worker,
            }

    # ------------------------------------------------------------ tracking and state

    def track(self, loader: Any) -> Iterator[Any]:
        """Iterate `loader` (a DataLoader over this dataset) and record each delivered sample,
        so that `state_dict()` is the state after the last batch the caller got."""
        workers = max(int(getattr(loader, "num_workers", 0)), 1)
        self._sync()
        if self._states is not None and all(s["done"] for s in self._states):
            log.warning(
                "IterableTokenShards: a new pass over epoch %d without set_epoch(new epoch): "
                "it repeats the same order every epoch; call set_epoch(epoch) before each",
                self.epoch,
            )
            self._states, self._next_worker = None, 0
        streams = [self.stream(workers, w) for w in range(workers)]
        self._states = [s.state_dict() for s in streams]  # what the workers start from
        self._tracked = streams
        self._delivered_next = self._next_worker
        for batch in loader:
            w = -1
            for i, w in zip(_ints(batch["index"]), _ints(batch["worker"]), strict=True):
                want = next(streams[w])  # index-only replay: no token is read here
                if want != i:
                    raise RuntimeError(f"worker {w} delivered sample {i}, its stream says {want}")
            self._delivered_next = (w + 1) % workers
            yield batch

    def _sync(self) -> None:
        """States of the tracked streams (after the last delivered batch) become the start."""
        if self._tracked is not None:
            self._states = [s.state_dict() for s in self._tracked]
            self._next_worker = self._delivered_next

    def __getstate__(self) -> dict[str, Any]:
        self._sync()
        return {**self.__dict__, "_tracked": None}  # workers need the states, not the streams

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable: the configuration and, per worker, the shuffle buffer's reader
        cursor, RNG state and buffered indices (None before the first tracked pass)."""
        self._sync()
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "epoch": self.epoch,
            "world_size": self.world_size,
            "rank": self.rank,
            "shuffle_buffer": self.shuffle_buffer,
            "num_samples": len(self.ds),
            "workers": None if self._states is None else [dict(s) for s in self._states],
            "next_worker": self._next_worker,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the state's last delivered sample; every field is checked here
        (StateError), not when a stream first reads it."""
        check_iterable_state(state, self.state_dict())
        self.seed, self.epoch = int(state["seed"]), int(state["epoch"])
        self._states = None if state["workers"] is None else [dict(s) for s in state["workers"]]
        self._tracked, self._next_worker = None, int(state.get("next_worker", 0))


def _ints(values: Any) -> list[int]:
    return np.asarray(values).reshape(-1).astype(np.int64).tolist()
