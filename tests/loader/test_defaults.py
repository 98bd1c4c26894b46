"""Loader defaults: every shard map open (bounded by the open-file limit), and an eval split read
in order by GlobalSampler unless an order is asked for."""

from __future__ import annotations

import json
import resource

import numpy as np
import pytest

from pipeline.loader import GlobalSampler, ShardedTokenDataset
from pipeline.loader.dataset import FD_SHARE, default_max_open_shards

from .conftest import write_shards


def test_every_shard_stays_open_by_default(tmp_path):
    """A global shuffle over 12 shards opens each shard once (the old default of 2 open maps
    reopened shards on almost every row)."""
    ds = ShardedTokenDataset(write_shards(tmp_path / "train", [5] * 12))
    assert ds.max_open_shards == 12
    sampler = GlobalSampler(ds, 6, seed=0)
    for idx in sampler:
        ds.get_batch(idx)
    assert ds.num_opens == 12 and ds.num_open_shards == 12
    two = ShardedTokenDataset(ds.path, max_open_shards=2)
    for idx in GlobalSampler(two, 6, seed=0):
        two.get_batch(idx)
    assert two.num_opens > 12  # what the default avoids


def test_default_is_bounded_by_the_open_file_limit(monkeypatch):
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY:
        assert default_max_open_shards(10**6) == max(1, soft // FD_SHARE)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (64, 64))
    assert default_max_open_shards(1000) == 16 and default_max_open_shards(3) == 3
    monkeypatch.setattr(resource, "getrlimit", lambda _: (2, 2))
    assert default_max_open_shards(1000) == 1


def test_eval_split_reads_in_order_by_default(tmp_path):
    ev = ShardedTokenDataset(write_shards(tmp_path / "eval", [7, 5]))
    sampler = GlobalSampler(ev, 4, seed=3)
    assert sampler.order == "sequential" and sampler.split == "eval"
    got = np.concatenate(list(sampler)).tolist()
    assert got == list(range(12))
    assert GlobalSampler(ev, 4, seed=3, order="global").order == "global"  # asked for: honoured


def test_metadata_split_eval_wins_over_the_folder_name(tmp_path):
    folder = write_shards(tmp_path / "heldout", [9])
    meta = json.loads((folder / "metadata.json").read_text())
    (folder / "metadata.json").write_text(json.dumps({**meta, "split": "eval"}))
    assert GlobalSampler(ShardedTokenDataset(folder), 4).order == "sequential"
    train = ShardedTokenDataset(write_shards(tmp_path / "train", [9]))
    assert GlobalSampler(train, 4).order == "global"


def test_max_open_shards_still_validated(tmp_path):
    with pytest.raises(ValueError, match="max_open_shards must be >= 1"):
        ShardedTokenDataset(write_shards(tmp_path / "train", [3]), max_open_shards=0)
