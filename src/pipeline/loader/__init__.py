"""Training-side loader: shard folders -> sampled, resumable batches (docs/loader.md).

The numpy core (dataset, sampler, mask) imports without torch; `TokenLoader` and
`IterableTokenShards` are torch adapters, imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from pipeline.loader.dataset import ShardedTokenDataset
from pipeline.loader.mask import make_doc_mask
from pipeline.loader.repack import RepackingDataset
from pipeline.loader.sampler import GlobalSampler, owner_and_local_index
from pipeline.loader.seeds import WorkerInit, worker_seed

_LAZY = {  # name -> module: these import torch, so only when asked for
    "TokenLoader": "pipeline.loader.loader",
    "IterableTokenShards": "pipeline.loader.iterable",
    "StepDataset": "pipeline.loader.step",
    "BatchCache": "pipeline.loader.cache",
    "Augment": "pipeline.loader.transforms",
    "PRESETS": "pipeline.loader.transforms",
    "get_preset": "pipeline.loader.transforms",
    "BatchPrefetcher": "pipeline.loader.prefetch",
    "data_path": "pipeline.loader.env",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipeline.loader' has no attribute {name!r}")


__all__ = [
    "PRESETS",
    "Augment",
    "BatchCache",
    "BatchPrefetcher",
    "GlobalSampler",
    "IterableTokenShards",
    "RepackingDataset",
    "ShardedTokenDataset",
    "StepDataset",
    "TokenLoader",
    "WorkerInit",
    "data_path",
    "make_doc_mask",
    "get_preset",
    "owner_and_local_index",
    "worker_seed",
]
