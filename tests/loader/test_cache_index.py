"""The BatchCache index without scans (issue 28, defect 14) and its shared segments swept when
their owner is dead (defect 7): the hash table against a dict, every policy against the
reference scans the cache used before, a 10**8-batch cache that touches only what it holds,
and a SIGKILLed owner's /dev/shm folder removed by the next shared cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.loader.cache import (
    SEGMENT_PREFIX,
    BatchCache,
    _Future,
    _shm_root,
    key_hash,
    sweep_segments,
)
from pipeline.loader.cache_index import HashTable, table_size

from .test_cache import batch_of


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=200))
def test_hash_table_agrees_with_a_dict(ops):
    """16 cells, keys colliding on purpose (k1 = key % 5): clusters, wrap-around, deletions."""
    table, ref = HashTable(np.zeros((table_size(8), 3), np.int64)), {}
    for add, key in ops:
        h = (key % 5, key)
        if add and h not in ref and len(ref) < 8:
            table.add(h, key)
            ref[h] = key
        elif not add:
            table.remove(h)
            ref.pop(h, None)
        assert all(table.find((k % 5, k)) == ref.get((k % 5, k), -1) for k in range(41))


def reference_keys(policy: str, capacity: int, trace: list[int], seed: int) -> list[set]:
    """The cache before the index: every victim found by a scan over all slots."""
    slots: list[list] = []  # [key, used, inserted, freq]
    future = _Future(trace)
    clock = evictions = 0
    out = []
    for pos, key in enumerate(trace):
        clock += 1
        hit = next((s for s in slots if s[0] == key), None)
        if hit is not None:
            hit[1], hit[3] = clock, hit[3] + 1
        else:
            victim = None
            if len(slots) == capacity:
                if policy == "lru":
                    victim = min(range(capacity), key=lambda i: slots[i][1])
                elif policy == "fifo":
                    victim = min(range(capacity), key=lambda i: slots[i][2])
                elif policy == "lfu":
                    victim = min(range(capacity), key=lambda i: (slots[i][3], slots[i][1]))
                elif policy == "rr":
                    victim = int(np.random.default_rng([seed, evictions]).integers(capacity))
                else:
                    nxt = [future.next_use(key_hash(s[0]), pos + 1) for s in slots]
                    far = int(np.argmax(nxt))
                    new = future.next_use(key_hash(key), pos + 1)
                    victim = None if new >= nxt[far] else far
                if victim is None:
                    out.append({s[0] for s in slots})
                    continue
                evictions += 1
            clock += 1
            entry = [key, clock, clock, 1]
            if victim is None:
                slots.append(entry)
            else:
                slots[victim] = entry
        out.append({s[0] for s in slots})
    return out


@settings(max_examples=40, deadline=None)
@given(
    trace=st.lists(st.integers(0, 9), min_size=1, max_size=80),
    capacity=st.integers(1, 6),
    seed=st.integers(0, 3),
    policy=st.sampled_from(["lru", "fifo", "lfu", "rr", "opt"]),
)
def test_every_policy_evicts_what_the_scans_evicted(trace, capacity, seed, policy):
    cache = BatchCache(policy, capacity, trace=trace if policy == "opt" else None, seed=seed)
    got = []
    for key in trace:
        if cache.get(key) is None:
            cache.put(key, batch_of(key))
        got.append({k[0] for k in cache.keys()})
    assert got == reference_keys(policy, capacity, trace, seed)


@pytest.mark.parametrize("policy", ["lru", "lfu", "opt"])
def test_a_10e8_batch_cache_holds_only_what_it_stores(policy):
    """`bench --cache-batches 10**8` took 80 s for 20 steps: every get/put scanned 10**8 slots.
    Now the in-process arrays grow with the slots filled (no 10**8 row array exists)."""
    trace = [i % 7 for i in range(40)]
    cache = BatchCache(policy, 10**8, trace=trace)
    for key in trace:
        if cache.get(key) is None:
            cache.put(key, batch_of(key))
    assert cache.stats()["hits"] == 33 and len(cache) == 7
    assert len(cache._slots) <= 1024 and cache._slots.nbytes < 1 << 20


def test_a_shared_10e8_batch_cache_is_sparse():
    cache = BatchCache("lru", 10**8, shared=True)
    try:
        for key in range(20):
            cache.put(key, batch_of(key))
        assert all(cache.get(k) is not None for k in range(20)) and len(cache) == 20
        index = os.path.join(cache._dir, "index")
        assert os.path.getsize(index) > 10**8 * 8  # the layout's address space ...
        assert os.stat(index).st_blocks * 512 < 8 << 20  # ... of which only touched pages exist
    finally:
        cache.close()


_OWNER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from pipeline.loader.cache import BatchCache
    cache = BatchCache("lru", 4, shared=True)
    cache.put(1, {"input_ids": np.ones((64, 1024), np.uint16)})
    print(cache._dir, flush=True)
    time.sleep(60)
    """
)


def test_a_sigkilled_owners_segment_is_swept_by_the_next_cache():
    """The issue's leak: 33 MB of /dev/shm per kill, never removed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, env=env)
    try:
        folder = proc.stdout.readline().decode().strip()
        assert os.path.basename(folder).startswith(f"{SEGMENT_PREFIX}{proc.pid}-")
        assert os.path.isfile(os.path.join(folder, "data"))
        assert os.path.basename(folder) not in sweep_segments(_shm_root())  # owner alive
        assert os.path.isdir(folder)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert os.path.isdir(folder)  # no finalizer ran
    mine = BatchCache("lru", 2, shared=True)  # creating a shared cache sweeps dead owners'
    try:
        assert not os.path.exists(folder)
        assert os.path.isdir(mine._dir)  # its own, live, stays
        assert os.path.basename(folder) not in sweep_segments(_shm_root())
    finally:
        mine.close()
