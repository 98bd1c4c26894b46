"""Per-worker seeds: `worker_seed(seed, worker_id, epoch)` and the `worker_init_fn` TokenLoader
installs, which seeds numpy's global generator, `random` and torch in each DataLoader worker.

The loader's own randomness (orders, steps, transforms) never reads a global generator; this is
for everything else a worker runs (a user's collate, a tokenizer's dropout, a library that calls
np.random): its draws then differ per worker and per epoch, and repeat exactly in a re-run.
The seed mixes (seed, worker_id, epoch) through a SeedSequence rather than the explainer's plain
`seed + worker_id + epoch`: with the sum, worker 1 of epoch 0 would replay worker 0 of epoch 1
(and run seed 1 replay run seed 0), the collision order.py documents for epoch orders.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import numpy as np

_WORKER_TAG = 0x574B  # keeps worker seeds apart from every other stream keyed by the same seed
_M64 = (1 << 64) - 1


def worker_seed(seed: int, worker_id: int, epoch: int) -> int:
    """A 32-bit seed (what np.random.seed accepts) for worker `worker_id` in `epoch`: a pure
    function of the three, distinct for distinct triples up to 32-bit hash collisions."""
    words = []
    for v in (int(seed), int(worker_id), int(epoch)):
        v &= _M64  # a negative seed is its two's complement
        words += [v & 0xFFFFFFFF, v >> 32]
    return int(np.random.SeedSequence([*words, _WORKER_TAG]).generate_state(1)[0])


def seed_everything(seed: int) -> None:
    """Seed numpy's global generator, `random` and torch (when it is imported) with `seed`."""
    np.random.seed(seed)
    random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


@dataclass
class WorkerInit:
    """DataLoader's worker_init_fn: seeds each worker with worker_seed(seed, worker_id, epoch).
    TokenLoader sets `epoch` before each pass, so the workers a pass starts see that epoch."""

    seed: int
    epoch: int = 0

    def __call__(self, worker_id: int) -> None:
        seed_everything(worker_seed(self.seed, worker_id, self.epoch))
