"""Worker seeds: worker_seed(seed, worker_id, epoch) and the worker_init_fn TokenLoader installs
(numpy, random and torch seeded per worker): the same draws in a re-run, different between
workers and between epochs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pipeline.loader import GlobalSampler, WorkerInit, worker_seed

torch = pytest.importorskip("torch")


class DrawDataset:
    """A stand-in for ShardedTokenDataset: each batch reports the worker and what its global
    generators (numpy, random, torch) draw: the randomness a user's code in a worker would see."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def get_batch(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        info = torch.utils.data.get_worker_info()
        draws = [
            info.id if info else -1,
            int(np.random.randint(0, 2**31)),
            random.randrange(2**31),
            int(torch.randint(0, 2**31, (1,))),
        ]
        return {"input_ids": np.array([draws], np.int64)}


def _draws(epochs: int, seed: int = 5) -> list[list[list[int]]]:
    from pipeline.loader import TokenLoader

    ds = DrawDataset(16)
    loader = TokenLoader(ds, GlobalSampler(16, 4, seed=seed), num_workers=2, as_torch=False)
    out = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        out.append([b["input_ids"][0].tolist() for b in loader])
    return out


def test_worker_seed_is_a_pure_function_of_its_three_arguments():
    assert worker_seed(3, 1, 2) == worker_seed(3, 1, 2)
    seeds = {worker_seed(s, w, e) for s in range(4) for w in range(4) for e in range(4)}
    assert len(seeds) == 64  # no triple collides (the plain sum s + w + e would: 10 values)
    assert all(0 <= s < 2**32 for s in seeds)  # what np.random.seed accepts
    assert worker_seed(-1, 0, 0) == worker_seed(2**64 - 1, 0, 0)  # two's complement


def test_worker_init_seeds_numpy_random_and_torch():
    WorkerInit(seed=9, epoch=1)(0)
    first = (np.random.random(), random.random(), float(torch.rand(1)))
    WorkerInit(seed=9, epoch=1)(0)
    assert (np.random.random(), random.random(), float(torch.rand(1))) == first
    WorkerInit(seed=9, epoch=1)(1)
    assert np.random.random() != first[0]


def test_token_loader_workers_draw_the_same_per_worker_in_two_runs():
    """Two runs of 2 epochs with 2 workers: identical draws batch by batch; the two workers'
    draws differ, and a worker's draws differ between epochs."""
    a, b = _draws(2), _draws(2)
    assert a == b
    epoch0 = a[0]
    by_worker = {w: [d[1:] for d in epoch0 if d[0] == w] for w in (0, 1)}
    assert by_worker[0] and by_worker[1]
    assert by_worker[0][0] != by_worker[1][0]  # first batch of each worker: other seeds
    first_of = {e: [d[1:] for d in a[e] if d[0] == 0][0] for e in (0, 1)}
    assert first_of[0] != first_of[1]  # the same worker, another epoch
    assert _draws(1, seed=6)[0] != epoch0  # another loader seed: other draws
