"""Seeded batch transforms applied after the cache: crop (tail / random_tail / rolling windows,
several views of a row resampled back to B rows), token_mask, segment_dropout; the `Augment`
chain that draws each transform's generator from (seed, epoch, step); the presets `baseline`
and `baseline_plus`. Batches are {"input_ids": [B, L], "segment_ids": [B, L]} numpy arrays
(segment 0 = padding, k = k-th packed document of the row). Eval data is never augmented.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

Batch = dict[str, np.ndarray]
WINDOWS = ("tail", "random_tail", "rolling")


def transform_rng(seed: int, epoch: int, step: int, salt: int) -> np.random.Generator:
    """The generator of transform number `salt` at (seed, epoch, step): nothing else feeds it, so
    a step's views are the same whatever the workers, restarts or cache hits."""
    return np.random.default_rng([int(seed), int(epoch), int(step), int(salt)])


def renumber_segments(segment_ids: np.ndarray, breaks: np.ndarray | None = None) -> np.ndarray:
    """Segment ids renumbered 1..k per row in order of appearance (0 stays padding). A new
    segment starts where the id changes or where `breaks` ([B, L] bool) is set."""
    seg = np.asarray(segment_ids)
    real = seg != 0
    start = real.copy()
    start[:, 1:] &= seg[:, 1:] != seg[:, :-1]
    if breaks is not None:
        start |= breaks & real
    return (np.cumsum(start, axis=1, dtype=np.int32) * real).astype(seg.dtype)


def _window_starts(
    rng: np.random.Generator, n: int, seq_len: int, window: str, min_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of n crop windows; rolling windows are full-length rotations."""
    m = min(max(min_len, 1), seq_len)
    if window == "tail":
        length = rng.integers(m, seq_len + 1, size=n)
        return seq_len - length, length
    if window == "random_tail":
        start = rng.integers(0, seq_len - m + 1, size=n)
        length = m + (rng.random(n) * (seq_len - start - m + 1)).astype(np.int64)
        return start, length
    # rolling: shift in [m, L - m] so both pieces of the wrapped row keep >= min_len tokens
    lo, hi = (m, seq_len - m) if seq_len >= 2 * m else (0, 0)
    return rng.integers(lo, hi + 1, size=n), np.full(n, seq_len)


def crop(
    batch: Batch,
    rng: np.random.Generator,
    *,
    window: str = "random_tail",
    min_len: int = 8,
    views_per_row: int = 1,
    pad_id: int = 0,
) -> Batch:
    """Crop windows of each row, left-aligned and padded (pad_id, segment 0) to the row length.

    `tail`: the last ℓ tokens, ℓ ~ U{min_len..L}. `random_tail`: start s ~ U{0..L-min_len}, then
    ℓ ~ U{min_len..L-s} (a random window: random head cut, then random tail cut). `rolling`: the
    row rotated left by s ~ U{min_len..L-min_len}, no padding; the wrap starts a new segment.
    With views_per_row = V each row gives V views and B of the B·V views are drawn without
    replacement (V = 1 keeps the row order). Segment ids are renumbered 1..k per view.
    """
    if window not in WINDOWS:
        raise ValueError(f"crop window must be one of {', '.join(WINDOWS)}, got {window!r}")
    if views_per_row < 1:
        raise ValueError(f"crop views_per_row must be >= 1, got {views_per_row}")
    seg = batch["segment_ids"]
    b, seq_len = seg.shape
    n = b * views_per_row
    start, length = _window_starts(rng, n, seq_len, window, min_len)
    # all B·V windows are drawn, then B of them kept: only the kept views are built
    pick = rng.choice(n, size=b, replace=False) if views_per_row > 1 else np.arange(b)
    start, length, src = start[pick], length[pick], pick // views_per_row
    out = {}
    for name, arr in batch.items():
        if arr.ndim != 2 or arr.shape != seg.shape:
            out[name] = arr  # per-row scalars etc. pass through
            continue
        fill = pad_id if name == "input_ids" else 0
        out[name] = _views(arr, src.tolist(), start.tolist(), length.tolist(), fill)
    breaks = None
    if window == "rolling":
        breaks = np.arange(seq_len)[None, :] == (seq_len - start)[:, None]
    out["segment_ids"] = renumber_segments(out["segment_ids"], breaks)
    return out


def _views(arr: np.ndarray, src: list, start: list, length: list, fill: int) -> np.ndarray:
    """[len(src), L]: view i is row src[i] from start[i] for length[i] tokens (wrapping past the
    end, as rolling windows do), then `fill`. Slice copies: ~1 µs a row."""
    seq_len = arr.shape[1]
    out = np.full((len(start), seq_len), fill, dtype=arr.dtype)
    for i, (s, n) in enumerate(zip(start, length, strict=True)):
        row = arr[src[i]]
        head = min(n, seq_len - s)
        out[i, :head] = row[s : s + head]
        if n > head:
            out[i, head:n] = row[: n - head]
    return out


def token_mask(
    batch: Batch, rng: np.random.Generator, *, probability: float, mask_id: int
) -> Batch:
    """Each non-padding token becomes `mask_id` with probability p (segment ids unchanged)."""
    ids, seg = batch["input_ids"], batch["segment_ids"]
    flat = _bernoulli_positions(rng, ids.size, probability)
    flat = flat[seg.reshape(-1)[flat] != 0]
    out = ids.copy()
    out.reshape(-1)[flat] = mask_id
    return {**batch, "input_ids": out}


def _bernoulli_positions(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
    """Positions in [0, n) each chosen independently with probability p, drawn as geometric gaps
    between successes: ~n·p draws instead of n (0.03 × 65,536 tokens: ~2,000)."""
    if p <= 0 or n == 0:
        return np.zeros(0, np.int64)
    if p >= 1:
        return np.arange(n, dtype=np.int64)
    parts, end = [], -1
    while end < n:
        gaps = rng.geometric(p, size=int(n * p + 4 * np.sqrt(n * p) + 16))
        pos = end + np.cumsum(gaps)
        parts.append(pos)
        end = int(pos[-1])
    pos = np.concatenate(parts)
    return pos[pos < n]


def segment_dropout(
    batch: Batch, rng: np.random.Generator, *, probability: float, pad_id: int = 0
) -> Batch:
    """Drop whole packed documents: each segment of a row goes with probability p (a row keeps at
    least one, drawn at random if all were drawn), its tokens become padding in place (pad_id,
    segment 0) and the remaining segments are renumbered 1..k."""
    ids, seg = batch["input_ids"], renumber_segments(batch["segment_ids"])
    b = seg.shape[0]
    k = seg.max(axis=1).astype(np.int64)  # segments per row, ids are 1..k after renumbering
    width = int(k.max()) + 1 if b else 1
    drop = rng.random((b, width)) < probability
    drop[:, 0] = False
    drop &= np.arange(width)[None, :] <= k[:, None]
    every = (drop.sum(axis=1) == k) & (k > 0)
    if every.any():
        rows = np.flatnonzero(every)
        spare = 1 + (rng.random(len(rows)) * k[rows]).astype(np.int64)
        drop[rows, spare] = False
    rows = np.flatnonzero(drop.any(axis=1))  # p = 0.03: most rows lose nothing
    out = {**batch, "segment_ids": seg}
    if len(rows):
        sub = seg[rows]
        gone = np.take_along_axis(drop[rows], sub.astype(np.intp), axis=1)
        out["input_ids"] = ids.copy()
        out["input_ids"][rows] = np.where(gone, np.asarray(pad_id, ids.dtype), ids[rows])
        out["segment_ids"] = seg.copy()
        out["segment_ids"][rows] = renumber_segments(np.where(gone, np.zeros((), seg.dtype), sub))
    return out


# ---------------------------------------------------------------- configs and the chain


@dataclass(frozen=True)
class Crop:
    window: str = "random_tail"
    min_len: int = 8
    views_per_row: int = 1


@dataclass(frozen=True)
class TokenMask:
    probability: float
    mask_id: int | None = None  # None: the dataset's pad_id


@dataclass(frozen=True)
class SegmentDropout:
    probability: float


Transform = Crop | TokenMask | SegmentDropout


class Augment:
    """A chain of transforms; `augment(batch, epoch=e, step=t)` returns a new batch (the input,
    e.g. a cached batch, is never written). Transform i draws from transform_rng(seed, e, t, i).
    Building one for eval data raises: eval loaders are never augmented."""

    def __init__(
        self,
        transforms: list[Transform] | tuple[Transform, ...],
        *,
        seed: int,
        pad_id: int = 0,
        split: str = "train",
    ):
        if split == "eval":
            raise ValueError("eval loaders are never augmented; build Augment for train data only")
        for t in transforms:
            _validate(t)
        self.transforms, self.seed, self.pad_id = tuple(transforms), int(seed), int(pad_id)

    def __call__(self, batch: Batch, *, epoch: int, step: int) -> Batch:
        out = batch
        for i, t in enumerate(self.transforms):
            rng = transform_rng(self.seed, epoch, step, i)
            if isinstance(t, Crop):
                out = crop(out, rng, window=t.window, min_len=t.min_len,
                           views_per_row=t.views_per_row, pad_id=self.pad_id)  # fmt: skip
            elif isinstance(t, TokenMask):
                mask_id = self.pad_id if t.mask_id is None else t.mask_id
                out = token_mask(out, rng, probability=t.probability, mask_id=mask_id)
            else:
                out = segment_dropout(out, rng, probability=t.probability, pad_id=self.pad_id)
        return out


def _validate(t: Transform) -> None:
    if isinstance(t, Crop):
        if t.window not in WINDOWS:
            raise ValueError(f"crop window must be one of {', '.join(WINDOWS)}, got {t.window!r}")
        if t.min_len < 1 or t.views_per_row < 1:
            raise ValueError(f"crop min_len and views_per_row must be >= 1, got {t}")
    elif isinstance(t, (TokenMask, SegmentDropout)):
        if not 0.0 <= t.probability <= 1.0:
            raise ValueError(f"{type(t).__name__} probability must be in [0, 1], got {t}")
    else:
        raise ValueError(f"unknown transform {t!r}")


# ---------------------------------------------------------------- presets


@dataclass(frozen=True)
class Preset:
    """A named loader setting: cache policy and size, transforms, transform seed."""

    name: str
    cache_policy: str = "none"
    cache_batches: int = 0
    transforms: tuple[Transform, ...] = field(default_factory=tuple)
    seed: int = 0

    def augment(self, *, pad_id: int = 0, split: str = "train") -> Augment | None:
        """The transform chain for `split`; None when there is nothing to apply. Eval splits
        always get None: the preset's transforms are train-only."""
        if not self.transforms or split == "eval":
            return None
        return Augment(self.transforms, seed=self.seed, pad_id=pad_id, split=split)


PRESETS: dict[str, Preset] = {
    "baseline": Preset("baseline"),
    "baseline_plus": Preset(
        "baseline_plus",
        cache_policy="opt",
        cache_batches=512,
        transforms=(
            Crop(window="random_tail", min_len=8, views_per_row=2),
            TokenMask(probability=0.03),
            SegmentDropout(probability=0.03),
        ),
        seed=42,
    ),
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"loader preset must be one of {', '.join(PRESETS)}, got {name!r}")
    return PRESETS[name]


def split_of(path: str | Path, metadata: dict[str, Any] | None = None) -> str:
    """'eval' for a shard folder named eval (or metadata split == eval), else 'train'."""
    if metadata and metadata.get("split") in ("train", "eval"):
        return metadata["split"]
    return "eval" if Path(path).name == "eval" else "train"
