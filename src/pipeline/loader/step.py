"""StepDataset: a map-style dataset over training steps. Step t is B sample indices drawn with
replacement from a generator of (seed, t) alone, so a step's batch is the same whatever the
workers, restarts or cache; `fetch_batch` is the path every loader here shares: cache lookup of
the base batch, gather on a miss, then the seeded transforms of (epoch, step). Not here: reading
shards (the dataset's get_batch) or epoch orders without replacement (GlobalSampler).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

import numpy as np

from pipeline.loader.cache import BatchCache
from pipeline.loader.sampler import dataset_split

Batch = dict[str, np.ndarray]
_STEP_TAG, _ORDER_TAG = 0x5354, 0x4F52  # keep the step and sweep-order streams apart


class BatchSource(Protocol):
    def __len__(self) -> int: ...

    def get_batch(self, idx: np.ndarray) -> Batch: ...


def fetch_batch(
    get_batch: Callable[[np.ndarray], Batch],
    idx: np.ndarray,
    *,
    key: Hashable | np.ndarray | None = None,
    cache: BatchCache | None = None,
    augment: Callable[..., Batch] | None = None,
    epoch: int = 0,
    step: int = 0,
) -> Batch:
    """Base batch of `idx` from `cache` (by `key`, default the indices) or `get_batch` on a miss
    (then stored), then `augment(batch, epoch=, step=)`. The cache only ever holds base batches."""
    key = idx if key is None else key
    base = cache.get(key) if cache is not None else None
    if base is None:
        base = get_batch(idx)
        if cache is not None:
            cache.put(key, base)
    return augment(base, epoch=epoch, step=step) if augment is not None else base


class StepDataset:
    """`ds[t]` -> the batch of step t (dict of [B, L] arrays); `len(ds)` steps.

    A sweep is `steps_per_sweep` steps (0: N // B, so a sweep draws about N samples); `max_steps`
    > 0 caps the total number of steps over all sweeps (optimizer steps, as the step-dataset
    design says): sweep e then yields min(steps_per_sweep, max_steps - e * steps_per_sweep)
    steps, and none once the cap is reached. Step t draws
    `default_rng([seed, tag, t]).integers(0, N, B)`: with replacement, independent of every
    other step. Step t is also its cache key, so a cache holds a step's base batch across sweeps
    while `augment` makes a new view of it every epoch (never on an eval split).
    `order(epoch)` is a seeded permutation of the steps for a DataLoader's sampler and
    `trace(epochs)` the concatenated orders: the known future an `opt` cache needs.
    """

    def __init__(
        self,
        ds: BatchSource,
        batch_size: int,
        *,
        seed: int,
        steps_per_sweep: int = 0,
        max_steps: int = 0,
        cache: BatchCache | None = None,
        augment: Callable[..., Batch] | None = None,
    ):
        n = len(ds)
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if steps_per_sweep < 0 or max_steps < 0:
            raise ValueError(
                f"steps_per_sweep and max_steps must be >= 0, got {steps_per_sweep}, {max_steps}"
            )
        if n == 0:
            raise ValueError("StepDataset needs a non-empty dataset")
        self.ds, self.batch_size, self.seed = ds, int(batch_size), int(seed)
        self.num_samples = n
        self.steps_per_sweep = steps_per_sweep or max(n // batch_size, 1)
        self.num_steps = self.steps_per_sweep  # step keys: 0 .. steps_per_sweep - 1
        self.max_steps = int(max_steps)  # 0: no cap
        if augment is not None and dataset_split(ds) == "eval":
            raise ValueError("eval data is never augmented: pass augment=None for an eval split")
        self.cache, self.augment, self.epoch = cache, augment, 0

    def __len__(self) -> int:
        return self.num_steps

    def set_epoch(self, epoch: int) -> None:
        """The epoch the transforms see (the base batches do not depend on it)."""
        self.epoch = int(epoch)

    def indices(self, step: int) -> np.ndarray:
        """int64 [B]: the sample indices of `step`, a function of (seed, step) only."""
        if not 0 <= step < self.num_steps:
            raise IndexError(f"step {step} out of range [0, {self.num_steps})")
        rng = np.random.default_rng([self.seed, _STEP_TAG, int(step)])
        return rng.integers(0, self.num_samples, size=self.batch_size, dtype=np.int64)

    def __getitem__(self, step: int) -> Batch:
        step = int(step)
        return fetch_batch(
            self.ds.get_batch,
            self.indices(step),
            key=step,
            cache=self.cache,
            augment=self.augment,
            epoch=self.epoch,
            step=step,
        )

    def steps_in_sweep(self, epoch: int) -> int:
        """Steps sweep `epoch` runs: steps_per_sweep, less what the max_steps cap leaves."""
        if not self.max_steps:
            return self.num_steps
        return int(min(self.num_steps, max(self.max_steps - int(epoch) * self.num_steps, 0)))

    @property
    def num_sweeps(self) -> int | None:
        """Sweeps until max_steps is reached (None: no cap)."""
        return -(-self.max_steps // self.num_steps) if self.max_steps else None

    def order(self, epoch: int, *, shuffle: bool = True) -> np.ndarray:
        """int64 [steps_in_sweep(epoch)]: the steps of one sweep, permuted by (seed, epoch)
        unless shuffle=False; the max_steps cap cuts the last sweep's order short."""
        k = self.steps_in_sweep(epoch)
        if not shuffle:
            return np.arange(k, dtype=np.int64)
        perm = np.random.default_rng([self.seed, _ORDER_TAG, int(epoch)]).permutation(
            self.num_steps
        )
        return perm[:k]

    def trace(self, epochs: int, *, shuffle: bool = True, start_epoch: int = 0) -> list[int]:
        """Step keys in access order over `epochs` sweeps: the future for BatchCache('opt')."""
        return [
            int(t)
            for e in range(start_epoch, start_epoch + epochs)
            for t in self.order(e, shuffle=shuffle)
        ]
