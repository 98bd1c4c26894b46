"""BatchPrefetcher: keeps the next batches ready while the training step runs, and measures how
long the consumer waited for data (stall seconds and stall fraction of the loop).

CPU: a background thread pulls from the loader into a bounded queue. CUDA: the same thread also
pins each batch (page-locked host memory); the consumer thread issues the host-to-device copy of
batch k+1 on a side stream before handing out batch k, and the compute stream waits on an event
instead of the host. Not here: what a batch holds or how it is gathered (the loader).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

_END = object()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


class BatchPrefetcher:
    """`for batch in BatchPrefetcher(loader, device): ...`; `stats()` after (or during) the loop.

    `device` "cpu" hands batches out as the loader made them; a CUDA device hands out dicts of
    device tensors (numpy arrays become tensors first). `depth` batches are kept ready. The stall
    is the time `next()` spent waiting for a batch; the loop time runs from the first `next()` to
    the end of the data (or to now), so stall_fraction = 1 means the consumer only ever waited.
    """

    def __init__(self, loader: Iterable[Any], device: Any = "cpu", *, depth: int = 2):
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        self.loader, self.depth = loader, depth
        self.device = _device(device)
        self.cuda = getattr(self.device, "type", "cpu") == "cuda"
        self._reset()

    def _reset(self) -> None:
        self.batches, self.stall_s = 0, 0.0
        self._start: float | None = None
        self._end: float | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ producer thread

    def _produce(self, q: queue.Queue, stop: threading.Event) -> None:
        try:
            for batch in self.loader:
                if self.cuda:
                    batch = _pinned(batch)
                if not _put_unless_stopped(q, batch, stop) or stop.is_set():
                    return  # stopped: read no further batch from the loader
            item: Any = _END
        except BaseException as exc:  # handed to the consumer, raised there
            item = _Failure(exc)
        _put_unless_stopped(q, item, stop)

    def _take(self, q: queue.Queue) -> Any:
        t0 = time.perf_counter()
        if self._start is None:
            self._start = t0
        item = q.get()
        self.stall_s += time.perf_counter() - t0
        if isinstance(item, _Failure):
            raise item.exc
        return item

    # ------------------------------------------------------------ consumer

    def __iter__(self) -> Iterator[Any]:
        self._reset()
        q: queue.Queue = queue.Queue(maxsize=self.depth)
        stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, args=(q, stop), daemon=True)
        self._thread.start()
        try:
            yield from (self._cuda_loop(q) if self.cuda else self._cpu_loop(q))
            self._end = time.perf_counter()
        finally:
            stop.set()
            while True:  # unblock a producer waiting on a full queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
            self._thread.join(timeout=5)

    def _cpu_loop(self, q: queue.Queue) -> Iterator[Any]:
        while (batch := self._take(q)) is not _END:
            self.batches += 1
            yield batch

    def _cuda_loop(self, q: queue.Queue) -> Iterator[Any]:
        import torch

        side = torch.cuda.Stream(device=self.device)

        def issue(host: dict) -> tuple[dict, Any]:
            with torch.cuda.stream(side):
                out = {k: v.to(self.device, non_blocking=True) for k, v in host.items()}
                ready = torch.cuda.Event()
                ready.record(side)
            return out, ready

        host = self._take(q)
        pending = issue(host) if host is not _END else None
        while pending is not None:
            batch, ready = pending
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(ready)  # the GPU waits for the copy, the host does not
            for t in batch.values():
                t.record_stream(compute)  # allocated on `side`, used on `compute`
            host = self._take(q)
            pending = issue(host) if host is not _END else None  # overlaps the caller's step
            self.batches += 1
            yield batch

    def stats(self) -> dict[str, Any]:
        """batches, stall_s, loop_s, stall_fraction, device."""
        end = self._end if self._end is not None else time.perf_counter()
        loop = end - self._start if self._start is not None else 0.0
        return {
            "batches": self.batches,
            "stall_s": self.stall_s,
            "loop_s": loop,
            "stall_fraction": self.stall_s / loop if loop > 0 else 0.0,
            "device": str(self.device),
        }


def _device(device: Any) -> Any:
    if isinstance(device, str) and device == "cpu":
        return "cpu"
    import torch

    return torch.device(device)


def _pinned(batch: dict) -> dict:
    """Tensors in page-locked memory (numpy arrays converted first) for async copies."""
    import torch

    out = {}
    for k, v in batch.items():
        t = torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
        if t.dtype == torch.uint16:  # CUDA kernels lack uint16: widen ids once, on the host
            t = t.to(torch.int32)
        out[k] = t.pin_memory()
    return out


def _put_unless_stopped(q: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put `item` on the bounded queue, waking every 0.1 s to see whether the consumer stopped
    (a full queue nobody reads would otherwise block the thread forever). False if stopped."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False
