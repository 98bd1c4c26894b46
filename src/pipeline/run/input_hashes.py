"""The files a stage config names (source files, tokenizer, model, seed set, reference corpus)
and their content hashes, which enter the stage's fingerprint: an input edited in place re-runs
that stage and every stage after it.

A config field names input files when its name ends in `_path` or `_paths`, or when it is
declared with `config.input_path()`; its value (a string or a list of strings) is a file, a
folder (every file below it, hidden ones aside) or a glob. A value that names no file (a
builtin corpus name, a hub dataset name, null) adds nothing. Hashes are cached in
`<run>/.input_hashes.json` by (path, size, mtime, inode), so a re-run reads a 10 GB input only
when it changed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.io import atomic_write_json, iter_files, sha256_file

CACHE_NAME = ".input_hashes.json"
RACY_NS = 2_000_000_000  # a file modified this close to its hashing may change within one tick
log = logging.getLogger("pipeline")


def input_fields(cfg: Any) -> list[str]:
    """Names of the config's fields that name input files."""
    return [
        f.name
        for f in dataclasses.fields(cfg)
        if f.metadata.get("input") or f.name.endswith(("_path", "_paths"))
    ]


def input_files(cfg: Any) -> list[Path]:
    """Every existing file the config's input fields name, in field then sorted order."""
    from pipeline.sources.files import expand_paths

    files: list[Path] = []
    for name in input_fields(cfg):
        value = getattr(cfg, name)
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if not isinstance(v, str) or not v:
                continue
            folder = Path(v).expanduser()
            if folder.is_dir():  # every file below it: a reader may recurse (hf data folders)
                files += [
                    p
                    for p in iter_files(folder)
                    if not any(part.startswith(".") for part in p.relative_to(folder).parts)
                ]
            else:
                files += expand_paths(v)
    return files


class HashCache:
    """sha256 of files keyed by (resolved path, size, mtime_ns, inode)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, Any] = {}
        self.dirty = False
        if path is not None and path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.entries = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self.entries = {}  # a cache: rebuilt when unreadable

    def describe(self, path: Path) -> dict[str, Any]:
        """{path, bytes, sha256} of one input file."""
        try:
            st = path.stat()
            key = str(path.resolve())
            stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
            hit = self.entries.get(key)
            if isinstance(hit, dict) and hit.get("stamp") == stamp and "sha256" in hit:
                digest = hit["sha256"]
            else:
                if st.st_size > 100 << 20:
                    log.info("hashing input %s (%.0f MB)", path, st.st_size / 1e6)
                digest = sha256_file(path)
                if time.time_ns() - st.st_mtime_ns > RACY_NS:  # else: still being written?
                    self.entries[key] = {"stamp": stamp, "sha256": digest}
                    self.dirty = True
        except OSError as exc:
            raise DataError(str(path), f"cannot read input file ({exc.strerror or exc})") from None
        return {"path": str(path), "bytes": st.st_size, "sha256": digest}

    def save(self) -> None:
        if self.dirty and self.path is not None and self.path.parent.is_dir():
            live = {k: v for k, v in self.entries.items() if os.path.exists(k)}
            atomic_write_json(self.path, live)
            self.dirty = False


def describe_inputs(cfg: Any, cache: HashCache) -> list[dict[str, Any]]:
    return [cache.describe(p) for p in input_files(cfg)]


def fingerprint_part(inputs: list[dict[str, Any]]) -> list[list[Any]]:
    """What of the inputs enters the fingerprint: content and name, not the mtime (touching a
    file changes nothing) nor the folder (the config holds the path as given)."""
    return [[Path(i["path"]).name, i["bytes"], i["sha256"]] for i in inputs]
