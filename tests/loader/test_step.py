"""StepDataset: step t's batch is a function of (seed, t) alone; sweeps, truncation, orders."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.loader import ShardedTokenDataset
from pipeline.loader.cache import BatchCache
from pipeline.loader.step import StepDataset, fetch_batch
from pipeline.loader.transforms import get_preset

from .conftest import ids_of


@pytest.fixture
def ds(shard_dir):
    return ShardedTokenDataset(shard_dir)  # 100 samples, shards 30 30 30 10, seq_len 8


def test_lengths(ds):
    assert len(StepDataset(ds, 8, seed=0)) == 12  # 100 // 8
    assert len(StepDataset(ds, 8, seed=0, steps_per_sweep=40)) == 40
    assert len(StepDataset(ds, 8, seed=0, max_steps=5)) == 12  # a cap on the total, not a sweep
    assert len(StepDataset(ds, 8, seed=0, steps_per_sweep=3, max_steps=5)) == 3
    assert len(StepDataset(ds, 500, seed=0)) == 1  # B > N still gives one step
    with pytest.raises(IndexError, match="out of range"):
        StepDataset(ds, 8, seed=0)[12]


def test_step_is_a_function_of_seed_and_step(ds):
    a = StepDataset(ds, 8, seed=5, steps_per_sweep=50)
    b = StepDataset(ds, 8, seed=5, steps_per_sweep=20, max_steps=10)  # other sweep, same steps
    for t in (9, 3, 0, 7):  # any access order
        assert np.array_equal(a.indices(t), b.indices(t))
        assert ids_of(a[t]) == a.indices(t).tolist()  # sample g has input_ids[0] == g
    assert not np.array_equal(a.indices(3), StepDataset(ds, 8, seed=6).indices(3))
    draws = np.concatenate([a.indices(t) for t in range(50)])
    assert draws.min() >= 0 and draws.max() < 100
    # with replacement: 400 draws of 100 samples repeat; uniform: every decile is hit
    assert len(set(draws.tolist())) < len(draws)
    assert np.bincount(draws // 10, minlength=10).min() > 20


def test_cache_and_augment_do_not_change_the_base(ds):
    plain = StepDataset(ds, 4, seed=1)
    cache = BatchCache("lru", 4)
    cached = StepDataset(ds, 4, seed=1, cache=cache)
    for t in [0, 1, 0, 2, 1, 0]:
        assert ids_of(cached[t]) == ids_of(plain[t])
    assert cache.stats()["hits"] == 3
    aug = StepDataset(ds, 4, seed=1, cache=BatchCache("lru", 4),
                      augment=get_preset("baseline_plus").augment(pad_id=0))  # fmt: skip
    views = []
    for epoch in (0, 1, 0):
        aug.set_epoch(epoch)
        views.append(aug[2]["input_ids"])
    assert np.array_equal(views[0], views[2])  # epoch 0 again: the same view, from the cache
    assert not np.array_equal(views[0], views[1])  # a new epoch, a new view of one base batch
    assert aug.cache.stats()["hits"] == 2


def test_orders_and_trace(ds):
    steps = StepDataset(ds, 8, seed=2)
    o0, o1 = steps.order(0), steps.order(1)
    assert sorted(o0.tolist()) == list(range(12)) and not np.array_equal(o0, o1)
    assert np.array_equal(steps.order(0, shuffle=False), np.arange(12))
    assert steps.trace(2) == o0.tolist() + o1.tolist()


def test_fetch_batch_keys_by_indices(ds):
    cache = BatchCache("fifo", 2)
    idx = np.array([3, 40, 99])
    a = fetch_batch(ds.get_batch, idx, cache=cache)
    b = fetch_batch(ds.get_batch, idx.copy(), cache=cache)
    assert ids_of(a) == ids_of(b) == [3, 40, 99]
    assert (cache.hits, cache.misses) == (1, 1)


def test_bad_arguments(ds):
    with pytest.raises(ValueError, match="batch_size must be > 0"):
        StepDataset(ds, 0, seed=0)
    with pytest.raises(ValueError, match="must be >= 0"):
        StepDataset(ds, 4, seed=0, max_steps=-1)


def test_max_steps_caps_the_total_over_sweeps(ds):
    """steps_per_sweep 4, max_steps 10: sweeps of 4, 4, 2, then nothing (10 optimizer steps in
    all); each capped order is the prefix of the uncapped sweep's permutation."""
    capped = StepDataset(ds, 8, seed=2, steps_per_sweep=4, max_steps=10)
    free = StepDataset(ds, 8, seed=2, steps_per_sweep=4)
    assert [len(capped.order(e)) for e in range(5)] == [4, 4, 2, 0, 0]
    assert capped.num_sweeps == 3 and free.num_sweeps is None
    assert capped.order(2).tolist() == free.order(2)[:2].tolist()
    assert len(capped.trace(10)) == 10 and len(free.trace(10)) == 40
    assert capped.order(1, shuffle=False).tolist() == [0, 1, 2, 3]
    short = StepDataset(ds, 8, seed=2, max_steps=5)  # cap below one sweep (12 steps)
    assert [len(short.order(e)) for e in range(2)] == [5, 0]


def test_eval_split_is_never_augmented(tmp_path):
    from .conftest import write_shards

    ev = ShardedTokenDataset(write_shards(tmp_path / "eval", [20]))
    aug = get_preset("baseline_plus").augment(pad_id=0)
    with pytest.raises(ValueError, match="eval data is never augmented"):
        StepDataset(ev, 4, seed=0, augment=aug)
    assert len(StepDataset(ev, 4, seed=0)) == 5  # plain steps over eval are fine
