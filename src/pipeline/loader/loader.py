"""TokenLoader: torch's DataLoader over a ShardedTokenDataset with a GlobalSampler as its
batch_sampler; batches are gathered with `get_batch` in the workers.

Its state is that of the last batch handed to the caller, never of what the workers have
prefetched: the sampler runs ahead by up to num_workers x prefetch steps, and a new pass (or a
resumed run) rewinds it to the delivered state. torch is imported here, not by the numpy core.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np

from pipeline.loader.dataset import ShardedTokenDataset
from pipeline.loader.env import data_path
from pipeline.loader.sampler import GlobalSampler
from pipeline.loader.seeds import WorkerInit


class _BatchDataset:
    """DataLoader's map-style view: `__getitems__` receives a whole batch of indices."""

    def __init__(self, ds: ShardedTokenDataset):
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        return self.ds[i]

    def __getitems__(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return self.ds.get_batch(idx)


def _collate(batch: dict[str, np.ndarray], as_torch: bool) -> dict[str, Any]:
    """In the worker: numpy, or int64 tensors (what nn.Embedding and cross_entropy take)."""
    if not as_torch:
        return batch
    import torch

    return {k: torch.from_numpy(v.astype(np.int64)) for k, v in batch.items()}


class TokenLoader:
    """Iterate to get this rank's batches: {field: tensor [B, seq_len]} (int64), or numpy
    arrays in the file's dtype with as_torch=False. The last step of an epoch may be shorter
    (see GlobalSampler). `state_dict()` / `load_state_dict()` checkpoint the delivered position.
    Each worker is seeded with worker_seed(seed, worker_id, epoch) (numpy, random, torch);
    `seed` defaults to the sampler's. `TokenLoader.from_env()` reads TRAIN_DATA_PATH /
    EVAL_DATA_PATH.
    """

    def __init__(
        self,
        dataset: ShardedTokenDataset,
        sampler: GlobalSampler,
        num_workers: int = 2,
        pin_memory: bool = False,
        prefetch: int = 2,
        as_torch: bool = True,
        seed: int | None = None,
    ):
        import torch
        from torch.utils.data import DataLoader

        if len(dataset) != sampler.num_samples:
            raise ValueError(
                f"sampler is for {sampler.num_samples} samples, the dataset has {len(dataset)}"
            )
        if num_workers < 0 or prefetch < 1:
            raise ValueError(
                f"need num_workers >= 0 and prefetch >= 1, got {num_workers}, {prefetch}"
            )
        self.dataset, self.sampler = dataset, sampler
        self.num_workers, self.as_torch = num_workers, as_torch
        base_seed = sampler.seed if seed is None else int(seed)
        self.worker_init = WorkerInit(base_seed, sampler.epoch)
        # Each DataLoader pass draws its workers' base seed from the generator it is given, else
        # from torch's global RNG: a pass started by a prefetch thread would then race the
        # training step (dropout) for the global RNG, and exact resume would break.
        self._loader = DataLoader(
            _BatchDataset(dataset),
            batch_sampler=sampler,
            num_workers=num_workers,
            collate_fn=partial(_collate, as_torch=as_torch),
            pin_memory=pin_memory,
            prefetch_factor=prefetch if num_workers > 0 else None,
            worker_init_fn=self.worker_init,
            generator=torch.Generator().manual_seed(base_seed),
        )
        self._delivered: dict[str, Any] | None = None  # sampler state after the last batch out

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def _rewind(self) -> None:
        """Undo what workers prefetched but the caller never got (same epoch and order only:
        after sampler.set_epoch(new) the sampler's own fresh state wins)."""
        d, s = self._delivered, self.sampler
        if d is not None and (d["epoch"], d["seed"], d["order"]) == (s.epoch, s.seed, s.order):
            s.cursor, s.padded = d["cursor"], d["padded"]

    @classmethod
    def from_env(
        cls,
        batch_size: int,
        *,
        split: str = "train",
        seed: int = 0,
        world_size: int = 1,
        rank: int = 0,
        order: str = "auto",
        drop_last: bool = False,
        dataset_kwargs: dict[str, Any] | None = None,
        **loader_kwargs: Any,
    ) -> TokenLoader:
        """The loader of the shards a platform names in TRAIN_DATA_PATH (split "train") or
        EVAL_DATA_PATH ("eval"): a ValueError names a variable that is unset or empty. The eval
        split reads in order (GlobalSampler's `auto`); loader_kwargs go to TokenLoader."""
        ds = ShardedTokenDataset(data_path(split), **(dataset_kwargs or {}))
        sampler = GlobalSampler(
            ds, batch_size, seed=seed, world_size=world_size, rank=rank, order=order,
            drop_last=drop_last,
        )  # fmt: skip
        return cls(ds, sampler, **loader_kwargs)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.worker_init.epoch = self.sampler.epoch  # the workers this pass starts see it
        self._rewind()
        self.sampler.begin_pass()
        state = self.sampler.state_dict()
        self._delivered = dict(state)
        for batch in self._loader:  # DataLoader keeps batches in sampler order
            take, pad = self.sampler.step_size(state["cursor"])
            state["cursor"] += take
            state["padded"] += pad
            self._delivered = dict(state)
            yield batch

    def state_dict(self) -> dict[str, Any]:
        """The sampler state after the last batch handed out (JSON-serialisable)."""
        s = self.sampler
        d = self._delivered
        if d is not None and (d["epoch"], d["seed"], d["order"]) == (s.epoch, s.seed, s.order):
            return dict(d)
        return s.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the batch the state was saved at (any world size / batch size)."""
        self.sampler.load_state_dict(state)
        self._delivered = self.sampler.state_dict()
