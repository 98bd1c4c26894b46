"""ShardedTokenDataset: mmap'd random access, LRU of open shards, verify, compressed shards,
one-line errors for folders that do not match their metadata."""

from __future__ import annotations

import json
import mmap
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.conftest import ids_of, sample_rows, write_shards
from pipeline.errors import DataError
from pipeline.loader import ShardedTokenDataset
from pipeline.loader.dataset import read_members
from pipeline.rebalance import shuffle_shards


def test_items_and_metadata(shard_dir):
    """Sample 45 lives in shard 1 (30..59) at row 15; ds[45] is its row, ds[-1] is sample 99."""
    ds = ShardedTokenDataset(shard_dir)
    assert len(ds) == 100 and ds.num_shards == 4 and ds.seq_len == 8
    assert ds.metadata["shard_sizes"] == [30, 30, 30, 10]
    assert [a.tolist() for a in ds.locate(np.array([45]))] == [[1], [15]]
    want = sample_rows(45, 1, 8)
    item = ds[45]
    assert set(item) == {"input_ids", "segment_ids"}
    for f in item:
        assert item[f].shape == (8,) and item[f].dtype == np.uint16
        np.testing.assert_array_equal(item[f], want[f][0])
    assert ds[-1]["input_ids"][0] == 99
    with pytest.raises(IndexError, match="100 out of range"):
        ds[100]
    with pytest.raises(IndexError, match="out of range"):
        ds.get_batch([3, 100])


def test_members_are_memory_mapped_and_at_most_max_open(shard_dir):
    ds = ShardedTokenDataset(shard_dir, max_open_shards=2)
    arr = ds.shard(0)["input_ids"]
    assert isinstance(arr.base, mmap.mmap) and not arr.flags.writeable
    for s in [1, 2, 3, 0, 2]:
        ds.shard(s)
        assert ds.num_open_shards <= 2
    # opens 0, 1, 2 (evicts 0), 3 (evicts 1), 0 (evicts 2), 2 (evicts 3): LRU keeps {0, 2}
    assert sorted(ds._open) == [0, 2] and ds.num_opens == 6
    ds.close()
    assert ds.num_open_shards == 0


@settings(max_examples=30, deadline=None)
@given(
    idx=st.lists(st.integers(0, 99), max_size=40),
    max_open=st.integers(1, 4),
    compressed=st.booleans(),
)
def test_get_batch_equals_items_in_order(tmp_path_factory, idx, max_open, compressed):
    folder = tmp_path_factory.mktemp("s") / ("zip" if compressed else "raw")
    write_shards(folder, [30, 30, 30, 10], compressed=compressed)
    ds = ShardedTokenDataset(folder, max_open_shards=max_open)
    batch = ds.get_batch(np.array(idx, np.int64))
    assert ids_of(batch) == idx
    for f in ("input_ids", "segment_ids"):
        assert batch[f].shape == (len(idx), 8) and batch[f].dtype == np.uint16
        want = np.stack([ds[i][f] for i in idx]) if idx else np.zeros((0, 8), np.uint16)
        np.testing.assert_array_equal(batch[f], want)
    assert ds.num_open_shards <= max_open


def test_a_batch_spread_over_many_shards_opens_each_shard_once(tmp_path):
    # rows interleave shards 0..3; with one open map, a row-by-row copy in batch order would
    # open a shard per row (8 opens); visiting rows shard by shard opens each touched shard once
    folder = write_shards(tmp_path / "raw", [30, 30, 30, 10])
    ds = ShardedTokenDataset(folder, max_open_shards=1)
    idx = [0, 30, 60, 90, 1, 31, 61, 91]
    assert ids_of(ds.get_batch(idx)) == idx
    assert ds.num_opens == 4


def test_compressed_shards_are_decompressed_whole_into_the_cache(tmp_path):
    folder = write_shards(tmp_path / "z", [5, 7], compressed=True)
    ds = ShardedTokenDataset(folder, max_open_shards=1)
    arr = ds.shard(1)["input_ids"]
    assert arr.base is None or not isinstance(arr.base, mmap.mmap)
    assert arr.shape == (7, 8)
    assert ids_of(ds.get_batch([11, 0, 6])) == [11, 0, 6]
    assert ds.num_open_shards == 1


def test_pickled_copy_reopens_lazily(shard_dir):
    ds = ShardedTokenDataset(shard_dir)
    ds.get_batch([1, 50])
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.num_open_shards == 0
    assert ids_of(copy.get_batch([99, 1])) == [99, 1]


def test_verify_checks_sha256(shard_dir):
    ShardedTokenDataset(shard_dir, verify=True)
    path = shard_dir / "shard_000002.npz"
    data = bytearray(path.read_bytes())
    data[read_members(path)["segment_ids"].offset + 3] ^= 0xFF  # a token: same size and headers
    path.write_bytes(bytes(data))
    ShardedTokenDataset(shard_dir)  # sizes and headers still match
    with pytest.raises(DataError, match=r"shard_000002.npz: sha256 .* does not match") as err:
        ShardedTokenDataset(shard_dir, verify=True)
    assert "\n" not in str(err.value)


def _edit_meta(folder, **changes):
    meta = json.loads((folder / "metadata.json").read_text())
    meta.update(changes)
    (folder / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("no_meta", r"metadata.json: missing"),
        ("missing_shard", r"1 shard\(s\) in metadata.json missing, first shard_000001.npz"),
        ("extra_shard", r"1 .npz file\(s\) not in metadata.json, first shard_000009.npz"),
        ("rows", r"shard_000000.npz: input_ids has 30 rows, metadata.json says 31"),
        ("seq_len", r"shard_000003.npz: input_ids has shape \[10, 4\], expected \[n, 8\]"),
        ("field", r"shard_000001.npz: missing field\(s\) \['segment_ids'\]"),
        ("meta_fields", r"lack \['segment_ids'\]: not token shards"),
        ("dtype", r"input_ids dtype uint16, metadata.json says uint32"),
        ("total", r"num_samples is 99, the shard list gives 100"),
        ("bad_zip", r"shard_000000.npz: not a readable .npz shard"),
    ],
)
def test_mismatch_is_one_clear_error(shard_dir, breakage, message):
    meta = json.loads((shard_dir / "metadata.json").read_text())
    if breakage == "no_meta":
        (shard_dir / "metadata.json").unlink()
    elif breakage == "missing_shard":
        (shard_dir / "shard_000001.npz").unlink()
    elif breakage == "extra_shard":
        (shard_dir / "shard_000009.npz").write_bytes(b"")
    elif breakage == "rows":
        meta["shards"][0]["num_samples"] = 31
        _edit_meta(shard_dir, shards=meta["shards"], shard_sizes=None, num_samples=101)
    elif breakage == "seq_len":
        write_shards(shard_dir / "other", [10], seq_len=4)
        (shard_dir / "other" / "shard_000000.npz").replace(shard_dir / "shard_000003.npz")
    elif breakage == "field":
        ids = sample_rows(30, 30, 8)["input_ids"]
        np.savez(shard_dir / "shard_000001.npz", input_ids=ids)
    elif breakage == "meta_fields":
        _edit_meta(shard_dir, fields=["input_ids"])
    elif breakage == "dtype":
        _edit_meta(shard_dir, field_dtypes={"input_ids": "uint32", "segment_ids": "uint16"})
    elif breakage == "total":
        _edit_meta(shard_dir, num_samples=99)
    elif breakage == "bad_zip":
        (shard_dir / "shard_000000.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match=message) as err:
        ShardedTokenDataset(shard_dir)
    assert "\n" not in str(err.value)


def test_reads_what_pipeline_shuffle_writes(tmp_path):
    """`pipeline shuffle` output (rebalanced, pre_shuffled) holds every sample once."""
    write_shards(tmp_path / "in", [13, 40, 7])
    shuffle_shards(tmp_path / "in", tmp_path / "out", 16, seed=2)
    ds = ShardedTokenDataset(tmp_path / "out", verify=True)
    assert ds.pre_shuffled and ds.shard_sizes == [16, 16, 16, 12]
    got = ds.get_batch(np.arange(len(ds)))
    assert sorted(ids_of(got)) == list(range(60))
    assert ids_of(got) != list(range(60))
    order = np.argsort(ids_of(got))
    np.testing.assert_array_equal(got["segment_ids"][order], sample_rows(0, 60, 8)["segment_ids"])


def test_reads_what_the_shard_stage_writes(tmp_path):
    from helpers import fake_tokenize, make_ctx, run_pack
    from pipeline.config import build_config
    from pipeline.stages.shard import ShardConfig
    from pipeline.stages.shard import run as shard_run

    lens = np.random.default_rng(4).integers(5, 60, 120).tolist()
    fake_tokenize(tmp_path, [lens[:60], lens[60:]], sources=["web"])
    run_pack(tmp_path, {"seq_len": 32, "sequences_per_part": 25})
    ctx = make_ctx(tmp_path, "shard", "pack", 1, seed=5)
    try:
        shard_run(build_config(ShardConfig, {"shard_size": 16, "eval_fraction": 0.1}, "shard"), ctx)
    finally:
        ctx.executor.close()
    for split in ("train", "eval"):
        folder = ctx.out_dir / split
        meta = json.loads((folder / "metadata.json").read_text())
        files = [np.load(folder / s["file"]) for s in meta["shards"]]
        ids, seg = (np.concatenate([f[k] for f in files]) for k in ("input_ids", "segment_ids"))
        ds = ShardedTokenDataset(folder, max_open_shards=1, verify=True)
        assert len(ds) == meta["num_samples"] == len(ids) > 0
        batch = ds.get_batch(np.arange(len(ds))[::-1])
        np.testing.assert_array_equal(batch["input_ids"], ids[::-1])
        np.testing.assert_array_equal(batch["segment_ids"], seg[::-1])
    assert ShardedTokenDataset(ctx.out_dir / "train").pre_shuffled
