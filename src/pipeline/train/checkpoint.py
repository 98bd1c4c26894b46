"""Checkpoints: one file, written atomically, loaded with weights_only=True (no pickled code).

Holds model, optimiser, scheduler, loader state, RNG states, the model shape and the data it
trained on, the step and the per-step losses so far. Written to a temp file in the same folder,
fsynced, then renamed over the old one: a kill -9 at any instant leaves either the previous
checkpoint or the new one, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from pipeline.errors import DataError

CHECKPOINT_NAME = "checkpoint.pt"
VERSION = 1


def rng_state() -> dict[str, Any]:
    """torch's CPU RNG (and every CUDA device's) as tensors: weights_only loads them."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, blob: dict[str, Any]) -> None:
    """Atomic write: temp + fsync + rename + fsync of the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"version": VERSION, **blob}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint dict (tensors on CPU); DataError if unreadable or not ours."""
    path = Path(path)
    if not path.is_file():
        raise DataError(str(path), "no checkpoint to resume from (drop --resume to start anew)")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged or foreign file
        raise DataError(str(path), f"not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(blob, dict) or blob.get("version") != VERSION:
        raise DataError(str(path), f"not a pipeline pretrain checkpoint (version {VERSION})")
    return blob


def check_compatible(path: Path, blob: dict[str, Any], shape: dict, data: dict) -> None:
    """One line naming what differs between the checkpoint and this run's shards / recipe."""
    saved_shape, saved_data = blob.get("shape") or {}, blob.get("data") or {}
    diffs = [
        f"{k} {saved_shape.get(k)} -> {v}" for k, v in shape.items() if saved_shape.get(k) != v
    ]
    for k in ("tokenizer_sha256", "num_samples"):
        if saved_data.get(k) != data.get(k):
            a, b = saved_data.get(k), data.get(k)
            a, b = (str(a)[:12], str(b)[:12]) if k == "tokenizer_sha256" else (a, b)
            diffs.append(f"{k} {a} -> {b}")
    if diffs:
        raise DataError(
            str(path),
            "was trained on other data or another model shape (checkpoint -> now: "
            + ", ".join(diffs)
            + "); resume with the same run and recipe, or train into a new --out-dir",
        )
