"""manifest.json: the run's one source of truth. Per stage: its fingerprint, seed, input files,
outputs (path, sha256, records, bytes), finish time and its report section (seconds, stats);
at the top, the recipe and seed the report shows.

Only the runner writes it, atomically, once per finished stage: that rename is the stage's
commit. pipeline_report.json is derived from it (rebuilt whenever missing, damaged or stale). A
stage counts as done when its fingerprint matches and every recorded output exists with its
recorded size and sha256 (`hash_files` computes them: the runner passes its cache of output
hashes, so an unchanged output is checked by `stat` alone); its folder then holds exactly those
files (check_stage_folder).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.io import atomic_write_json, iter_files, sha256_files
from pipeline.stage import StageInputs
from pipeline.text_files import read_json_file

MANIFEST_NAME = "manifest.json"
MANIFEST_LEVELS = 3  # indented down to each stage's keys; their values on one line each
VERSION = 1
log = logging.getLogger("pipeline")
HashFiles = Callable[[Sequence[Path]], list[str]]  # paths -> their sha256, in order


class Manifest:
    def __init__(
        self,
        run_dir: Path,
        stages: dict[str, Any] | None = None,
        report: dict[str, Any] | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.stages: dict[str, Any] = stages or {}
        self.report: dict[str, Any] = report or {}  # {"recipe": ..., "seed": ...} of the report

    @classmethod
    def load(cls, run_dir: Path) -> Manifest:
        path = Path(run_dir) / MANIFEST_NAME
        if not path.is_file():
            return cls(run_dir)
        data = read_json_file(path, "manifest")
        stages = data.get("stages") if isinstance(data, dict) else None
        if not isinstance(stages, dict):
            raise DataError(
                str(path), "not a manifest (no `stages` object); delete it to re-run every stage"
            )
        valid = {}
        for name, entry in stages.items():
            problem = _entry_problem(entry)
            if problem:  # that stage re-runs; the others keep their outputs
                log.warning("%s: stage '%s' entry %s; it will re-run", path, name, problem)
            else:
                valid[name] = entry
        report = data.get("report")
        return cls(run_dir, valid, report if isinstance(report, dict) else {})

    def save(self) -> None:
        atomic_write_json(
            self.run_dir / MANIFEST_NAME,
            {"version": VERSION, "report": self.report, "stages": self.stages},
            levels=MANIFEST_LEVELS,
        )

    def is_done(self, name: str, fingerprint: str, hash_files: HashFiles = sha256_files) -> bool:
        entry = self.stages.get(name)
        return (
            bool(entry)
            and entry.get("fingerprint") == fingerprint
            and self.outputs_intact(name, hash_files)
        )

    def outputs_intact(self, name: str, hash_files: HashFiles = sha256_files) -> bool:
        entry = self.stages.get(name)
        if not entry:
            return False
        paths = []
        for out in entry["outputs"]:
            path = self.run_dir / out["path"]
            if not path.is_file() or path.stat().st_size != out["bytes"]:
                return False  # cheap checks first: no hashing of a stage already broken
            paths.append(path)
        try:
            return hash_files(paths) == [out["sha256"] for out in entry["outputs"]]
        except OSError:  # removed or unreadable since the check above: not intact
            return False

    def unlisted(self, name: str) -> list[str]:
        """Files in the stage's folder that its entry does not list (run-relative, sorted)."""
        folder = self.run_dir / name
        listed = {o["path"] for o in self.stages.get(name, {}).get("outputs", [])}
        if not folder.is_dir():
            return []
        rels = (p.relative_to(self.run_dir).as_posix() for p in iter_files(folder))
        return [rel for rel in rels if rel not in listed]

    def num_part_records(self, name: str) -> int:
        """Records in the stage's main parts (rows, or array length for .npy)."""
        entry = self.stages.get(name, {})
        return sum(
            o.get("records") or 0
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


def check_stage_folder(manifest: Manifest, name: str) -> None:
    """A finished stage folder holds exactly what its manifest entry lists: anything else (a
    file a user or a tool put there) is named and refused, never deleted nor silently kept."""
    extra = manifest.unlisted(name)
    if extra:
        raise DataError(
            str(manifest.run_dir / name),
            f"{len(extra)} file(s) that {MANIFEST_NAME} does not list, first {extra[0]}: a "
            "finished stage folder holds only its outputs; move them out of the run folder, "
            "or re-run the stage with --force (which replaces the folder)",
        )


def _entry_problem(entry: Any) -> str | None:
    """Why a stage entry cannot be trusted (None: it can)."""
    if not isinstance(entry, dict):
        return f"is {type(entry).__name__}, not an object"
    if not isinstance(entry.get("fingerprint"), str):
        return "has no fingerprint"
    outputs = entry.get("outputs")
    if not isinstance(outputs, list):
        return "has no outputs list"
    for out in outputs:
        ok = (
            isinstance(out, dict)
            and isinstance(out.get("path"), str)
            and isinstance(out.get("sha256"), str)
            and isinstance(out.get("bytes"), int)
            and ".." not in Path(out["path"]).parts
            and not Path(out["path"]).is_absolute()
        )
        if not ok:
            return "has a malformed output record"
    return None
