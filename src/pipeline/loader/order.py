"""Epoch orders: π_e maps a position in [0, N) to a global sample index, as a pure function of
(order, N, seed, epoch, shard sizes). Nothing here knows about ranks, batches or cursors.

- `global`: a uniform permutation. An array (numpy PCG64 shuffle of an int32 range: 4 B/sample)
  for N <= ARRAY_MAX_SAMPLES; above, a keyed Feistel bijection with
  cycle walking (O(1) memory, any N, any 64-bit seed) evaluated only at the positions asked for.
- `sequential`: the identity (for shards that were shuffled when written).
- `shard_block`: shards in a seeded order, samples shuffled inside windows of `window_shards`
  consecutive shards of that order; only the windows in use are materialised.
- `torch`: torch.randperm seeded with seed + epoch, exactly DistributedSampler's order.

Streams are keyed by the *pair* (seed, epoch) through SeedSequence, never by seed + epoch (except
`torch`, which must match torch): with seed + epoch, run seed=1 epoch 0 would replay run seed=0
epoch 1, so two "independent" runs would share all but one epoch of data order.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from pipeline.permute import FeistelPermutation, key_stream

ARRAY_MAX_SAMPLES = 1 << 22  # above: Feistel (16 MiB of int32 permutation per rank at the limit)
ORDERS = ("global", "sequential", "shard_block", "torch")

Order = Callable[[np.ndarray], np.ndarray]  # int64 positions -> int64 global sample indices


def rng_for(seed: int, epoch: int, tag: str, *extra: int) -> np.random.Generator:
    """A PCG64 generator for (seed, epoch, what it is for, ...)."""
    return np.random.Generator(np.random.PCG64(key_stream(seed, epoch, tag, *extra)))


def _index_dtype(n: int) -> type:
    return np.int32 if n < 2**31 else np.int64


# ---------------------------------------------------------------- orders


def _array_order(perm: np.ndarray) -> Order:
    return lambda pos: perm[pos].astype(np.int64)


def global_order(n: int, seed: int, epoch: int) -> Order:
    if n <= ARRAY_MAX_SAMPLES:
        perm = np.arange(n, dtype=_index_dtype(n))  # int32: 4 B/sample, no int64 copy
        rng_for(seed, epoch, "global").shuffle(perm)
        return _array_order(perm)
    return FeistelPermutation(n, seed, epoch)


def torch_order(n: int, seed: int, epoch: int) -> Order:
    import torch  # only this order needs torch

    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return _array_order(torch.randperm(n, generator=g).numpy())


class ShardBlockOrder:
    """Shards in a seeded order; window w = shards [w*W, (w+1)*W) of it, its samples shuffled
    with their own stream. Memory: O(shards) + the (at most 2) windows last used."""

    def __init__(self, shard_sizes: list[int], seed: int, epoch: int, window_shards: int):
        sizes = np.asarray(shard_sizes, np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)])  # of each shard, global index
        self.seed, self.epoch = seed, epoch
        shard_order = rng_for(seed, epoch, "shard_block").permutation(len(sizes))
        self.windows = [
            shard_order[a : a + window_shards] for a in range(0, len(sizes), window_shards)
        ]
        self.window_starts = np.cumsum([0, *(int(sizes[w].sum()) for w in self.windows)])
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()

    def window(self, w: int) -> np.ndarray:
        """Global indices of window w in their shuffled order."""
        if w in self._cache:
            self._cache.move_to_end(w)
            return self._cache[w]
        members = np.concatenate(
            [np.arange(self.starts[s], self.starts[s + 1]) for s in self.windows[w]]
        )
        members = members.astype(_index_dtype(int(self.starts[-1])))
        members = members[
            rng_for(self.seed, self.epoch, "shard_window", w).permutation(len(members))
        ]
        self._cache[w] = members
        if len(self._cache) > 2:
            self._cache.popitem(last=False)
        return members

    def __call__(self, pos: np.ndarray) -> np.ndarray:
        pos = np.asarray(pos, np.int64)
        win = np.searchsorted(self.window_starts, pos, side="right") - 1
        out = np.empty(len(pos), np.int64)
        for w in np.unique(win):
            sel = win == w
            out[sel] = self.window(int(w))[pos[sel] - self.window_starts[w]]
        return out


def epoch_order(
    order: str,
    n: int,
    seed: int,
    epoch: int,
    shard_sizes: list[int] | None = None,
    window_shards: int = 2,
) -> Order:
    """π_e for a resolved order name ('auto' is resolved by the sampler)."""
    if order == "sequential" or n == 0:
        return lambda pos: np.asarray(pos, np.int64)
    if order == "global":
        return global_order(n, seed, epoch)
    if order == "torch":
        return torch_order(n, seed, epoch)
    if order == "shard_block":
        if shard_sizes is None:
            raise ValueError("order='shard_block' needs shard_sizes")
        return ShardBlockOrder(shard_sizes, seed, epoch, window_shards)
    raise ValueError(f"order must be one of {('auto', *ORDERS)}, got {order!r}")


def sizes_fingerprint(shard_sizes: list[int] | None) -> str | None:
    """Short digest of the shard sizes, kept in a sampler state (shard_block depends on them)."""
    if shard_sizes is None:
        return None
    text = ",".join(str(int(s)) for s in shard_sizes)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
