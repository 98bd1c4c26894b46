"""Part-level resume: the finished per-part tasks of a stage are recorded in its temp folder.

The runner writes a stage into `<run>/.tmp-<stage>/`; that folder survives a crash. It holds
`.resume/stage.json` (the stage fingerprint) and one marker per finished task,
`.resume/<map>-<call>-<item>.json` = {"outputs": {path: [bytes, sha256, stamp]}, "result": the
task's return value in typed JSON}; stamp = [size, mtime_ns, inode] when it may key a cache
(pipeline.run.input_hashes.hash_stamped), else null (markers of older versions have none). The
task writes its marker itself (atomically) after its outputs are renamed into place, so a marker
never names a partial file. A re-run with the same fingerprint keeps the files its valid markers
name (by the stamp, which any write since the task changes, else size and sha256 re-checked),
deletes everything else (temp files, outputs of unfinished tasks) and returns the recorded
results instead of running those tasks again; the stage then ends with the same bytes. Any
other fingerprint (config, seed, upstream or code changed) starts from an empty folder.

Recorded tasks are those returning a dict with an "outputs" list, or a list of paths: the files
they wrote, relative to the stage folder. Others (sketches, counts) run again on a re-run.
The runner takes the hashes of a stage's outputs from these markers at commit where the stamp
still matches (`PartLedger.known_hashes`), so a task's outputs are read once, by the task.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.io import atomic_write_bytes, iter_files, sha256_file
from pipeline.run.input_hashes import hash_stamped, stamp_of
from pipeline.run.storage import push_files

RESUME_DIR = ".resume"
STAGE_FILE = "stage.json"
MISSING = object()


# ---------------------------------------------------------------- typed JSON (no pickle)


def encode(obj: Any) -> Any:
    """A JSON-able form of a task result; TypeError for a type it cannot round-trip."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError("object array")
        return {"__nd__": obj.dtype.str, "shape": list(obj.shape), "data": obj.ravel().tolist()}
    if isinstance(obj, np.generic):
        return {"__np__": obj.dtype.str, "v": obj.item()}
    if isinstance(obj, Counter):
        return {"__counter__": [[encode(k), encode(v)] for k, v in obj.items()]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: encode(v) for k, v in obj.items()}
        return {"__map__": [[encode(k), encode(v)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v) for v in obj]}
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, Path):
        return {"__path__": str(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        if not cls.__module__.startswith("pipeline."):
            raise TypeError(f"cannot record a {cls.__name__} (not a pipeline dataclass)")
        fields = {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {"__dc__": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    raise TypeError(f"cannot record a {type(obj).__name__}")


def decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__nd__" in obj:
        flat = np.array(obj["data"], dtype=np.dtype(obj["__nd__"]))
        return flat.reshape(obj["shape"])
    if "__np__" in obj:
        return np.dtype(obj["__np__"]).type(obj["v"])
    if "__counter__" in obj:
        return Counter({decode(k): decode(v) for k, v in obj["__counter__"]})
    if "__map__" in obj:
        return {_hashable(decode(k)): decode(v) for k, v in obj["__map__"]}
    if "__tuple__" in obj:
        return tuple(decode(v) for v in obj["__tuple__"])
    if "__path__" in obj:
        return Path(obj["__path__"])
    if "__dc__" in obj:
        return _dataclass(obj["__dc__"])(**{k: decode(v) for k, v in obj["fields"].items()})
    return {k: decode(v) for k, v in obj.items()}


# modules moved by the house layout (issue 26): a ledger written before it still resumes
MOVED_MODULES = {
    "pipeline.dedup.reduce": "pipeline.stages.dedup.reduce",
    "pipeline.dedup.partitioned": "pipeline.stages.dedup.tasks",
    "pipeline.dedup.verify": "pipeline.stages.dedup.verify",
    "pipeline.dedup.files": "pipeline.stages.dedup.files",
    "pipeline.quality.lmstage": "pipeline.stages.quality.lm",
    "pipeline.quality.clfstage": "pipeline.stages.quality.classifier",
    "pipeline.quality.parttasks": "pipeline.stages.quality.parttasks",
    "pipeline.quality.writepart": "pipeline.stages.quality.write",
    "pipeline.quality.partcols": "pipeline.stages.quality.partcols",
    "pipeline.stages.download_split": "pipeline.stages.download.split",
    "pipeline.stages.shard_bounded": "pipeline.stages.shard.bounded",
}


def _dataclass(name: str) -> type:
    """A dataclass of this package by `module:qualname` (nothing else is ever constructed)."""
    module, _, qualname = name.partition(":")
    module = MOVED_MODULES.get(module, module)
    if not module.startswith("pipeline."):
        raise ValueError(f"not a pipeline class: {name}")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"not a dataclass: {name}")
    return cls


def _hashable(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


# ---------------------------------------------------------------- task side


def written_files(result: Any) -> list[str] | None:
    """The files a task reports it wrote (relative to the stage folder), or None."""
    outs = result.get("outputs") if isinstance(result, dict) else result
    if isinstance(outs, list) and all(isinstance(o, str) for o in outs):
        return outs
    return None


def record_part(
    job: tuple[str, Any],
    fn: Callable[[Any], Any],
    stage_dir: str,
    remote: tuple[str, str] | None = None,
) -> Any:
    """Run fn(item); if it reports the files it wrote, record them and its result atomically.

    Runs in the worker (pool process or Ray task): only the task knows when its files are done.
    A result that cannot be recorded is returned as is; that task simply runs again on resume.
    remote = (url, working copy) of a run folder on a URL: the outputs, then the marker, are
    uploaded there too, so the URL's `.tmp-<stage>/` never holds a marker without its files.
    """
    key, item = job
    result = fn(item)
    outs = written_files(result)
    if outs is None:
        return result
    root = Path(stage_dir)
    try:
        hashed = hash_stamped([root / o for o in outs], root.parent)  # clock probe beside it
        body = {
            "outputs": {
                o: [(root / o).stat().st_size, digest, stamp]
                for o, (digest, stamp) in zip(outs, hashed, strict=True)
            },
            "result": encode(result),
        }
    except (TypeError, OSError):
        return result
    atomic_write_bytes(root / RESUME_DIR / f"{key}.json", json.dumps(body).encode())
    if remote is not None:
        url, local = remote
        rel = root.relative_to(local).as_posix()
        files = [f"{rel}/{o}" for o in outs] + [f"{rel}/{RESUME_DIR}/{key}.json"]
        push_files(url, local, files)
    return result


# ---------------------------------------------------------------- driver side


class PartLedger:
    """The resume state of one stage's temp folder (see the module docstring)."""

    def __init__(
        self, stage_dir: Path, markers: dict[str, dict], remote: tuple[str, str] | None = None
    ):
        self.stage_dir = Path(stage_dir)
        self.remote = remote  # (url, working copy) when the run folder is on a URL
        self._markers = markers  # key -> parsed marker, only valid ones
        self._calls: Counter[str] = Counter()
        self.reused = 0  # tasks whose recorded result was returned instead of a re-run

    @classmethod
    def open(
        cls,
        stage_dir: Path,
        fingerprint: str,
        fresh: bool = False,
        remote: tuple[str, str] | None = None,
    ) -> PartLedger:
        """Validate `stage_dir` for `fingerprint`: keep what finished parts wrote, or start
        empty (no folder, another fingerprint, `fresh`)."""
        stage_dir = Path(stage_dir)
        meta = stage_dir / RESUME_DIR / STAGE_FILE
        try:
            same = not fresh and json.loads(meta.read_text())["fingerprint"] == fingerprint
        except (OSError, ValueError, KeyError, TypeError):
            same = False
        if not same:
            shutil.rmtree(stage_dir, ignore_errors=True)
            atomic_write_bytes(meta, json.dumps({"fingerprint": fingerprint}).encode())
            return cls(stage_dir, {}, remote)
        markers = _valid_markers(stage_dir)
        keep = {meta}
        for key, m in markers.items():
            keep.add(stage_dir / RESUME_DIR / f"{key}.json")
            keep.update(stage_dir / o for o in m["outputs"])
        for path in iter_files(stage_dir):
            if path not in keep:  # temp files, outputs of unfinished tasks, stage-level files
                path.unlink()
        return cls(stage_dir, markers, remote)

    def __len__(self) -> int:
        return len(self._markers)

    def keys(self, desc: str, n: int) -> list[str]:
        """Marker keys for the items of the next map call labelled `desc` in this stage."""
        slug = re.sub(r"[^a-z0-9]+", "_", (desc or "map").lower()).strip("_")
        call = self._calls[slug]
        self._calls[slug] += 1
        return [f"{slug}-{call}-{i:06d}" for i in range(n)]

    def recorded(self, keys: list[str]) -> tuple[list[Any], list[int]]:
        """(recorded results, None where there is none; the indices still to run)."""
        results = [self.lookup(k) for k in keys]
        todo = [i for i, r in enumerate(results) if r is MISSING]
        return [None if r is MISSING else r for r in results], todo

    def lookup(self, key: str) -> Any:
        marker = self._markers.get(key)
        if marker is None:
            return MISSING
        self.reused += 1
        return decode(marker["result"])

    def wrap(self, fn: Callable[[Any], Any]) -> Callable[[tuple[str, Any]], Any]:
        import functools

        if self.remote is None:  # the same partial as before: nothing changes for a local run
            return functools.partial(record_part, fn=fn, stage_dir=str(self.stage_dir))
        return functools.partial(
            record_part, fn=fn, stage_dir=str(self.stage_dir), remote=self.remote
        )

    def finished_on_disk(self) -> int:
        """Tasks whose markers are in the folder now (this run's and a crashed run's): what a
        re-run would resume from."""
        folder = self.stage_dir / RESUME_DIR
        return sum(1 for p in folder.glob("*.json") if p.name != STAGE_FILE)

    def known_hashes(self) -> dict[str, tuple[list[int], str]]:
        """{path in the stage folder: (stamp, sha256)} of every output a marker records with a
        stamp: reused tasks' and those of this run (read before `close`)."""
        out: dict[str, tuple[list[int], str]] = {}
        for path in sorted((self.stage_dir / RESUME_DIR).glob("*.json")):
            if path.name == STAGE_FILE:
                continue
            try:
                outputs = json.loads(path.read_text())["outputs"]
                for rel, rec in outputs.items():
                    if len(rec) > 2 and isinstance(rec[2], list) and isinstance(rec[1], str):
                        out[rel] = (rec[2], rec[1])
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue  # a marker that cannot be read: its files are hashed at commit
        return out

    def close(self) -> None:
        """The stage finished: drop the markers (they must not become stage outputs)."""
        shutil.rmtree(self.stage_dir / RESUME_DIR, ignore_errors=True)


def _intact(path: Path, size: int, sha: str, stamp: list[int] | None = None) -> bool:
    """The file a marker records is still what its task wrote: by its stamp when it has one
    (unchanged since the task hashed it), else by size and sha256."""
    if not path.is_file() or os.path.getsize(path) != size:
        return False
    return (stamp is not None and stamp_of(path) == stamp) or sha256_file(path) == sha


def _valid_markers(stage_dir: Path) -> dict[str, dict]:
    """Markers whose every output still has its recorded size and sha256; others deleted."""
    out = {}
    folder = stage_dir / RESUME_DIR
    for path in sorted(folder.glob("*.json")):
        if path.name == STAGE_FILE:
            continue
        try:
            marker = json.loads(path.read_text())
            ok = all(_intact(stage_dir / rel, *rec) for rel, rec in marker["outputs"].items())
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if ok:
            out[path.stem] = marker
        else:
            path.unlink(missing_ok=True)
    return out
