"""BatchCache: hand-checked evictions per policy, opt >= every policy (property), copies, shared
memory between DataLoader workers."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.loader import ShardedTokenDataset
from pipeline.loader.cache import POLICIES, BatchCache, key_hash, normalize_key
from pipeline.loader.step import StepDataset

A, B, C, D = 1, 2, 3, 4
TRACE = [A, B, A, C, B, D, A]


def batch_of(key) -> dict[str, np.ndarray]:
    k = sum(normalize_key(key))
    return {"input_ids": np.full((2, 4), k, np.uint16), "segment_ids": np.ones((2, 4), np.uint16)}


def replay(cache: BatchCache, trace) -> list[set]:
    """Demand-fill `trace`; the cached key set after each access."""
    states = []
    for key in trace:
        got = cache.get(key)
        if got is None:
            cache.put(key, batch_of(key))
        else:
            assert got["input_ids"][0, 0] == sum(normalize_key(key))
        states.append({k[0] for k in cache.keys()} if not cache.shared else None)
    return states


def counts(cache: BatchCache) -> tuple[int, int, int]:
    s = cache.stats()
    return s["hits"], s["misses"], s["evictions"]


# Capacity 2, trace A B A C B D A (positions 0..6), demand fill:
#   lru : C evicts B (A used at 2), B evicts A, D evicts C, A evicts B -> 1 hit (pos 2)
#   fifo: C evicts A (oldest), B hits, D evicts B, A evicts C          -> 2 hits (pos 2, 4)
#   lfu : A has 2 uses; C evicts B, B evicts C, D evicts B, A hits     -> 2 hits (pos 2, 6)
#   opt : C is never used again -> not stored; D likewise; B and A hit -> 3 hits, 0 evictions
HAND = {
    "lru": ([{A}, {A, B}, {A, B}, {A, C}, {B, C}, {B, D}, {A, D}], (1, 6, 4)),
    "fifo": ([{A}, {A, B}, {A, B}, {B, C}, {B, C}, {C, D}, {A, D}], (2, 5, 3)),
    "lfu": ([{A}, {A, B}, {A, B}, {A, C}, {A, B}, {A, D}, {A, D}], (2, 5, 3)),
    "opt": ([{A}, {A, B}, {A, B}, {A, B}, {A, B}, {A, B}, {A, B}], (3, 4, 0)),
}


@pytest.mark.parametrize("policy", sorted(HAND))
def test_hand_checked_evictions(policy):
    cache = BatchCache(policy, 2, trace=TRACE if policy == "opt" else None)
    states, want = HAND[policy]
    assert replay(cache, TRACE) == states
    assert counts(cache) == want
    if policy == "opt":
        assert cache.stats()["bypasses"] == 2  # C and D were not stored


def test_rr_evicts_the_seeded_draw():
    """A, B fill slots 0 and 1; C's eviction takes slot default_rng([seed, 0]).integers(2)."""
    for seed in range(6):
        cache = BatchCache("rr", 2, seed=seed)
        replay(cache, [A, B, C])
        victim = [A, B][int(np.random.default_rng([seed, 0]).integers(2))]
        assert {k[0] for k in cache.keys()} == {A, B, C} - {victim}
    long = list(np.random.default_rng(0).integers(0, 6, 60))
    runs = [replay(BatchCache("rr", 3, seed=s), long) for s in (1, 1, 2)]
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_none_stores_nothing():
    cache = BatchCache("none", 0)
    replay(cache, TRACE)
    assert counts(cache) == (0, len(TRACE), 0) and len(cache) == 0


def test_opt_without_trace_is_lru_and_says_so_once(caplog):
    with caplog.at_level(logging.WARNING, logger="pipeline.loader"):
        cache = BatchCache("opt", 2)
        states = replay(cache, TRACE)
    assert states == HAND["lru"][0]
    assert sum("without an access trace" in r.message for r in caplog.records) == 1


@settings(max_examples=60, deadline=None)
@given(
    trace=st.lists(st.integers(0, 7), min_size=1, max_size=60),
    capacity=st.integers(1, 5),
    seed=st.integers(0, 3),
)
def test_opt_hits_at_least_every_policy(trace, capacity, seed):
    hits = {}
    for policy in POLICIES:
        cache = BatchCache(policy, 0 if policy == "none" else capacity, trace=trace, seed=seed)
        replay(cache, trace)
        hits[policy] = cache.hits
        assert cache.hits + cache.misses == len(trace)
    assert all(hits["opt"] >= h for h in hits.values()), hits


def test_hit_returns_a_copy():
    cache = BatchCache("lru", 2)
    original = batch_of(7)
    cache.put(7, original)
    original["input_ids"][:] = 0  # the caller's array changing does not reach the cache
    got = cache.get(7)
    got["input_ids"][:] = 99  # nor does a transform writing into a hit
    assert (cache.get(7)["input_ids"] == 7).all()


def test_local_cache_pickles_as_a_copy():
    cache = BatchCache("lfu", 2)
    cache.put(A, batch_of(A))
    other = pickle.loads(pickle.dumps(cache))  # what a spawned worker gets without shared=True
    assert other.get(A)["input_ids"][0, 0] == A and cache.hits == 0 and other.hits == 1
    other.put(B, batch_of(B))
    assert B in other and B not in cache


def test_keys_normalize():
    """A step, a tuple, a list and an array of the same ints are one key; order matters."""
    assert key_hash(5) == key_hash((5,)) == key_hash(np.array([5]))
    assert key_hash([1, 2, 3]) == key_hash(np.array([1, 2, 3], np.int32))
    assert key_hash((1, 2)) != key_hash((2, 1))
    cache = BatchCache("lru", 2)
    cache.put(np.array([3, 4]), batch_of((3, 4)))
    assert (3, 4) in cache and cache.stats()["accesses"] == 0  # `in` is not an access


def test_bad_arguments():
    with pytest.raises(ValueError, match="policy must be one of"):
        BatchCache("mru", 2)
    with pytest.raises(ValueError, match="max_batches must be > 0"):
        BatchCache("lru", 0)


# ---------------------------------------------------------------- shared memory


def test_shared_cache_is_one_cache_across_pickles():
    cache = BatchCache("fifo", 2, shared=True)
    try:
        other = pickle.loads(pickle.dumps(cache))  # what a spawned worker gets
        other.put(A, batch_of(A))
        assert cache.get(A)["input_ids"][0, 0] == A
        cache.put(B, batch_of(B))
        cache.put(C, batch_of(C))  # evicts A, the oldest
        assert A not in other and B in other and C in other
        assert cache.stats() == other.stats() and cache.evictions == 1
        cache.put(D, {"input_ids": np.zeros((3, 4), np.uint16)})  # another layout: not stored
        assert D not in cache
        with pytest.raises(ValueError, match="not available for a shared cache"):
            cache.keys()
    finally:
        cache.close()


def test_shared_cache_with_two_workers(shard_dir):
    torch = pytest.importorskip("torch")
    ds = ShardedTokenDataset(shard_dir)
    cache = BatchCache("lru", 16, shared=True)
    steps = StepDataset(ds, 4, seed=3, steps_per_sweep=12, cache=cache)
    plain = StepDataset(ds, 4, seed=3, steps_per_sweep=12)
    try:
        for epoch in range(2):
            order = steps.order(epoch)
            loader = torch.utils.data.DataLoader(
                steps, batch_size=None, sampler=order.tolist(), num_workers=2
            )
            for t, batch in zip(order, loader, strict=True):
                want = plain[int(t)]
                assert all(np.array_equal(batch[k].numpy(), want[k]) for k in want)
        # epoch 0 misses and stores all 12 steps (in both workers), epoch 1 hits all 12
        assert counts(cache) == (12, 12, 0) and len(cache) == 12
    finally:
        cache.close()


def test_only_the_creator_removes_the_shared_files():
    import os

    cache = BatchCache("lru", 2, shared=True)
    try:
        cache.put(A, batch_of(A))
        pid = os.fork()
        if pid == 0:  # a forked worker dropping its copy must not delete the parent's cache
            cache._finalizer()
            os._exit(0 if os.path.isdir(cache._dir) else 1)
        assert os.waitpid(pid, 0)[1] == 0
        assert cache.get(A)["input_ids"][0, 0] == A
    finally:
        cache.close()
    assert not os.path.exists(cache._dir)
