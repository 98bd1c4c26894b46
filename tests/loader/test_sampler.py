"""GlobalSampler: epoch orders, steps and ranks, padding, exact elastic resume, set_epoch,
owner_and_local_index, and the O(1)-memory Feistel bijection (docs/loader.md, lines 1-4)."""

from __future__ import annotations

import importlib.util
import json
import logging
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.conftest import write_shards
from pipeline.loader import GlobalSampler, ShardedTokenDataset, owner_and_local_index
from pipeline.loader import order as order_mod
from pipeline.loader.order import FeistelPermutation, epoch_order
from pipeline.permute import FEISTEL_ROUNDS

# the torch order is torch.randperm itself: without the torch extra it is left out (and skipped)
HAS_TORCH = importlib.util.find_spec("torch") is not None
ORDERS = ["global", "sequential", "shard_block"] + (["torch"] if HAS_TORCH else [])
FAST = settings(max_examples=40, deadline=None)


@contextmanager
def feistel(on: bool):
    """Force the O(1)-memory bijection for `global` (normally only above ARRAY_MAX_SAMPLES)."""
    with mock.patch.object(
        order_mod, "ARRAY_MAX_SAMPLES", 0 if on else order_mod.ARRAY_MAX_SAMPLES
    ):
        yield


def split_sizes(n: int, k: int) -> list[int]:
    """n samples in shards of k (the last one smaller)."""
    return [k] * (n // k) + ([n % k] if n % k else [])


def make(n, b, p=1, r=0, **kw):
    if kw.get("order") == "shard_block" and "shard_sizes" not in kw:
        kw["shard_sizes"] = split_sizes(n, 7)
    return GlobalSampler(n, b, world_size=p, rank=r, **kw)


def run_step(samplers):
    """One global step over all ranks: per-rank batches and the step's global sequence
    (offset g of the step belongs to rank g % P at local index g // P)."""
    batches = [s.advance() for s in samplers]
    if batches[0] is None:
        assert all(b is None for b in batches)
        return None, None
    p = len(samplers)
    assert len({len(b) for b in batches}) == 1  # every rank the same count: no DDP hang
    seq = np.empty(p * len(batches[0]), np.int64)
    for r, b in enumerate(batches):
        seq[r::p] = b
    for g in range(len(seq)):
        owner, local = owner_and_local_index(g, p)
        assert batches[owner][local] == seq[g]
    return batches, seq


# ---------------------------------------------------------------- worked examples


def test_worked_example_steps_ranks_and_padding():
    """N=11, P=2, B=2, sequential: steps take positions 0-3, 4-7, then the tail 8-10 padded by
    one wrapped position (0): rank 0 gets 0,2 | 4,6 | 8,10 and rank 1 gets 1,3 | 5,7 | 9,0."""
    got = [[b.tolist() for b in make(11, 2, 2, r, order="sequential")] for r in (0, 1)]
    assert got == [[[0, 2], [4, 6], [8, 10]], [[1, 3], [5, 7], [9, 0]]]
    s = make(11, 2, 2, 1, order="sequential")
    list(s)
    assert s.state_dict()["cursor"] == 11 and s.padded == 1
    dropped = make(11, 2, 2, 0, order="sequential", drop_last=True)
    assert [b.tolist() for b in dropped] == [[0, 2], [4, 6]] and dropped.padded == 0
    assert owner_and_local_index(10, 4) == (2, 2)


def test_owner_and_local_index_errors():
    with pytest.raises(ValueError, match="g must be >= 0"):
        owner_and_local_index(-1, 4)
    with pytest.raises(ValueError, match="world_size must be > 0"):
        owner_and_local_index(3, 0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_samples": 10, "batch_size": 0}, "batch_size must be an integer >= 1"),
        ({"num_samples": 10, "batch_size": 2, "rank": 2, "world_size": 2}, "rank must be <"),
        ({"num_samples": 10, "batch_size": 2, "order": "random"}, "order must be one of"),
        ({"num_samples": 10, "batch_size": 2, "order": "shard_block"}, "needs shard_sizes"),
        ({"num_samples": 10, "batch_size": 2, "shard_sizes": [4, 4]}, "sum to 8, not 10"),
        ({"num_samples": 10, "batch_size": 2, "seed": 2**64}, "fit in 64 bits"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GlobalSampler(**kwargs)


# ---------------------------------------------------------------- 1. epoch order


@FAST
@given(
    n=st.integers(0, 300),
    seed=st.integers(-(2**63), 2**64 - 1),
    epoch=st.integers(0, 2**40),
    order=st.sampled_from(ORDERS[:3]),
    use_feistel=st.booleans(),
    p=st.integers(1, 5),
    b=st.integers(1, 9),
)
def test_order_is_a_permutation_depending_only_on_seed_epoch_order_shards(
    n, seed, epoch, order, use_feistel, p, b
):
    kw = {"order": order, "seed": seed}
    with feistel(use_feistel):
        one, other = make(n, b, p, p - 1, **kw), make(n, 3, 1, 0, drop_last=True, **kw)
        for s in (one, other):
            s.set_epoch(epoch)
        pi = one.indices_at(np.arange(n))
        assert sorted(pi.tolist()) == list(range(n))
        np.testing.assert_array_equal(pi, other.indices_at(np.arange(n)))
        if order == "sequential":
            assert pi.tolist() == list(range(n))
        elif n >= 12:  # two epochs or two seeds agree with probability <= 1/12!
            other.set_epoch(epoch + 1)
            assert other.indices_at(np.arange(n)).tolist() != pi.tolist()
            reseeded = make(n, b, order=order, seed=(seed + 1) % 2**64)
            reseeded.set_epoch(epoch)
            assert reseeded.indices_at(np.arange(n)).tolist() != pi.tolist()


def test_epoch_stream_is_not_seed_plus_epoch():
    """seed 1 epoch 0 and seed 0 epoch 1 are different orders (they would coincide if the
    stream were keyed by seed + epoch); the torch order is, by definition, seed + epoch."""
    pytest.importorskip("torch")
    for order in ("global", "shard_block"):
        a, b = make(50, 5, order=order, seed=1), make(50, 5, order=order, seed=0)
        b.set_epoch(1)
        assert a.indices_at(np.arange(50)).tolist() != b.indices_at(np.arange(50)).tolist()
    a, b = make(50, 5, order="torch", seed=1), make(50, 5, order="torch", seed=0)
    b.set_epoch(1)
    assert a.indices_at(np.arange(50)).tolist() == b.indices_at(np.arange(50)).tolist()


@FAST
@given(
    sizes=st.lists(st.integers(1, 20), min_size=1, max_size=9),
    window=st.integers(1, 4),
    seed=st.integers(0, 2**64 - 1),
    epoch=st.integers(0, 100),
)
def test_shard_block_shuffles_shards_then_within_windows(sizes, window, seed, epoch):
    n = sum(sizes)
    s = GlobalSampler(n, 4, order="shard_block", shard_sizes=sizes, window_shards=window, seed=seed)
    s.set_epoch(epoch)
    pi = s.indices_at(np.arange(n))
    assert sorted(pi.tolist()) == list(range(n))
    shard_of = np.repeat(np.arange(len(sizes)), sizes)[pi]
    # consecutive windows: each covers whole shards, at most `window` of them, never split
    a = 0
    seen: set[int] = set()
    while a < n:
        shards, b = set(), a
        while b < n and (len(shards | {int(shard_of[b])}) <= window):
            shards.add(int(shard_of[b]))
            b += 1
        assert not shards & seen
        seen |= shards
        a = b
    assert seen == set(range(len(sizes)))


def test_shard_block_differs_every_epoch_and_stays_cache_friendly():
    sizes = [50] * 20
    s = GlobalSampler(1000, 10, order="shard_block", shard_sizes=sizes, seed=5, window_shards=2)
    orders = []
    for e in range(3):
        s.set_epoch(e)
        orders.append(s.indices_at(np.arange(1000)) // 50)
    assert len({tuple(o.tolist()) for o in orders}) == 3
    for shard_seq in orders:  # each block of 100 positions reads exactly 2 shards
        assert all(len(set(shard_seq[a : a + 100].tolist())) == 2 for a in range(0, 1000, 100))


@FAST
@given(
    n=st.integers(1, 200),
    seed=st.integers(0, 2**40),
    epoch=st.integers(0, 50),
    p=st.integers(1, 6),
    b=st.integers(1, 8),
)
def test_torch_order_equals_distributed_sampler(n, seed, epoch, p, b):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DistributedSampler

    g = torch.Generator()
    g.manual_seed(seed + epoch)
    expected = torch.randperm(n, generator=g).tolist()
    s = make(n, b, order="torch", seed=seed)
    s.set_epoch(epoch)
    assert s.indices_at(np.arange(n)).tolist() == expected
    for r in range(p):
        ds = DistributedSampler(range(n), num_replicas=p, rank=r, shuffle=True, seed=seed)
        ds.set_epoch(epoch)
        ours = make(n, b, p, r, order="torch", seed=seed)
        ours.set_epoch(epoch)
        assert np.concatenate(list(ours)).tolist() == list(ds)


def test_auto_reads_pre_shuffled_from_metadata(tmp_path):
    shuffled = ShardedTokenDataset(write_shards(tmp_path / "a", [6, 6], pre_shuffled=True))
    plain = ShardedTokenDataset(write_shards(tmp_path / "b", [6, 6]))
    assert GlobalSampler(shuffled, 2).order == "sequential"
    assert GlobalSampler(plain, 2).order == "global"
    assert GlobalSampler(12, 2).order == "global"
    sb = GlobalSampler(plain, 2, order="shard_block")
    assert sb.shard_sizes == [6, 6] and sb.num_samples == 12


# ---------------------------------------------------------------- Feistel bijection


@FAST
@given(n=st.integers(1, 5000), seed=st.integers(-(2**63), 2**64 - 1), epoch=st.integers(0, 9))
def test_feistel_is_a_bijection_for_any_n_and_64_bit_seed(n, seed, epoch):
    f = FeistelPermutation(n, seed, epoch)
    assert sorted(f(np.arange(n)).tolist()) == list(range(n))
    assert f.keys.nbytes == 8 * FEISTEL_ROUNDS  # its whole state: O(1) memory


def test_feistel_uniformity():
    """Over 3000 seeds, where sample 0 lands and what lands at position 0 are uniform on
    [0, 1000) (chi-square on 20 bins: 19 d.o.f., the 1e-6 quantile is ~ 61); inside one large
    permutation, position and value are uncorrelated (|Spearman rho| < 5/sqrt(N)) and the
    displacement |pi(i) - i| / N follows the uniform-permutation law 2(1 - x) (KS < 0.01)."""
    n, seeds = 1000, 3000
    first = np.array([FeistelPermutation(n, s)(np.arange(1))[0] for s in range(seeds)])
    land = np.array(
        [
            int(np.flatnonzero(FeistelPermutation(n, s)(np.arange(n)) == 0)[0])
            for s in range(0, seeds, 3)
        ]
    )
    for values in (first, land):
        counts = np.bincount(values * 20 // n, minlength=20)
        expected = len(values) / 20
        assert ((counts - expected) ** 2 / expected).sum() < 61
    big = 1 << 20 | 12345  # cycle walking in a 2^21 domain
    pi = FeistelPermutation(big, 2**63 + 11)(np.arange(big))
    rho = np.corrcoef(np.arange(big), pi)[0, 1]  # ranks of a permutation are the values
    assert abs(rho) < 5 / np.sqrt(big)
    d = np.sort(np.abs(pi - np.arange(big)) / big)
    cdf = 1 - (1 - d) ** 2
    assert np.abs(cdf - np.arange(1, big + 1) / big).max() < 0.01


def test_feistel_is_used_above_the_array_limit():
    small = epoch_order("global", 1000, 1, 0)
    assert not isinstance(small, FeistelPermutation)
    with feistel(True):
        assert isinstance(epoch_order("global", 1000, 1, 0), FeistelPermutation)
    huge = epoch_order("global", 10**12, 1, 0)  # 10^12 samples: no array could hold them
    assert isinstance(huge, FeistelPermutation)
    out = huge(np.array([0, 5, 10**12 - 1]))
    assert len(set(out.tolist())) == 3 and (out < 10**12).all()


# ---------------------------------------------------------------- 2. steps and ranks


@FAST
@given(
    n=st.integers(0, 120),
    p=st.integers(1, 6),
    b=st.integers(1, 9),
    order=st.sampled_from(ORDERS[:3]),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**64 - 1),
)
def test_steps_take_p_times_b_positions_from_the_cursor(n, p, b, order, drop_last, seed):
    samplers = [make(n, b, p, r, order=order, drop_last=drop_last, seed=seed) for r in range(p)]
    pi = samplers[0].indices_at(np.arange(n))
    seqs, steps = [], 0
    while True:
        cursor = samplers[0].cursor
        batches, seq = run_step(samplers)
        if batches is None:
            break
        steps += 1
        states = [s.state_dict() for s in samplers]
        assert all(st_ == states[0] for st_ in states)  # all ranks report the same state
        if cursor + p * b <= n:
            assert len(seq) == p * b and states[0]["cursor"] == cursor + p * b
            if cursor == 0:  # with c = 0 this is indices[rank::P], batched
                for r in range(p):
                    assert batches[r].tolist() == pi[: p * b][r::p].tolist()
        seqs.append(seq)
    assert steps == len(samplers[0]) and samplers[0].steps_left() == 0
    got = np.concatenate(seqs) if seqs else np.zeros(0, np.int64)
    full = n // (p * b) * p * b
    if drop_last:
        assert got.tolist() == pi[:full].tolist() and samplers[0].padded == 0
    else:
        pad = -n % p
        wrapped = np.resize(pi, pad).tolist() if n else []  # tiles when pad > N, like torch
        assert got.tolist() == pi.tolist() + wrapped and samplers[0].padded == pad


# ---------------------------------------------------------------- 3. exact elastic resume


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 150),
    seed=st.integers(-(2**63), 2**64 - 1),
    epoch=st.integers(0, 5),
    p=st.integers(1, 5),
    p2=st.integers(1, 5),
    b=st.integers(1, 8),
    b2=st.integers(1, 8),
    crash=st.integers(0, 40),
    order=st.sampled_from(ORDERS),
    use_feistel=st.booleans(),
    drop_last=st.booleans(),
)
def test_elastic_resume_equals_uninterrupted(
    n, seed, epoch, p, p2, b, b2, crash, order, use_feistel, drop_last
):
    if order == "torch":
        seed %= 2**62
    kw = {"order": order, "seed": seed, "drop_last": drop_last}
    with feistel(use_feistel):
        first = [make(n, b, p, r, **kw) for r in range(p)]
        for s in first:
            s.set_epoch(epoch)
        pi = first[0].indices_at(np.arange(n))
        before = []
        for _ in range(crash):
            _, seq = run_step(first)
            if seq is None:
                break
            before.append(seq)
        state = json.loads(json.dumps(first[0].state_dict()))  # survives a JSON checkpoint
        assert all(s.state_dict() == state for s in first)
        # resume: other world size, batch size, default seed and order (the state's win)
        sizes = split_sizes(n, 7)  # shard_block needs them; the state checks they match
        second = [make(n, b2, p2, r, drop_last=drop_last, shard_sizes=sizes) for r in range(p2)]
        for s in second:
            s.load_state_dict(state)
            s.set_epoch(epoch)  # the usual loop calls this again: it must keep the cursor
        assert second[0].cursor == state["cursor"]
        after = []
        while (seq := run_step(second)[1]) is not None:
            after.append(seq)
    got = np.concatenate(before + after).tolist() if before or after else []
    c = state["cursor"]
    pad = second[0].padded  # the state carries the padding of the step that took the tail
    real = len(got) - pad
    assert got[:real] == pi[:real].tolist()  # same global order
    assert got[real:] == np.resize(pi, pad).tolist()  # padding: the start of pi, wrapped
    assert len(set(got[:real])) == real  # none twice (padding aside)
    if drop_last:  # none lost: only a tail shorter than the resumed run's P'B' is dropped
        assert real == c + (n - c) // (p2 * b2) * (p2 * b2) and len(got) == real
    else:
        assert real == n and sorted(got[:real]) == list(range(n))


def test_state_is_json_and_rejects_another_dataset():
    s = make(20, 3, order="shard_block", seed=9)
    next(iter(s))
    state = s.state_dict()
    assert json.loads(json.dumps(state)) == state
    assert {"seed", "epoch", "order", "cursor"} <= set(state) and state["cursor"] == 3
    with pytest.raises(ValueError, match="state is for 20 samples, this sampler has 21"):
        make(21, 3).load_state_dict(state)
    with pytest.raises(ValueError, match="other shard sizes"):
        make(20, 3, shard_sizes=[10, 10]).load_state_dict(state)


# ---------------------------------------------------------------- 4. set_epoch contract


def test_second_pass_without_set_epoch_warns(caplog):
    s = make(10, 3, seed=1)
    with caplog.at_level(logging.WARNING, logger="pipeline.loader"):
        first = [b.tolist() for b in s]
        assert not caplog.records
        second = [b.tolist() for b in s]
    assert second == first
    assert len(caplog.records) == 1
    assert "same order every epoch" in caplog.records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipeline.loader"):
        s.set_epoch(1)
        third = [b.tolist() for b in s]
    assert not caplog.records and third != first


def test_resumed_at_the_end_of_an_epoch_yields_nothing_then_warns(caplog):
    s = make(10, 3)
    list(s)
    resumed = make(10, 3)
    resumed.load_state_dict(s.state_dict())
    with caplog.at_level(logging.WARNING, logger="pipeline.loader"):
        assert list(resumed) == []
        assert not caplog.records
        assert len(list(resumed)) == 4 and len(caplog.records) == 1
