"""IterableTokenShards: rank x worker split (each sample once), equal counts per rank, a seeded
index-only shuffle buffer that checkpoints and resumes exactly (docs/loader.md, line 6)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")  # the module under test is the torch adapter

from torch.utils.data import DataLoader  # noqa: E402

from loader.conftest import write_shards  # noqa: E402
from pipeline.loader import IterableTokenShards  # noqa: E402
from pipeline.loader.stream import ShuffleBuffer, worker_stream  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_shards(tmp_path_factory.mktemp("it") / "train", [20, 20, 20, 12])  # N = 72


def run(ds, workers, batch, stop=None):
    """Batches (lists of sample indices) of a tracked DataLoader; stop after `stop` batches."""
    loader = DataLoader(ds, batch_size=batch, num_workers=workers)
    out = []
    for b in ds.track(loader):
        np.testing.assert_array_equal(b["input_ids"][:, 0].numpy(), b["index"].numpy())
        out.append(b["index"].tolist())
        if stop is not None and len(out) == stop:
            break
    return out


def test_two_ranks_two_workers_read_each_sample_once(folder):
    per_rank = []
    for rank in range(2):
        ds = IterableTokenShards(folder, seed=4, world_size=2, rank=rank, shuffle_buffer=8)
        batches = run(ds, workers=2, batch=5)
        per_rank.append([i for b in batches for i in b])
    assert len(per_rank[0]) == len(per_rank[1]) == 36
    assert sorted(per_rank[0] + per_rank[1]) == list(range(72))


def test_tail_is_padded_so_ranks_get_equal_counts(folder):
    """72 samples on 5 ranks: 15 each (ceil), 3 positions wrapped to the start."""
    seen = Counter()
    counts = []
    for rank in range(5):
        ds = IterableTokenShards(folder, seed=1, world_size=5, rank=rank, shuffle_buffer=4)
        got = [i for b in run(ds, workers=2, batch=4) for i in b]
        counts.append(len(got))
        seen.update(got)
    assert counts == [15] * 5 and set(seen) == set(range(72))
    assert sum(c - 1 for c in seen.values()) == 3


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 200),
    size=st.integers(0, 30),
    seed=st.integers(0, 2**64 - 1),
    stop=st.integers(0, 250),
)
def test_shuffle_buffer_is_a_bounded_permutation_and_resumes_exactly(n, size, seed, stop):
    inputs = np.arange(n) * 3
    full = list(ShuffleBuffer(inputs, size, seed, 0))
    assert sorted(full) == inputs.tolist()
    for j, x in enumerate(full):  # output j holds an input read before position j + size
        assert x // 3 < j + max(size, 1)
    if size <= 1:
        assert full == inputs.tolist()
    a = ShuffleBuffer(inputs, size, seed, 0)
    head = [next(a) for _ in range(min(stop, n))]
    state = json.loads(json.dumps(a.state_dict()))
    assert len(state["buffer"]) <= max(size, 1)  # the checkpoint holds indices only
    b = ShuffleBuffer(inputs, size, seed, 0)
    b.load_state_dict(state)
    assert head + list(b) == full


def test_streams_are_seeded_per_epoch():
    a = list(worker_stream([30, 30], 5, 0, 1, 0, 1, 0, 10))
    b = list(worker_stream([30, 30], 5, 1, 1, 0, 1, 0, 10))
    assert sorted(a) == sorted(b) == list(range(60)) and a != b
    assert a == list(worker_stream([30, 30], 5, 0, 1, 0, 1, 0, 10))


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 workers on 2 cores
@pytest.mark.parametrize("workers, batch, stop", [(2, 4, 3), (2, 5, 6), (0, 4, 5), (3, 2, 1)])
def test_kill_and_resume_is_exact(folder, workers, batch, stop):
    make = lambda: IterableTokenShards(folder, seed=9, world_size=2, rank=1, shuffle_buffer=6)  # noqa: E731
    full = run(make(), workers, batch)
    killed = make()
    head = run(killed, workers, batch, stop=stop)
    state = json.loads(json.dumps(killed.state_dict()))
    resumed = make()
    resumed.load_state_dict(state)
    assert head + run(resumed, workers, batch) == full
    assert len({i for b in full for i in b}) == 36


def test_state_mismatch_and_new_pass_warning(folder, caplog):
    ds = IterableTokenShards(folder, seed=0, world_size=2, rank=0, shuffle_buffer=3)
    first = run(ds, 2, 8)
    with caplog.at_level("WARNING", logger="pipeline.loader"):
        assert run(ds, 2, 8) == first
    assert "same order every epoch" in caplog.text
    ds.set_epoch(1)
    assert run(ds, 2, 8) != first
    run(ds, 2, 8, stop=1)  # a pass stopped midway: its state is for 2 worker streams
    with pytest.raises(ValueError, match="for 2 DataLoader worker.*has 1: resume with the same"):
        next(ds.track(DataLoader(ds, batch_size=2, num_workers=0)))
    other = IterableTokenShards(folder, seed=0, world_size=3, rank=0)
    with pytest.raises(ValueError, match="world_size=2, this dataset 3"):
        other.load_state_dict(ds.state_dict())
