"""Per-document columns of the quality stage, kept per part in temp files (not outputs).

Each map that computes columns for a part saves them as one group file
`<dir>/part-<i>.<group>.npz`; a later task loads every group of its part. The driver passes
only the folder and part numbers around, so no per-document array reaches it.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from pipeline.io import atomic_write_bytes

COLS_DIR = ".quality-columns"
GROUPS = ("scan", "lm", "copy", "coh", "clf", "ext")  # what `load` merges


def group_file(folder: Path, part: int, group: str) -> Path:
    return Path(folder) / f"part-{part:05d}.{group}.npz"


def save(folder: Path, part: int, group: str, **arrays: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(group_file(folder, part, group), buf.getvalue())


def load(folder: Path, part: int) -> dict[str, np.ndarray]:
    """Every column saved for the part, all groups merged."""
    out: dict[str, np.ndarray] = {}
    for group in GROUPS:
        path = group_file(folder, part, group)
        if path.is_file():
            with np.load(path, allow_pickle=False) as z:
                out.update({k: z[k] for k in z.files})
    return out
