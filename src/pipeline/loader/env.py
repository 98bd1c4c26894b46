"""Data paths a training platform injects: TRAIN_DATA_PATH (the train shards) and
EVAL_DATA_PATH (the eval shards). Each may name a shard folder (with metadata.json), a run
folder (its shard/train or shard/eval is used) or a shard/ folder (its train/ or eval/), or a
URL of a shard folder. A variable that is unset or set but empty is a ValueError naming it.
`TokenLoader.from_env()` and `pipeline bench --shards env` read them through `data_path`.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VARS = {"train": "TRAIN_DATA_PATH", "eval": "EVAL_DATA_PATH"}


def data_path(split: str = "train") -> str:
    """The shard folder (path or URL) the environment names for `split` ("train" or "eval")."""
    if split not in ENV_VARS:
        raise ValueError(f"split must be one of {', '.join(ENV_VARS)}, got {split!r}")
    var = ENV_VARS[split]
    value = os.environ.get(var)
    if value is None:
        raise ValueError(
            f"{var} is not set: export {var}=<shard folder> (e.g. data/<run>/shard/{split}), "
            "or pass the folder itself"
        )
    if not value.strip():
        raise ValueError(f"{var} is set but empty: give it a shard folder or unset it")
    return resolve_shard_folder(value.strip(), split)


def resolve_shard_folder(path: str, split: str) -> str:
    """`path` itself when it holds metadata.json (or is a URL), else its shard/<split> or
    <split> subfolder when that holds one; otherwise `path` (the dataset then says what is
    missing)."""
    if "://" in path:
        return path
    root = Path(path)
    for candidate in (root, root / "shard" / split, root / split):
        if (candidate / "metadata.json").is_file():
            return str(candidate)
    return path
