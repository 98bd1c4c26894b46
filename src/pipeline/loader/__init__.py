"""Training-side loader: shard folders -> sampled, resumable batches (docs/loader.md).

The numpy core (dataset, sampler, mask) imports without torch; `TokenLoader` and
`IterableTokenShards` are torch adapters, imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from pipeline.loader.dataset import ShardedTokenDataset
from pipeline.loader.mask import make_doc_mask
from pipeline.loader.sampler import GlobalSampler, owner_and_local_index

_LAZY = {  # name -> module: these import torch, so only when asked for
    "TokenLoader": "pipeline.loader.loader",
    "IterableTokenShards": "pipeline.loader.iterable",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipeline.loader' has no attribute {name!r}")


__all__ = [
    "GlobalSampler",
    "IterableTokenShards",
    "ShardedTokenDataset",
    "TokenLoader",
    "make_doc_mask",
    "owner_and_local_index",
]
