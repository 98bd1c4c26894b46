"""Where `pipeline export` writes: target checks, a lock, unique temp names, the sweep of a
killed export's leftovers, and the publish step that puts a finished folder in place.

An export writes into `<parent>/.<OUT>.export-<pid>-<hex>.tmp/` and only then renames it to
OUT, so OUT is never partial. A replaced OUT is first renamed to `.<OUT>.old-<pid>-<hex>.tmp`,
removed once the new one is in place; a kill between the two renames leaves OUT missing and
the old copy beside it, which the next export (under the same lock) renames back. Every
failure to remove or replace is a PipelineError naming what is left where: nothing is ignored.
Not here: what is written (pipeline.export and its formats).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.io import crash_point

log = logging.getLogger("pipeline")
RUN_MARKER = "manifest.json"  # with one of RUN_SIGNS beside it: a run folder, never replaced
RUN_SIGNS = (".lock", "pipeline_report.json")  # every run folder has both (manifest.json alone
# is a common name: a web app's, a browser extension's)
# names the export code before this module used for its temp folders (swept for old kills too)
_LEGACY = (".{}.tmp", "..{}.tmp.arrow-tmp", ".{}.arrow-tmp", ".{}.old")


def _fail(action: str, path: Path, exc: OSError) -> PipelineError:
    return PipelineError(f"{path}: cannot {action} ({exc.strerror or exc})")


def _runs_inside(folder: Path) -> Path | None:
    """The first run folder (holding manifest.json) at or below `folder`, symlinks not followed."""
    for root, dirs, files in os.walk(folder):
        if RUN_MARKER in files and any(sign in files for sign in RUN_SIGNS):
            return Path(root)
        dirs.sort()
    return None


def _is_run(folder: Path) -> bool:
    return (folder / RUN_MARKER).is_file() and any((folder / s).exists() for s in RUN_SIGNS)


def _unwritable_inside(folder: Path) -> Path | None:
    """A folder at or below `folder` whose entries this process cannot remove, or None."""
    for root, dirs, _ in os.walk(folder):
        if not os.access(root, os.W_OK | os.X_OK):
            return Path(root)
        dirs.sort()
    return None


def check_target(run_dir: Path, out: Path, force: bool) -> None:
    """Refuse an OUT that equals, contains or lies inside the run folder (or any run folder),
    an existing OUT without `force`, and an existing OUT that cannot be removed whole."""
    target, root = Path(out).resolve(), Path(run_dir).resolve()
    if target == root or root in target.parents or target in root.parents:
        how = "contains" if target in root.parents else "is" if target == root else "lies inside"
        raise PipelineError(
            f"{out}: {how} the run folder {run_dir}; choose a folder outside it "
            "(an export must never replace or enter a run)"
        )
    for p in target.parents:
        if _is_run(p):
            raise PipelineError(
                f"{out}: lies inside the run folder {p}; choose a folder outside it"
            )
    if not (out.exists() or out.is_symlink()):
        return
    if not force:
        raise PipelineError(f"{out} exists; choose a new folder or pass --force to replace it")
    if out.is_dir() and not out.is_symlink():
        run = _runs_inside(out)
        if run is not None:
            raise PipelineError(
                f"{out}: holds the run folder {run}; --force never deletes a run, "
                "choose another folder"
            )
        stuck = _unwritable_inside(out)
        if stuck is not None:
            raise PipelineError(
                f"{out}: cannot be replaced, {stuck} is not writable (its files cannot be "
                "removed); fix its permissions or choose another folder"
            )


@contextlib.contextmanager
def export_lock(out: Path) -> Iterator[None]:
    """One export into OUT at a time: an advisory lock on `.<OUT>.lock` beside it (the OS drops
    it when the process dies, however it dies). The holder unlinks the file before unlocking; a
    process that locked a file since unlinked retries on the new one, so two never both hold."""
    import fcntl

    lock = out.parent / f".{out.name}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _fail("create the export lock", lock, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise PipelineError(
                f"{out}: another `pipeline export` into this folder is running; wait for it "
                "to finish or choose another folder"
            ) from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # locked a file its holder had already unlinked: take the new one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # while still locked: nobody can be holding the path's new file
        os.close(fd)


def _remove(path: Path) -> None:
    """Remove a file, link or folder tree; PipelineError naming the first entry that stays."""
    errors: list[tuple[str, OSError]] = []
    if path.is_symlink() or not path.is_dir():
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise _fail("remove", path, exc) from None
        return
    # onerror, not onexc (3.12+): exc_info's value is the OSError
    shutil.rmtree(path, onerror=lambda fn, p, info: errors.append((p, info[1])))
    if errors or path.exists() or path.is_symlink():
        where, exc = errors[0] if errors else (str(path), OSError("still there"))
        raise PipelineError(
            f"{path}: could not be removed: {where} ({getattr(exc, 'strerror', None) or exc}); "
            "remove it by hand"
        )


def leftovers(out: Path) -> tuple[list[Path], list[Path]]:
    """(temp folders, replaced copies) that killed exports into OUT left beside it."""
    parent, name = out.parent, out.name
    if not parent.is_dir():
        return [], []
    temps, olds = [], []
    legacy = {pattern.format(name) for pattern in _LEGACY}
    for p in sorted(parent.iterdir()):
        if p.name.startswith(f".{name}.export-") and p.name.endswith(".tmp"):
            temps.append(p)
        elif p.name.startswith(f".{name}.old-"):
            olds.append(p)
        elif p.name in legacy:
            (olds if p.name == f".{name}.old" else temps).append(p)
    return temps, olds


def sweep(out: Path) -> list[str]:
    """Under the export lock: remove what killed exports into OUT left, and put back a replaced
    OUT that a kill between publish's two renames left aside. Returns the names removed."""
    temps, olds = leftovers(out)
    if olds and not (out.exists() or out.is_symlink()):
        keep = olds.pop()  # the newest name sorts last only by chance: any copy is a full OUT
        try:
            os.rename(keep, out)
        except OSError as exc:
            raise _fail(f"restore {out} from", keep, exc) from None
        log.warning("%s: restored from %s (an export was killed while replacing it)", out, keep)
    removed = []
    for p in temps + olds:
        _remove(p)
        removed.append(p.name)
    if removed:
        log.info("removed leftovers of an interrupted export: %s", ", ".join(removed))
    return removed


def _unique(out: Path, kind: str) -> Path:
    return out.parent / f".{out.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"


def publish(tmp_dir: Path, out: Path, force: bool) -> None:
    """Move the finished `tmp_dir` to `out`; with `force` an existing OUT is replaced, only once
    tmp_dir is complete. The caller holds export_lock(out) and ran check_target."""
    exists = out.exists() or out.is_symlink()
    if exists and not force:
        raise PipelineError(f"{out} exists; choose a new folder or pass --force to replace it")
    crash_point(f"export: {out.name} written, before publishing it")
    if not exists:
        try:
            os.rename(tmp_dir, out)
        except OSError as exc:
            raise _fail(f"move the export into place as {out} from", tmp_dir, exc) from None
        return
    old = _unique(out, "old")
    try:
        os.rename(out, old)
    except OSError as exc:
        raise _fail("move the old export aside", out, exc) from None
    crash_point(f"export: old {out.name} moved aside, before the new one is in place")
    try:
        os.rename(tmp_dir, out)
    except OSError as exc:
        os.rename(old, out)  # put the old one back; a failure here is a real error too
        raise _fail(f"move the export into place as {out} from", tmp_dir, exc) from None
    try:
        _remove(old)
    except PipelineError as exc:
        raise PipelineError(f"{out} was replaced, but its old copy stays: {exc}") from None


@contextlib.contextmanager
def staged_output(run_dir: Path, out: Path, force: bool) -> Iterator[Path]:
    """Checks, lock, sweep, then a fresh unique work folder: yields the path (not yet created)
    the export writes OUT's content to; on success publishes it, always removes the work folder.
    Scratch files may go beside the yielded path (inside the work folder)."""
    out = Path(out)
    check_target(run_dir, out, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fail("create", out.parent, exc) from None
    with export_lock(out):
        sweep(out)
        check_target(run_dir, out, force)  # a restored OUT is checked like any other
        work = _unique(out, "export")
        work.mkdir()
        try:
            yield work / "out"
            publish(work / "out", out, force)
        except BaseException:
            try:
                _remove(work)
            except PipelineError as exc:  # reported, and the first error is the one raised
                log.error("%s", exc)
            raise
        _remove(work)
