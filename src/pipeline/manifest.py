"""manifest.json: per stage its fingerprint, seed, outputs (path, sha256, records, bytes) and
finish time.

Only the runner writes it, atomically. A stage counts as done when its fingerprint matches and
every recorded output exists with its recorded size and sha256.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.io import atomic_write_json, sha256_file
from pipeline.stage import StageInputs

MANIFEST_NAME = "manifest.json"
VERSION = 1


class Manifest:
    def __init__(self, run_dir: Path, stages: dict[str, Any] | None = None):
        self.run_dir = Path(run_dir)
        self.stages: dict[str, Any] = stages or {}

    @classmethod
    def load(cls, run_dir: Path) -> Manifest:
        path = Path(run_dir) / MANIFEST_NAME
        if not path.exists():
            return cls(run_dir)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stages = data["stages"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DataError(
                str(path), f"unreadable manifest ({exc}); delete it to re-run every stage"
            ) from None
        return cls(run_dir, stages)

    def save(self) -> None:
        atomic_write_json(self.run_dir / MANIFEST_NAME, {"version": VERSION, "stages": self.stages})

    def is_done(self, name: str, fingerprint: str) -> bool:
        entry = self.stages.get(name)
        return bool(entry) and entry.get("fingerprint") == fingerprint and self.outputs_intact(name)

    def outputs_intact(self, name: str) -> bool:
        entry = self.stages.get(name)
        if not entry:
            return False
        for out in entry["outputs"]:
            path = self.run_dir / out["path"]
            if not path.is_file() or path.stat().st_size != out["bytes"]:
                return False
            if sha256_file(path) != out["sha256"]:
                return False
        return True

    def num_part_records(self, name: str) -> int:
        """Records in the stage's main parts (rows, or array length for .npy)."""
        entry = self.stages.get(name, {})
        return sum(
            o["records"] or 0
            for o in entry.get("outputs", [])
            if o["path"].startswith(f"{name}/part-") and o["path"].count("/") == 1
        )

    def parts(self, name: str) -> list[Path]:
        """The stage's main parts: `<name>/part-*` directly inside its folder, in order."""
        return self.inputs(name).parts

    def inputs(self, name: str) -> StageInputs:
        """Everything the stage recorded, as the input of a later stage (ctx.inputs[name])."""
        entry = self.stages.get(name, {})
        files = sorted(o["path"][len(name) + 1 :] for o in entry.get("outputs", []))
        return StageInputs(name, self.run_dir / name, tuple(files))
