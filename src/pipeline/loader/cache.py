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
import re
import shutil
import tempfile
import weakref
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.loader.cache_index import DictTable, HashTable, heap_push, heap_update, table_size

log = logging.getLogger("pipeline.loader")

POLICIES = ("none", "lru", "fifo", "lfu", "rr", "opt")
Batch = dict[str, np.ndarray]

# header slots (int64) of the index; the rest of the header page holds the batch layout as JSON
(_H_SLOT_BYTES, _H_CLOCK, _H_HITS, _H_MISSES, _H_EVICT, _H_BYPASS, _H_POS, _H_LAYOUT, _H_COUNT,
 _H_HEAP, _H_CAP) = range(11)  # fmt: skip
_HEADER_INTS = 16
_LAYOUT_BYTES = 4096 - 8 * _HEADER_INTS
# per-slot metadata columns (int64); a slot once filled stays valid (evictions overwrite it)
_K1, _K2, _USED, _INSERTED, _FREQ, _NEXT, _HPOS = range(7)
_SLOT_COLS = 7
_NEVER = np.iinfo(np.int64).max
SEGMENT_PREFIX = "pipeline-cache-"  # /dev/shm/pipeline-cache-<owner pid>-<random>/
_SEGMENT = re.compile(rf"^{SEGMENT_PREFIX}(\d+)-")
_LOCAL_ROWS = 1024  # first size of an in-process cache's arrays (doubled as slots fill)


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
            root = _shm_root()
            sweep_segments(root)  # what killed owners left: RAM under /dev/shm
            self._dir = tempfile.mkdtemp(prefix=f"{SEGMENT_PREFIX}{self._owner}-", dir=root)
            with open(os.path.join(self._dir, "index"), "wb") as f:
                f.truncate(_index_bytes(self.max_batches))  # sparse: pages appear when used
            open(os.path.join(self._dir, "data"), "wb").close()
            self._finalizer = weakref.finalize(self, _remove, self._dir, self._owner)
            self._open()
        else:
            self._header = np.zeros(_HEADER_INTS, dtype=np.int64)
            self._header[_H_CAP] = self.max_batches
            rows = min(max(self.max_batches, 1), _LOCAL_ROWS)
            self._slots = np.zeros((rows, _SLOT_COLS), dtype=np.int64)
            self._heap_arr = np.zeros(rows, dtype=np.int64)
            self._table = DictTable()

    # ------------------------------------------------------------ shared-memory plumbing

    def _open(self) -> None:
        """Map the index (and the data file once sized) in this process."""
        self._pid = os.getpid()
        self._lock_fd = os.open(os.path.join(self._dir, "index"), os.O_RDWR)
        self._index_map = mmap.mmap(self._lock_fd, 0)
        cap = max(self.max_batches, 1)
        sizes = (_HEADER_INTS, cap * _SLOT_COLS, cap, 3 * table_size(cap))
        ints = np.frombuffer(self._index_map, dtype=np.int64, count=sum(sizes))
        a, b, c, _ = np.cumsum(sizes)
        self._header = ints[:a]
        self._slots = ints[a:b].reshape(-1, _SLOT_COLS)
        self._heap_arr = ints[b:c]
        self._table = HashTable(ints[c:].reshape(-1, 3))
        self._data_map: mmap.mmap | None = None
        self._layout: list[tuple[str, str, tuple[int, ...], int]] | None = None

    def _heap_key(self):
        """The eviction key of a slot for this policy (the heap's minimum is the victim)."""
        policy = "lru" if self.policy == "opt" and self._future is None else self.policy
        s = self._slots
        if policy == "lru":
            return lambda i: s[i, _USED]
        if policy == "fifo":
            return lambda i: s[i, _INSERTED]
        if policy == "lfu":
            return lambda i: (s[i, _FREQ], s[i, _USED])
        if policy == "opt":
            return lambda i: (-s[i, _NEXT], i)  # ties (never used again): lowest slot
        return None  # rr draws a slot; none stores nothing

    def _reorder(self, slot: int, new: bool) -> None:
        """Slot `slot` was filled (`new`) or its key changed: update the eviction heap."""
        key = self._heap_key()
        if key is None:
            return
        hd, pos = self._header, self._slots[:, _HPOS]
        if new:
            heap_push(self._heap_arr, pos, key, int(hd[_H_HEAP]), slot)
            hd[_H_HEAP] += 1
        else:
            heap_update(self._heap_arr, pos, key, int(hd[_H_HEAP]), slot)

    def _grow_local(self, need: int) -> None:
        """In-process arrays hold `need` slots (doubling: O(1) amortized per new slot)."""
        rows = len(self._slots)
        if need <= rows:
            return
        rows = min(max(need, 2 * rows), self.max_batches)
        slots = np.zeros((rows, _SLOT_COLS), dtype=np.int64)
        slots[: len(self._slots)] = self._slots
        heap = np.zeros(rows, dtype=np.int64)
        heap[: len(self._heap_arr)] = self._heap_arr
        self._slots, self._heap_arr = slots, heap

    def _ensure_process(self) -> None:
        # a forked child inherits the fd, and flock on a shared open file excludes nothing
        if self.shared and os.getpid() != self._pid:
            self._open()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self.shared:  # the receiver maps the same files; a local cache travels as a copy
            drop = ("_lock_fd", "_index_map", "_header", "_slots", "_heap_arr", "_table")
            for k in (*drop, "_data_map", "_finalizer"):
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
            slot_bytes = max(sum(n for *_, n in layout), 1)
            cap = _fitting_slots(self._dir, slot_bytes, self.max_batches)
            with open(os.path.join(self._dir, "data"), "r+b") as f:
                f.truncate(slot_bytes * cap)  # sparse: RAM is used as slots fill
            self._header[_H_CAP] = cap
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
        return self._table.find(h)

    def _victim(self, h_new: tuple[int, int], now: int) -> int:
        """Slot to evict (all slots full), or -1: opt keeps them (the newcomer is used last).
        O(log capacity) at most: the heap's top, or one seeded draw."""
        if self.policy == "rr":
            draw = np.random.default_rng([self.seed, int(self._header[_H_EVICT])])
            return int(draw.integers(int(self._header[_H_COUNT])))
        top = int(self._heap_arr[0])
        if self.policy != "opt" or self._future is None:
            return top
        # Belady with bypass: if the newcomer is used no sooner than every resident, keep them all
        new = self._future.next_use(h_new, now)
        return -1 if new >= self._slots[top, _NEXT] else top

    def _next_use(self, h: tuple[int, int], now: int) -> int:
        return self._future.next_use(h, now) if self._future is not None else _NEVER

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
            row = self._slots[slot]
            row[_USED] = hd[_H_CLOCK]
            row[_FREQ] += 1
            row[_NEXT] = self._next_use(h, int(hd[_H_POS]))
            self._reorder(slot, new=False)
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
            hd = self._header
            count, new = int(hd[_H_COUNT]), True
            if count < int(hd[_H_CAP]):
                slot = count
                if not self.shared:
                    self._grow_local(count + 1)
                hd[_H_COUNT] += 1
            else:
                slot = self._victim(h, int(hd[_H_POS]))
                if slot < 0:
                    hd[_H_BYPASS] += 1
                    return
                hd[_H_EVICT] += 1
                old = self._slots[slot]
                self._table.remove((int(old[_K1]), int(old[_K2])))
                new = False
            hd[_H_CLOCK] += 1
            clock = int(hd[_H_CLOCK])
            pos = self._slots[slot, _HPOS]
            self._slots[slot] = (
                h[0],
                h[1],
                clock,
                clock,
                1,
                self._next_use(h, int(hd[_H_POS])),
                pos,
            )
            self._table.add(h, slot)
            self._reorder(slot, new=new)
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
        return int(self._header[_H_COUNT])  # a filled slot stays filled

    def keys(self) -> set[tuple[int, ...]]:
        """Cached keys as normalized tuples (local caches only: shared slots keep digests)."""
        if self.shared:
            raise ValueError("keys() is not available for a shared cache; use `key in cache`")
        return set(self._keys.values())

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


def _index_bytes(max_batches: int) -> int:
    cap = max(max_batches, 1)
    return 8 * (_HEADER_INTS + cap * (_SLOT_COLS + 1) + 3 * table_size(cap)) + _LAYOUT_BYTES


def _fitting_slots(folder: str, slot_bytes: int, max_batches: int) -> int:
    """Slots the shared data file may have: max_batches, or fewer when the filesystem (tmpfs:
    RAM) has no room for them all, so a full /dev/shm never kills a worker with SIGBUS."""
    try:
        st = os.statvfs(folder)
        room = st.f_bavail * st.f_frsize
    except OSError:
        return max_batches
    fit = max(int(room * 0.9) // slot_bytes, 1)
    if fit < max_batches:
        log.warning(
            "shared cache: %d batches of %.1f MB do not fit in %s (%.0f MB free): keeping %d",
            max_batches, slot_bytes / 1e6, folder, room / 1e6, fit,
        )  # fmt: skip
    return min(fit, max_batches)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _own_dir(p: Path) -> bool:
    """A real folder of this user (another user's segments are theirs to sweep)."""
    try:
        return p.is_dir() and not p.is_symlink() and p.stat().st_uid == os.getuid()
    except OSError:
        return False


def sweep_segments(root: str | None = None) -> list[str]:
    """Remove the shared caches (`pipeline-cache-<pid>-*` under /dev/shm, or the temp dir)
    whose owning process is dead: a SIGKILLed owner never ran its finalizer. A live owner's,
    and any other name, is left alone. Returns the names removed."""
    folder = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return removed
    for p in entries:
        m = _SEGMENT.match(p.name)
        if m and _own_dir(p) and not _alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True)
            if p.exists():
                log.warning("shared cache %s of dead process %s: cannot remove it", p, m.group(1))
            else:
                removed.append(p.name)
    if removed:
        log.info("removed shared caches of dead processes: %s", ", ".join(removed))
    return removed


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
