"""The BatchCache's index as int64 arrays (in-process or in a shared file): a key -> slot hash
table (open addressing, linear probing, backward-shift deletion: no tombstones, so probes stay
short forever) and an indexed binary heap of slots ordered by the policy's eviction key. A
lookup is O(1) expected, a heap update O(log capacity); nothing scans the capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# table columns: the key's two digest words and slot + 1 (0 = empty cell)
_T_K1, _T_K2, _T_SLOT = range(3)


def table_size(capacity: int) -> int:
    """Cells for `capacity` keys: a power of two >= 2 x capacity (load <= 1/2)."""
    return 1 << max(4, (2 * max(capacity, 1) - 1).bit_length())


class HashTable:
    """(k1, k2) -> slot over an int64 array [size, 3] (a power-of-two size)."""

    def __init__(self, cells: np.ndarray):
        self.cells = cells
        self.mask = len(cells) - 1

    def _home(self, k1: int) -> int:
        return int(k1) & self.mask

    def find(self, h: tuple[int, int]) -> int:
        c, i = self.cells, self._home(h[0])
        while c[i, _T_SLOT]:
            if c[i, _T_K1] == h[0] and c[i, _T_K2] == h[1]:
                return int(c[i, _T_SLOT]) - 1
            i = (i + 1) & self.mask
        return -1

    def add(self, h: tuple[int, int], slot: int) -> None:
        c, i = self.cells, self._home(h[0])
        while c[i, _T_SLOT]:
            i = (i + 1) & self.mask
        c[i] = (h[0], h[1], slot + 1)

    def remove(self, h: tuple[int, int]) -> None:
        c, i = self.cells, self._home(h[0])
        while c[i, _T_SLOT] and not (c[i, _T_K1] == h[0] and c[i, _T_K2] == h[1]):
            i = (i + 1) & self.mask
        if not c[i, _T_SLOT]:
            return
        c[i] = 0
        j = i
        while True:  # backward shift: pull later entries of the cluster into the gap
            j = (j + 1) & self.mask
            if not c[j, _T_SLOT]:
                return
            k = self._home(c[j, _T_K1])
            stays = (i < k <= j) if i <= j else (i < k or k <= j)
            if not stays:
                c[i] = c[j]
                c[j] = 0
                i = j


class DictTable:
    """The same interface over a dict (an in-process cache: grows with what it holds)."""

    def __init__(self) -> None:
        self.slots: dict[tuple[int, int], int] = {}

    def find(self, h: tuple[int, int]) -> int:
        return self.slots.get(h, -1)

    def add(self, h: tuple[int, int], slot: int) -> None:
        self.slots[h] = slot

    def remove(self, h: tuple[int, int]) -> None:
        self.slots.pop(h, None)


# ---------------------------------------------------------------- indexed heap
# heap[:n] holds slots, a min-heap by key(slot); pos[slot] is each slot's place in it


def _swap(heap: np.ndarray, pos: np.ndarray, i: int, j: int) -> None:
    a, b = int(heap[i]), int(heap[j])
    heap[i], heap[j] = b, a
    pos[b], pos[a] = i, j


def _up(heap: np.ndarray, pos: np.ndarray, key: Callable[[int], Any], i: int) -> int:
    while i:
        parent = (i - 1) // 2
        if not key(int(heap[i])) < key(int(heap[parent])):
            break
        _swap(heap, pos, i, parent)
        i = parent
    return i


def _down(heap: np.ndarray, pos: np.ndarray, key: Callable[[int], Any], n: int, i: int) -> None:
    while True:
        small, left = i, 2 * i + 1
        for c in (left, left + 1):
            if c < n and key(int(heap[c])) < key(int(heap[small])):
                small = c
        if small == i:
            return
        _swap(heap, pos, i, small)
        i = small


def heap_push(heap: np.ndarray, pos: np.ndarray, key: Callable[[int], Any], n: int, slot: int):
    """Add `slot` to the heap of size n (the caller then counts n + 1)."""
    heap[n] = slot
    pos[slot] = n
    _up(heap, pos, key, n)


def heap_update(heap: np.ndarray, pos: np.ndarray, key: Callable[[int], Any], n: int, slot: int):
    """`slot`'s key changed: restore the order around it."""
    i = _up(heap, pos, key, int(pos[slot]))
    _down(heap, pos, key, n, i)
