"""Shards on a URL: ShardedTokenDataset("s3://...") reads through a bounded local cache and
checks each shard's sha256 against metadata.json on first read (moto's S3 server, `dev` extra;
memory:// through fsspec without a server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import moto_s3
from pipeline.errors import DataError
from pipeline.loader import GlobalSampler, ShardedTokenDataset
from pipeline.loader.dataset import RemoteTokenDataset

from .conftest import write_shards


def _upload(fs, local, root: str) -> None:
    for p in sorted(local.iterdir()):
        with fs.open_output_stream(f"{root}/{p.name}") as f:
            f.write(p.read_bytes())


@pytest.fixture
def s3(monkeypatch):
    """(pyarrow S3FileSystem, URL query) of a moto server with an empty bucket `loader-remote`
    (test_storage uses `bkt`)."""
    with moto_s3(monkeypatch, "loader-remote") as got:
        yield got


def test_s3_shards_read_through_a_bounded_cache(s3, tmp_path):
    fs, query = s3
    local = write_shards(tmp_path / "train", [30, 30, 30, 10])
    _upload(fs, local, "loader-remote/run/shard/train")
    url = f"s3://loader-remote/run/shard/train?{query}"
    shard_bytes = max(p.stat().st_size for p in local.glob("*.npz"))
    cache = tmp_path / "cache"
    ds = ShardedTokenDataset(url, max_open_shards=1, cache_dir=cache, cache_bytes=2 * shard_bytes)
    assert isinstance(ds, RemoteTokenDataset) and len(ds) == 100
    want = ShardedTokenDataset(local)
    peak = 0
    for idx in GlobalSampler(ds, 8, seed=1):
        got = ds.get_batch(idx)
        assert all(np.array_equal(got[f], want.get_batch(idx)[f]) for f in want.fields)
        peak = max(peak, ds.cache.cached_bytes())
    assert peak <= 2 * shard_bytes  # the bound held at every step
    assert len(list(cache.glob("*.npz"))) <= 2
    assert not list(cache.glob(".*.tmp"))  # no half-downloaded file left


def test_a_corrupt_shard_on_the_url_is_refused(s3, tmp_path):
    fs, query = s3
    local = write_shards(tmp_path / "train", [10, 10])
    bad = local / "shard_000001.npz"
    raw = bytearray(bad.read_bytes())
    raw[-40] ^= 0xFF  # same size, other bytes: metadata's sha256 no longer matches
    bad.write_bytes(bytes(raw))
    _upload(fs, local, "loader-remote/r/train")
    ds = ShardedTokenDataset(f"s3://loader-remote/r/train?{query}", cache_dir=tmp_path / "c")
    assert ds[0]["input_ids"][0] == 0  # shard 0 is fine
    with pytest.raises(DataError, match="sha256 .* does not match metadata.json"):
        ds[15]
    assert not (tmp_path / "c" / "shard_000001.npz").exists()  # never enters the cache


def test_memory_url_through_fsspec_and_eval_in_order(tmp_path):
    pytest.importorskip("fsspec")
    import fsspec

    local = write_shards(tmp_path / "eval", [6, 4])
    mem = fsspec.filesystem("memory")
    for p in local.iterdir():
        mem.pipe(f"/pipeline-remote-test/eval/{p.name}", p.read_bytes())
    ds = ShardedTokenDataset("memory://pipeline-remote-test/eval", cache_dir=tmp_path / "c")
    sampler = GlobalSampler(ds, 3)
    assert sampler.order == "sequential"  # the URL names an eval folder
    assert [int(i) for b in sampler for i in ds.get_batch(b)["input_ids"][:, 0]] == list(range(10))
    meta = json.loads((tmp_path / "c" / "metadata.json").read_text())
    assert meta["num_samples"] == 10
    with pytest.raises(ValueError, match="cache_bytes must be > 0"):
        ShardedTokenDataset("memory://pipeline-remote-test/eval", cache_bytes=0)
