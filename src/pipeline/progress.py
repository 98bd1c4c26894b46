"""A small stderr progress line for long work; silent when disabled (`-q`) or not a terminal."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int | None, desc: str, enabled: bool = True, unit: str = "docs"):
        self.total, self.desc, self.unit = total, desc, unit
        self.enabled = enabled and sys.stderr.isatty()
        self.n = 0
        self._start = self._last = time.perf_counter()

    def update(self, k: int = 1) -> None:
        self.n += k
        now = time.perf_counter()
        if self.enabled and now - self._last > 0.2:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.n / max(now - self._start, 1e-9)
        total = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r  {self.desc}: {self.n}{total} {self.unit} ({rate:,.0f}/s)   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.n:
            self._draw(time.perf_counter())
            sys.stderr.write("\n")
            sys.stderr.flush()
