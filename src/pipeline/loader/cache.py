"""BatchCache: a cache of base batches (before any transform) keyed by the batch key (a step, or
the tuple of sample indices), with the eviction policies none / lru / fifo / lfu / rr / opt.

`opt` is Belady's MIN: the sample order is a pure function of (seed, epoch, cursor), so the
future access trace is known and the entry used farthest in the future can be evicted (or the
new batch not stored at all when it is the one used last). `shared=True` puts the slots and
their index in files under /dev/shm so DataLoader workers share one cache. Not here: what a
batch is (the dataset) or what happens to it after (transforms).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import mmap
import os
import shutil
import tempfile
import weakref
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("pipeline.loader")

POLICIES = ("none", "lru", "fifo", "lfu", "rr", "opt")
Batch = dict[str, np.ndarray]

# header slots (int64) of the index; the rest of the header page holds the batch layout as JSON
_H_SLOT_BYTES, _H_CLOCK, _H_HITS, _H_MISSES, _H_EVICT, _H_BYPASS, _H_POS, _H_LAYOUT = range(8)
_HEADER_INTS = 16
_LAYOUT_BYTES = 4096 - 8 * _HEADER_INTS
# per-slot metadata columns (int64)
_VALID, _K1, _K2, _USED, _INSERTED, _FREQ = range(6)
_SLOT_COLS = 6
_NEVER = np.iinfo(np.int64).max


def normalize_key(key: Hashable | np.ndarray) -> tuple[int, ...]:
    """A step (int) or sample indices (tuple, list or array) as a tuple of Python ints."""
    if isinstance(key, (int, np.integer)):
        return (int(key),)
    return tuple(int(k) for k in np.asarray(key).reshape(-1))


def key_hash(key: Hashable | np.ndarray) -> tuple[int, int]:
    """128-bit digest of a key as two int64: slots store this, not the key (collision ~2^-128)."""
    raw = np.asarray(normalize_key(key), dtype=np.int64).tobytes()
    k1, k2 = np.frombuffer(hashlib.blake2b(raw, digest_size=16).digest(), dtype=np.int64)
    return int(k1), int(k2)


def _copy(batch: Batch) -> Batch:
    return {k: np.array(v, copy=True) for k, v in batch.items()}


class _Future:
    """Next use of each key in a known access trace: positions per key, searched by bisection."""

    def __init__(self, trace: Iterable[Any]):
        positions: dict[tuple[int, int], list[int]] = {}
        for p, key in enumerate(trace):
            positions.setdefault(key_hash(key), []).append(p)
        self.positions = {h: np.asarray(v, dtype=np.int64) for h, v in positions.items()}
        self.length = sum(len(v) for v in self.positions.values())

    def next_use(self, h: tuple[int, int], now: int) -> int:
        """First trace position >= now where key h is accessed; _NEVER if none."""
        pos = self.positions.get(h)
        if pos is None:
            return _NEVER
        i = int(np.searchsorted(pos, now))
        return int(pos[i]) if i < len(pos) else _NEVER


class BatchCache:
    """`get(key) -> batch copy or None` (each call is one access and advances the trace position)
    and `put(key, batch)`. Counts hits, misses, evictions (and opt's bypasses: a new batch not
    stored because it is the one used farthest in the future).

    Policies: `none` stores nothing; `lru` evicts the least recently used, `fifo` the oldest
    inserted, `lfu` the fewest accesses since insertion (ties: least recently used), `rr` a
    seeded random slot (the draw depends on (seed, evictions so far) only), `opt` the entry whose
    next use in `trace` is farthest. Without a trace `opt` behaves as `lru` and logs so once.

    With `shared=True` the slots live in files under /dev/shm (or the temp dir): fixed-size slots
    sized by the first batch stored, plus an index (key digests, clocks, counters) guarded by a
    file lock, so forked or spawned DataLoader workers see one cache. A batch whose layout differs
    from the first one (e.g. a short last batch) is not stored. The process that created the cache
    removes the files on `close()` or at exit. The trace position is then the number of accesses
    by all processes, which runs ahead or behind by at most the batches in flight.
    """

    def __init__(
        self,
        policy: str,
        max_batches: int,
        *,
        trace: Sequence[Any] | None = None,
        shared: bool = False,
        seed: int = 0,
    ):
        if policy not in POLICIES:
            raise ValueError(f"cache policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        if max_batches < 0 or (policy != "none" and max_batches == 0):
            raise ValueError(
                f"cache max_batches must be > 0 for policy {policy}, got {max_batches}"
            )
        if policy == "opt" and trace is None:
            log.warning("cache policy opt without an access trace: behaving as lru")
        self.policy, self.seed, self.shared = policy, int(seed), bool(shared)
        self.max_batches = max_batches if policy != "none" else 0
        self._future = _Future(trace) if policy == "opt" and trace is not None else None
        self._owner = os.getpid()
        self._pid = os.getpid()
        self._local: dict[int, Batch] = {}
        self._keys: dict[int, tuple[int, ...]] = {}  # slot -> key (local mode, for keys())
        self._dir: str | None = None
        if self.shared:
            self._dir = tempfile.mkdtemp(prefix="pipeline-cache-", dir=_shm_root())
            index_bytes = 8 * (_HEADER_INTS + _SLOT_COLS * max(self.max_batches, 1)) + _LAYOUT_BYTES
            with open(os.path.join(self._dir, "index"), "wb") as f:
                f.truncate(index_bytes)
            open(os.path.join(self._dir, "data"), "wb").close()
            self._finalizer = weakref.finalize(self, _remove, self._dir, self._owner)
            self._open()
        else:
            self._header = np.zeros(_HEADER_INTS, dtype=np.int64)
            self._slots = np.zeros((max(self.max_batches, 1), _SLOT_COLS), dtype=np.int64)

    # ------------------------------------------------------------ shared-memory plumbing

    def _open(self) -> None:
        """Map the index (and the data file once sized) in this process."""
        self._pid = os.getpid()
        self._lock_fd = os.open(os.path.join(self._dir, "index"), os.O_RDWR)
        self._index_map = mmap.mmap(self._lock_fd, 0)
        n = _HEADER_INTS + _SLOT_COLS * max(self.max_batches, 1)
        ints = np.frombuffer(self._index_map, dtype=np.int64, count=n)
        self._header = ints[:_HEADER_INTS]
        self._slots = ints[_HEADER_INTS:].reshape(-1, _SLOT_COLS)
        self._data_map: mmap.mmap | None = None
        self._layout: list[tuple[str, str, tuple[int, ...], int]] | None = None

    def _ensure_process(self) -> None:
        # a forked child inherits the fd, and flock on a shared open file excludes nothing
        if self.shared and os.getpid() != self._pid:
            self._open()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self.shared:  # the receiver maps the same files; a local cache travels as a copy
            for k in ("_lock_fd", "_index_map", "_header", "_slots", "_data_map", "_finalizer"):
                state.pop(k, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.shared:
            self._open()

    def _locked(self):
        return _FileLock(self._lock_fd) if self.shared else _NoLock()

    def _layout_of(self, batch: Batch) -> list[tuple[str, str, tuple[int, ...], int]]:
        return [(k, v.dtype.str, tuple(v.shape), v.nbytes) for k, v in batch.items()]

    def _shared_layout(self, batch: Batch | None) -> list | None:
        """The slot layout: read from the index, or set from `batch` if none is set yet."""
        if self._layout is None and self._header[_H_LAYOUT]:
            raw = bytes(self._index_map[-_LAYOUT_BYTES:][: int(self._header[_H_LAYOUT])])
            self._layout = [(k, d, tuple(s), n) for k, d, s, n in json.loads(raw)]
        if self._layout is None and batch is not None:
            layout = self._layout_of(batch)
            raw = json.dumps(layout).encode()
            if len(raw) > _LAYOUT_BYTES:
                return None
            slot_bytes = sum(n for *_, n in layout)
            with open(os.path.join(self._dir, "data"), "r+b") as f:
                f.truncate(slot_bytes * self.max_batches)
            self._index_map[-_LAYOUT_BYTES : -_LAYOUT_BYTES + len(raw)] = raw
            self._header[_H_SLOT_BYTES] = slot_bytes
            self._header[_H_LAYOUT] = len(raw)
            self._layout = layout
        if self._layout is not None and self._data_map is None:
            with open(os.path.join(self._dir, "data"), "r+b") as f:
                self._data_map = mmap.mmap(f.fileno(), 0)
        return self._layout

    def _slot_views(self, slot: int) -> Batch:
        base, out = slot * int(self._header[_H_SLOT_BYTES]), {}
        for name, dtype, shape, nbytes in self._layout:
            count = nbytes // np.dtype(dtype).itemsize
            view = np.frombuffer(self._data_map, dtype=dtype, count=count, offset=base)
            out[name] = view.reshape(shape)
            base += nbytes
        return out

    # ------------------------------------------------------------ policy core

    def _find(self, h: tuple[int, int]) -> int:
        s = self._slots
        hit = np.flatnonzero((s[:, _VALID] == 1) & (s[:, _K1] == h[0]) & (s[:, _K2] == h[1]))
        return int(hit[0]) if len(hit) else -1

    def _victim(self, h_new: tuple[int, int], now: int) -> int:
        """Slot to evict (all slots valid), or -1: opt keeps them (the newcomer is used last)."""
        s = self._slots[: self.max_batches]
        policy = "lru" if self.policy == "opt" and self._future is None else self.policy
        if policy == "lru":
            return int(np.argmin(s[:, _USED]))
        if policy == "fifo":
            return int(np.argmin(s[:, _INSERTED]))
        if policy == "lfu":
            return int(np.lexsort((s[:, _USED], s[:, _FREQ]))[0])
        if policy == "rr":
            draw = np.random.default_rng([self.seed, int(self._header[_H_EVICT])])
            return int(draw.integers(self.max_batches))
        # Belady with bypass: if the newcomer is used no sooner than every resident, keep them all
        new = self._future.next_use(h_new, now)
        if new == _NEVER:
            return -1  # the common case under a global shuffle: skip scanning the residents
        nxt = np.array(
            [self._future.next_use((int(a), int(b)), now) for a, b in s[:, _K1 : _K2 + 1]]
        )
        far = int(np.argmax(nxt))
        return -1 if new >= nxt[far] else far

    def get(self, key: Hashable | np.ndarray) -> Batch | None:
        """One access: a copy of the cached batch, or None (a miss)."""
        self._ensure_process()
        h = key_hash(key)
        with self._locked():
            hd = self._header
            hd[_H_POS] += 1
            hd[_H_CLOCK] += 1
            slot = self._find(h) if self.max_batches else -1
            if slot < 0:
                hd[_H_MISSES] += 1
                return None
            hd[_H_HITS] += 1
            self._slots[slot, _USED] = hd[_H_CLOCK]
            self._slots[slot, _FREQ] += 1
            if self.shared:
                self._shared_layout(None)
                return _copy(self._slot_views(slot))
            return _copy(self._local[slot])

    def put(self, key: Hashable | np.ndarray, batch: Batch) -> None:
        """Store a copy of `batch` under `key`, evicting per the policy if the cache is full."""
        if not self.max_batches:
            return
        self._ensure_process()
        h = key_hash(key)
        with self._locked():
            if self.shared and self._shared_layout(batch) != self._layout_of(batch):
                return  # another shape than the slots: not cacheable here
            if self._find(h) >= 0:
                return  # a worker stored it meanwhile
            hd, s = self._header, self._slots
            free = np.flatnonzero(s[: self.max_batches, _VALID] == 0)
            if len(free):
                slot = int(free[0])
            else:
                slot = self._victim(h, int(hd[_H_POS]))
                if slot < 0:
                    hd[_H_BYPASS] += 1
                    return
                hd[_H_EVICT] += 1
            hd[_H_CLOCK] += 1
            s[slot] = (1, h[0], h[1], hd[_H_CLOCK], hd[_H_CLOCK], 1)
            if self.shared:
                for name, view in self._slot_views(slot).items():
                    view[...] = batch[name]
            else:
                self._local[slot] = _copy(batch)
                self._keys[slot] = normalize_key(key)

    # ------------------------------------------------------------ inspection

    def __contains__(self, key: Hashable | np.ndarray) -> bool:
        """Is `key` cached? Not an access: counters and trace position are unchanged."""
        self._ensure_process()
        with self._locked():
            return self.max_batches > 0 and self._find(key_hash(key)) >= 0

    def __len__(self) -> int:
        self._ensure_process()
        return int((self._slots[: self.max_batches, _VALID] == 1).sum())

    def keys(self) -> set[tuple[int, ...]]:
        """Cached keys as normalized tuples (local caches only: shared slots keep digests)."""
        if self.shared:
            raise ValueError("keys() is not available for a shared cache; use `key in cache`")
        valid = np.flatnonzero(self._slots[: self.max_batches, _VALID] == 1)
        return {self._keys[int(i)] for i in valid}

    def stats(self) -> dict[str, Any]:
        """hits, misses, evictions, bypasses, accesses, hit_rate (over all processes if shared)."""
        self._ensure_process()
        hd = self._header
        hits, misses = int(hd[_H_HITS]), int(hd[_H_MISSES])
        return {
            "policy": self.policy,
            "max_batches": self.max_batches,
            "hits": hits,
            "misses": misses,
            "evictions": int(hd[_H_EVICT]),
            "bypasses": int(hd[_H_BYPASS]),
            "accesses": hits + misses,
            "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
        }

    @property
    def hits(self) -> int:
        return self.stats()["hits"]

    @property
    def misses(self) -> int:
        return self.stats()["misses"]

    @property
    def evictions(self) -> int:
        return self.stats()["evictions"]

    def close(self) -> None:
        """Drop the cached batches; the creating process also removes the shared files."""
        self._local.clear()
        if self.shared and os.getpid() == self._owner:
            self._finalizer()


def _remove(folder: str, owner: int) -> None:
    # a forked worker inherits the finalizer: only the creating process may delete the files
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def _shm_root() -> str | None:
    root = Path("/dev/shm")
    return str(root) if root.is_dir() and os.access(root, os.W_OK) else None


class _FileLock:
    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self):
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)


class _NoLock:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None
