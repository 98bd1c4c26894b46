"""The files a stage config names (source files, tokenizer, model, seed set, reference corpus)
and their content hashes, which enter the stage's fingerprint: an input edited in place re-runs
that stage and every stage after it.

A config field names input files when its name ends in `_path` or `_paths`, or when it is
declared with `config.input_path()`; its value (a string or a list of strings) is a file, a
folder (every file below it, hidden ones aside) or a glob. A value that names no file (a
builtin corpus name, a hub dataset name, null) adds nothing. Hashes are cached in
`<run>/.input_hashes.json` by (path, size, mtime, inode), so a re-run reads a 10 GB input only
when it changed.

The same cache class keeps the sha256 of a run's committed outputs in
`<run>/.output_hashes.json` (filled at each commit), so a re-run that skips every stage, or a
`--dry-run`, checks the outputs by `stat` alone. What such a key cannot see: docs/overview.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.errors import DataError
from pipeline.io import atomic_write_json, iter_files, sha256_file, sha256_files

CACHE_NAME = ".input_hashes.json"
OUTPUT_CACHE_NAME = ".output_hashes.json"
RACY_NS = 2_000_000_000  # a file modified this close to its hashing may change within one tick
TICK_WAIT_S, TICK_TRIES = 0.002, 25  # at most ~50 ms waiting for the filesystem clock to tick
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
    for f in dataclasses.fields(cfg):  # nested configs (download.sources entries, quality.external)
        value = getattr(cfg, f.name)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if dataclasses.is_dataclass(v) and not isinstance(v, type):
                files += input_files(v)
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
    """sha256 of files keyed by (path, size, mtime_ns, inode): a file is read again only when
    one of the four changed.

    Keys are resolved paths, or with `root` paths relative to it (a run folder's outputs: the
    cache survives moving the folder with `mv`, which keeps inodes and mtimes). `write=False`
    (a dry run) only reads the cache file and adds nothing to it.
    """

    def __init__(self, path: Path | None, root: Path | None = None, write: bool = True):
        self.path, self.root, self.write = path, root, write
        self.entries: dict[str, Any] = {}
        self.dirty = False
        if path is not None and path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.entries = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self.entries = {}  # a cache: rebuilt when unreadable

    def _key(self, path: Path) -> str:
        if self.root is None:
            return str(path.resolve())
        return Path(path).relative_to(self.root).as_posix()

    def _hit(self, key: str, stamp: list[int]) -> str | None:
        hit = self.entries.get(key)
        if (
            isinstance(hit, dict)
            and hit.get("stamp") == stamp
            and isinstance(hit.get("sha256"), str)
        ):
            return hit["sha256"]
        return None

    def describe(self, path: Path) -> dict[str, Any]:
        """{path, bytes, sha256} of one input file."""
        try:
            st = path.stat()
            key = str(path.resolve())
            stamp = _stamp(st)
            digest = self._hit(key, stamp)
            if digest is None:
                if st.st_size > 100 << 20:
                    log.info("hashing input %s (%.0f MB)", path, st.st_size / 1e6)
                digest = sha256_file(path)
                if time.time_ns() - st.st_mtime_ns > RACY_NS:  # else: still being written?
                    self.entries[key] = {"stamp": stamp, "sha256": digest}
                    self.dirty = True
        except OSError as exc:
            raise DataError(str(path), f"cannot read input file ({exc.strerror or exc})") from None
        return {"path": str(path), "bytes": st.st_size, "sha256": digest}

    def digests(self, paths: Sequence[Path]) -> list[str]:
        """sha256 of each file, in order: from the cache where the stamp matches, else read
        (thread pool) and cached when that is sound (`hash_new`). OSError for a missing file."""
        out = [self._hit(self._key(p), _stamp(os.stat(p))) for p in paths]
        todo = [i for i, digest in enumerate(out) if digest is None]
        fresh = self.hash_new([paths[i] for i in todo]) if todo else []
        for i, digest in zip(todo, fresh, strict=True):
            out[i] = digest
        return [str(digest) for digest in out]

    def hash_new(self, paths: Sequence[Path], keys: Sequence[str] | None = None) -> list[str]:
        """Read and hash `paths` (a thread pool); cache each under its key (default: its own)
        when its stamp is sound (`hash_stamped`)."""
        keys = [self._key(p) for p in paths] if keys is None else list(keys)
        clock_dir = self.path.parent if self.write and self.path is not None else None
        hashed = hash_stamped(paths, clock_dir)
        for key, (digest, stamp) in zip(keys, hashed, strict=True):
            if stamp is not None:
                self.put(key, stamp, digest)
        return [digest for digest, _ in hashed]

    def put(self, key: str, stamp: list[int], digest: str) -> None:
        """Cache `digest` for the file `key` as `stamp` (a sound one: `hash_stamped`)."""
        self.entries[key] = {"stamp": list(stamp), "sha256": digest}
        self.dirty = True

    def save(self) -> None:
        if self.write and self.dirty and self.path is not None and self.path.parent.is_dir():
            base = self.root if self.root is not None else Path()
            live = {k: v for k, v in self.entries.items() if os.path.exists(base / k)}
            atomic_write_json(self.path, live, levels=1)  # a file per line
            self.dirty = False


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def stamp_of(path: Path) -> list[int]:
    """[size, mtime_ns, inode] of a file: the key a hash is cached under."""
    return _stamp(os.stat(path))


def hash_stamped(
    paths: Sequence[Path], clock_dir: Path | None
) -> list[tuple[str, list[int] | None]]:
    """(sha256, stamp or None) of each file, read by a thread pool. The stamp is given only where
    it may key a cache: it did not change while the file was read, and the file's mtime is older
    than the filesystem clock taken (in `clock_dir`, `fs_clock_ns`) before the stat, so any
    later write, however soon, gives the file another mtime. Files written within the current
    tick wait for the next one (a few ms) or, past TICK_TRIES, get no stamp; so do all files
    when `clock_dir` is None or not writable (a dry run, a read-only run folder)."""
    paths = list(paths)
    clock = _clock(clock_dir)
    stamps = [stamp_of(p) for p in paths]
    tries = 0
    while clock is not None and tries < TICK_TRIES and any(s[1] >= clock for s in stamps):
        time.sleep(TICK_WAIT_S)  # stat after the clock: a write after it shows
        clock, tries = _clock(clock_dir), tries + 1
        stamps = [stamp_of(p) for p in paths]
    digests = sha256_files(paths)
    out: list[tuple[str, list[int] | None]] = []
    for p, stamp, digest in zip(paths, stamps, digests, strict=True):
        sound = clock is not None and stamp[1] < clock and stamp_of(p) == stamp
        out.append((digest, stamp if sound else None))
    return out


def _clock(folder: Path | None) -> int | None:
    if folder is None:
        return None
    try:
        return fs_clock_ns(folder)
    except OSError:  # read-only: nothing may be cached
        return None


def fs_clock_ns(folder: Path) -> int:
    """The time, in ns, that the filesystem of `folder` stamps on a file modified now: the mtime
    of a file created there (its own clock, which on NFS is the server's, not this machine's).
    The probe's name is a temp file's, so a kill's leftover is swept like one."""
    probe = Path(folder) / f".clock-{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        with open(probe, "wb") as f:
            return os.fstat(f.fileno()).st_mtime_ns
    finally:
        probe.unlink(missing_ok=True)


def describe_inputs(cfg: Any, cache: HashCache) -> list[dict[str, Any]]:
    return [cache.describe(p) for p in input_files(cfg)]


def fingerprint_part(inputs: list[dict[str, Any]]) -> list[list[Any]]:
    """What of the inputs enters the fingerprint: content and name, not the mtime (touching a
    file changes nothing) nor the folder (the config holds the path as given)."""
    return [[Path(i["path"]).name, i["bytes"], i["sha256"]] for i in inputs]
