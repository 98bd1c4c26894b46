"""Index-only streams for the iterable mode: which samples a (rank, worker) reads, in what order,
and a seeded shuffle buffer whose state is only indices (reader cursor, RNG state, buffered
indices), so a checkpoint is small and resumes exactly. numpy only; no token is read here.

Reading order: shards in a seeded order per epoch, rows in file order. Rank r reads positions
r, r + P, r + 2P, ... (M = ceil(N / P) of them: the tail is padded by wrapping, so every rank
gets as many samples); its DataLoader worker w of W reads the rank's k-th position when
k % W == w.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.loader.order import rng_for


def shard_read_order(shard_sizes: list[int], seed: int, epoch: int) -> np.ndarray:
    """Global sample index at each reading position: whole shards, in a seeded order."""
    sizes = np.asarray(shard_sizes, np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    order = rng_for(seed, epoch, "read").permutation(len(sizes))
    return np.concatenate([np.arange(starts[s], starts[s + 1]) for s in order] or [[]]).astype(
        np.int64
    )


def worker_positions(n: int, world_size: int, rank: int, num_workers: int, worker: int) -> range:
    """Reading positions of one worker (before wrapping: position p stands for p mod n)."""
    per_rank = -(-n // world_size)  # ceil: ranks get equal counts
    first = rank + world_size * worker
    stop = rank + world_size * per_rank
    return range(first, stop, world_size * num_workers)


class ShuffleBuffer:
    """A stream of `inputs` (indices) shuffled through a buffer of `size` slots: once full,
    emit a uniformly chosen slot and refill it with the next input; at the end, drain in random
    order. Output j can only hold an input < j + size (the known limit of buffer shuffles)."""

    def __init__(self, inputs: np.ndarray, size: int, seed: int, epoch: int, *key: int):
        self.inputs = inputs
        self.size = max(int(size), 1)
        self.rng = rng_for(seed, epoch, "buffer", *key)
        self.cursor = 0  # inputs consumed
        self.buffer: list[int] = []
        self.emitted = 0

    def __next__(self) -> int:
        while len(self.buffer) < self.size and self.cursor < len(self.inputs):
            self.buffer.append(int(self.inputs[self.cursor]))
            self.cursor += 1
        if not self.buffer:
            raise StopIteration
        slot = int(self.rng.integers(len(self.buffer))) if len(self.buffer) > 1 else 0
        out = self.buffer[slot]
        if self.cursor < len(self.inputs):
            self.buffer[slot] = int(self.inputs[self.cursor])
            self.cursor += 1
        else:
            self.buffer[slot] = self.buffer[-1]
            self.buffer.pop()
        self.emitted += 1
        return out

    def __iter__(self) -> ShuffleBuffer:
        return self

    @property
    def exhausted(self) -> bool:
        return self.cursor >= len(self.inputs) and not self.buffer

    def state_dict(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "rng": self.rng.bit_generator.state,
            "buffer": list(self.buffer),
            "emitted": self.emitted,
            "done": self.exhausted,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = int(state["cursor"])
        self.rng.bit_generator.state = state["rng"]
        self.buffer = [int(i) for i in state["buffer"]]
        self.emitted = int(state["emitted"])


def worker_stream(
    shard_sizes: list[int],
    seed: int,
    epoch: int,
    world_size: int,
    rank: int,
    num_workers: int,
    worker: int,
    shuffle_buffer: int,
) -> ShuffleBuffer:
    """The shuffled index stream of one (rank, worker) for one epoch."""
    n = int(sum(shard_sizes))
    read = shard_read_order(shard_sizes, seed, epoch)
    r = worker_positions(n, world_size, rank, num_workers, worker)
    pos = np.arange(r.start, r.stop, r.step, dtype=np.int64)
    inputs = read[pos % n] if n else pos
    return ShuffleBuffer(inputs, shuffle_buffer, seed, epoch, rank, worker)
