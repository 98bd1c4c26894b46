"""GlobalSampler: one global cursor over the epoch order, shared by every rank.

A global step consumes P·B positions of π_e from the cursor c; rank r takes positions
c + r + kP (k < B). The state is {seed, epoch, order, cursor, ...}: the same on every rank after
the same steps, and loadable with another world size, rank or batch size (exact elastic resume,
no replay). Semantics and guarantees: docs/loader.md. numpy only (the `torch` order imports
torch when used).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from pipeline.loader.order import ORDERS, epoch_order, sizes_fingerprint
from pipeline.loader.schema import StateError, check_sampler_state

log = logging.getLogger("pipeline.loader")
STATE_VERSION = 1
BLOCK_STEPS = 64  # full steps whose indices are computed together (64 x B int64 per rank)


def owner_and_local_index(g: int, world_size: int) -> tuple[int, int]:
    """(rank, index inside that rank's batch) of offset g inside a global step:
    (g % world_size, g // world_size); owner_and_local_index(10, 4) == (2, 2)."""
    g, world_size = int(g), int(world_size)
    if g < 0:
        raise ValueError(f"g must be >= 0, got {g}")
    if world_size <= 0:
        raise ValueError(f"world_size must be > 0, got {world_size}")
    return g % world_size, g // world_size


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_seed(seed: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not -(2**63) <= int(seed) < 2**64:
        raise ValueError(f"seed must fit in 64 bits, got {seed}")


def _unpack_dataset(num_samples: Any, shard_sizes: list[int] | None) -> tuple[Any, Any, bool]:
    """(N, shard sizes, pre_shuffled) from an int or from a dataset and its metadata."""
    if not hasattr(num_samples, "metadata"):
        return num_samples, shard_sizes, False
    ds = num_samples
    if shard_sizes is None:
        shard_sizes = list(getattr(ds, "shard_sizes", None) or []) or None
    return len(ds), shard_sizes, bool(ds.metadata.get("pre_shuffled", False))


def dataset_split(ds: Any) -> str:
    """'eval' for an eval shard folder (metadata `split: eval`, or a folder named eval), else
    'train'; an int N is 'train'."""
    meta = getattr(ds, "metadata", None)
    if not isinstance(meta, dict):
        return "train"
    if meta.get("split") in ("train", "eval"):
        return meta["split"]
    path = getattr(ds, "path", None)
    return (
        "eval"
        if path is not None and str(path).rstrip("/").rsplit("/", 1)[-1] == "eval"
        else "train"
    )


def _resolve_order(order: str, pre_shuffled: bool, shard_sizes: Any, n: int) -> str:
    """`auto` -> sequential for pre-shuffled shards and eval splits, else global; checks what
    the order needs."""
    if order == "auto":
        order = "sequential" if pre_shuffled else "global"
    if order not in ORDERS:
        raise ValueError(f"order must be one of {('auto', *ORDERS)}, got {order!r}")
    if shard_sizes is not None and sum(int(s) for s in shard_sizes) != n:
        raise ValueError(f"shard_sizes sum to {sum(shard_sizes)}, not {n}")
    if order == "shard_block" and shard_sizes is None:
        raise ValueError(
            "order='shard_block' needs shard_sizes: pass the dataset as num_samples "
            "or shard_sizes=ds.shard_sizes"
        )
    return order


class GlobalSampler:
    """This rank's batches (np.ndarray of global sample indices, int64) for one epoch.

    `num_samples` is N, or a ShardedTokenDataset: then `auto` is `sequential` for pre-shuffled
    shards (metadata `pre_shuffled`) and for an eval split (metadata `split: eval`, or a folder
    named eval: eval reads in order), else `global`; `shard_sizes` default to its shards.
    Iterating resumes at the cursor; a pass that starts at the end of the epoch starts the
    epoch again (with a warning: call set_epoch).
    """

    def __init__(
        self,
        num_samples: Any,
        batch_size: int,
        *,
        seed: int = 0,
        world_size: int = 1,
        rank: int = 0,
        order: str = "auto",
        drop_last: bool = False,
        shard_sizes: list[int] | None = None,
        window_shards: int = 2,
    ):
        self.split = dataset_split(num_samples)  # eval: read in order, as the pre-shuffle plan says
        num_samples, shard_sizes, pre_shuffled = _unpack_dataset(num_samples, shard_sizes)
        self.num_samples = _check_int("num_samples", num_samples, 0)
        self.batch_size = _check_int("batch_size", batch_size, 1)
        self.world_size = _check_int("world_size", world_size, 1)
        self.rank = _check_int("rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(f"rank must be < world_size {self.world_size}, got {rank}")
        _check_seed(seed)
        self.window_shards = _check_int("window_shards", window_shards, 1)
        in_order = pre_shuffled or self.split == "eval"
        order = _resolve_order(order, in_order, shard_sizes, self.num_samples)
        self.order = order
        self.drop_last = bool(drop_last)
        self.shard_sizes = None if shard_sizes is None else [int(s) for s in shard_sizes]
        self.seed = int(seed)
        self.epoch = 0
        self.cursor = 0  # global positions of π_e consumed this epoch
        self.padded = 0  # positions added by wrapping this epoch (the last step's padding)
        self._passed = False  # a pass over this epoch ran to its end in this process
        self._order_fn, self._block = None, None

    # ------------------------------------------------------------ epoch and order

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` from its beginning; the current epoch again keeps the cursor (so a
        resumed run that calls set_epoch(state's epoch) continues where it stopped)."""
        epoch = _check_int("epoch", epoch, 0)
        if epoch != self.epoch:
            self.epoch, self.cursor, self.padded, self._passed = epoch, 0, 0, False
            self._order_fn, self._block = None, None

    def indices_at(self, positions: np.ndarray) -> np.ndarray:
        """π_e at the given positions (int64, each in [0, N))."""
        if self._order_fn is None:
            self._order_fn = epoch_order(
                self.order,
                self.num_samples,
                self.seed,
                self.epoch,
                self.shard_sizes,
                self.window_shards,
            )
        return self._order_fn(np.asarray(positions, np.int64))

    # ------------------------------------------------------------ steps

    @property
    def global_batch_size(self) -> int:
        return self.world_size * self.batch_size

    def step_size(self, cursor: int) -> tuple[int, int]:
        """(positions consumed, padding) of the step starting at `cursor`; (0, 0) at the end."""
        left = self.num_samples - cursor
        gb = self.global_batch_size
        if left >= gb:
            return gb, 0
        if left <= 0 or self.drop_last:
            return 0, 0
        return left, -left % self.world_size

    def at_end(self) -> bool:
        return self.step_size(self.cursor)[0] == 0

    def steps_left(self) -> int:
        """Steps from the cursor to the end of the epoch with this world size and batch size."""
        left = max(self.num_samples - self.cursor, 0)
        full, tail = divmod(left, self.global_batch_size)
        return full + int(tail > 0 and not self.drop_last)

    def __len__(self) -> int:
        """Steps in a whole epoch (as torch's samplers report), not the steps left."""
        full, tail = divmod(self.num_samples, self.global_batch_size)
        return full + int(tail > 0 and not self.drop_last)

    def rank_positions(self, cursor: int, take: int, pad: int) -> np.ndarray:
        """Positions of this rank in the step at `cursor`: c + r + kP, padding wrapped to the
        start of π_e (tiled when the padding exceeds N, as torch's DistributedSampler does)."""
        k = (take + pad) // self.world_size
        pos = cursor + self.rank + self.world_size * np.arange(k, dtype=np.int64)
        over = pos >= self.num_samples
        pos[over] = (pos[over] - self.num_samples) % self.num_samples
        return pos

    def _full_step(self, cursor: int) -> np.ndarray:
        """This rank's indices of the full step at `cursor`, evaluated for up to BLOCK_STEPS
        steps at once: one order call per block (a Feistel call costs ~0.2 ms whatever its size)."""
        gb = self.global_batch_size
        block = self._block
        if (
            block is None
            or not 0 <= (cursor - block[0]) // gb < len(block[1])
            or (cursor - block[0]) % gb
        ):
            steps = min(BLOCK_STEPS, (self.num_samples - cursor) // gb)
            first = cursor + self.rank + self.world_size * np.arange(self.batch_size)
            pos = first[None, :] + gb * np.arange(steps)[:, None]
            block = self._block = (cursor, self.indices_at(pos.reshape(-1)).reshape(steps, -1))
        return block[1][(cursor - block[0]) // gb]

    def advance(self) -> np.ndarray | None:
        """This rank's next batch and the cursor moved past the step; None at the epoch's end."""
        take, pad = self.step_size(self.cursor)
        if take == 0:
            return None
        if take == self.global_batch_size:
            idx = self._full_step(self.cursor)
        else:
            idx = self.indices_at(self.rank_positions(self.cursor, take, pad))
        self.cursor += take
        self.padded += pad
        return idx

    def begin_pass(self) -> None:
        """What iterating does first: a pass that starts at the end of an epoch already run
        through in this process starts that epoch again, with a warning (same order)."""
        if self.at_end() and self._passed:
            log.warning(
                "GlobalSampler: a new pass over epoch %d without set_epoch(new epoch): it "
                "repeats the same order every epoch; call sampler.set_epoch(epoch) before each",
                self.epoch,
            )
            self.cursor, self.padded, self._passed = 0, 0, False

    def __iter__(self) -> Iterator[np.ndarray]:
        self.begin_pass()  # now, not at the first next(): a loader reads the start state
        return self._steps()

    def _steps(self) -> Iterator[np.ndarray]:
        while (idx := self.advance()) is not None:
            yield idx
        self._passed = True

    # ------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable; the same on every rank after the same steps."""
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "epoch": self.epoch,
            "order": self.order,
            "cursor": self.cursor,
            "padded": self.padded,
            "num_samples": self.num_samples,
            "window_shards": self.window_shards,
            "shard_sizes_sha256": sizes_fingerprint(self.shard_sizes),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at the state's cursor, in O(1); this sampler's world size, rank, batch size
        and drop_last stay. seed, epoch and order come from the state."""
        check_sampler_state(state, self.num_samples, ORDERS)  # every field, before any is used
        if state["order"] == "shard_block":
            if state.get("shard_sizes_sha256") != sizes_fingerprint(self.shard_sizes):
                raise StateError("sampler state", "is for other shard sizes (order shard_block)")
            self.window_shards = int(state.get("window_shards", self.window_shards))
        cursor = int(state["cursor"])
        self.seed, self.order = int(state["seed"]), state["order"]
        self.epoch = _check_int("epoch", state["epoch"], 0)
        self.cursor, self.padded = cursor, int(state.get("padded", 0))
        self._passed = False
        self._order_fn, self._block = None, None

    def __repr__(self) -> str:
        return (
            f"GlobalSampler(N={self.num_samples}, B={self.batch_size}, P={self.world_size}, "
            f"rank={self.rank}, order={self.order!r}, epoch={self.epoch}, cursor={self.cursor})"
        )
