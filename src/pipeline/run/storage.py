"""A run folder on a URL (s3://, gs://, hdfs://, file://, memory://: anything pyarrow.fs or
fsspec opens), with stage code that reads and writes local files only.

For a URL `out_dir` the runner works in a node-local working copy (a scratch folder, removed at
the end) and a `UrlStore` keeps the URL in step at fixed points. No rename is ever needed on the
URL: each file is one PUT (atomic on object stores: the object appears whole or not at all),
and the manifest PUT is the stage's commit, as the manifest rename is for a local folder:

1. start: the URL is pulled into the working copy (manifest, committed stage folders, resume
   folders `.tmp-<stage>/`); the runner then plans and checks hashes as for a local folder;
2. a recorded task (pipeline.run.resume) uploads its outputs, then its marker, to `.tmp-<stage>/`;
3. commit: the stage's files are uploaded to `<stage>/`, then `manifest.json` (the commit),
   then stale keys of `<stage>/` and the whole `.tmp-<stage>/` are deleted, then the report.

A crash before the manifest PUT leaves the old manifest, whose sha256s no longer match the
overwritten keys of `<stage>/`: the stage re-runs (resuming from `.tmp-<stage>/`). A crash after
it leaves extra keys only, deleted by the next run. A local `out_dir` uses none of this: its
store is a plain `Store`, whose every step is a no-op, and the run folder is the working copy
itself. The runner calls the same methods at the same points for both.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError
from pipeline.io import crash_point
from pipeline.urlfs import url_filesystem

log = logging.getLogger("pipeline")
CHUNK = 8 << 20  # bytes per read/write when copying a file to or from the URL
_OPEN: dict[str, tuple[Any, str]] = {}  # url -> (pyarrow filesystem, root), per process
PUSHED: set[str] = set()  # files push_files uploaded in this process (run.remote skips them)


def is_url(out_dir: str | Path) -> bool:
    return "://" in str(out_dir)


def join_url(out_dir: str, name: str) -> str:
    """`<out_dir>/<name>`, before any query string of a URL (s3://b/run?region=x)."""
    if not is_url(out_dir):
        return f"{out_dir}/{name}"
    base, sep, query = str(out_dir).partition("?")
    return f"{base.rstrip('/')}/{name}{sep}{query}"


def open_fs(url: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, root path in it) for `url`: pyarrow's own filesystems first (local,
    s3, gcs, hdfs), any other fsspec protocol through PyFileSystem(FSSpecHandler)."""
    if url in _OPEN:
        return _OPEN[url]
    try:
        _OPEN[url] = url_filesystem(url)
    except LookupError as exc:
        raise PipelineError(
            f"out_dir {url}: no filesystem for this URL ({exc}); use a local path or a URL "
            "pyarrow or fsspec can open (s3://, gs://, hdfs://, file://, memory://)"
        ) from None
    return _OPEN[url]


class Store:
    """The store of a local run folder: the working copy is the run folder itself, so each step
    that keeps a URL in step (`UrlStore`, below, overrides them all) does nothing here.

    Paths given to its methods are relative to the run folder, '/'-separated."""

    remote = False  # whether a URL is kept in step (then `url` names it, `local` is a copy)

    def __init__(self, local: Path):
        self.local = Path(local)
        self.url = str(self.local)
        self.token: str | None = None  # names a run's copies on other nodes (URL runs only)

    @property
    def shared_dir(self) -> Path | None:
        """The folder every worker must see: the run folder itself (a URL: None, the workers
        sync through the URL)."""
        return self.local

    @property
    def ledger_remote(self) -> tuple[str, str] | None:
        """What finished tasks upload to (pipeline.run.resume): nothing."""
        return None

    def where(self, rel: str) -> str:
        """`rel` as a user finds it (log lines and errors)."""
        return str(self.local / rel)

    def see(self, report: str, stage: str) -> str:
        """How a user looks at the report and a stage's output (error messages)."""
        where = self.local
        return f"see `pipeline report {where}` and `pipeline inspect {where} --stage {stage}`"

    def sweep(self, removed: list[str], up_to_date: list[str]) -> None:
        """After the runner swept the working copy of what killed runs left (`removed`)."""

    def upload(self, rel: str) -> None:
        """Make the URL's `rel` equal the working copy's."""

    def upload_quietly(self, rel: str) -> None:
        """`upload` for a view (report.html): a failure only warns."""

    def push_dir(self, rel: str) -> None:
        """Make the URL's folder `rel` hold exactly the working copy's."""

    def prune(self, rel: str) -> None:
        """Delete what the URL has under `rel` and the working copy has not."""

    def remove_dir(self, rel: str) -> None:
        """Delete everything the URL has under `rel`."""


class UrlStore(Store):
    """Keeps `url` in step with the working copy `local` (see the module docstring)."""

    remote = True

    def __init__(self, url: str, local: Path):
        self.url, self.local = url, Path(local)
        self.fs, self.root = open_fs(url)
        self._dirs: set[str] = set()  # folders created on the URL by this Store
        self.token = uuid.uuid4().hex[:16]  # names this run's copies on other nodes

    @property
    def shared_dir(self) -> Path | None:
        return None

    @property
    def ledger_remote(self) -> tuple[str, str] | None:
        return self.url, str(self.local)

    def where(self, rel: str) -> str:
        return join_url(self.url, rel)

    def see(self, report: str, stage: str) -> str:
        return f"see {join_url(self.url, report)} and {join_url(self.url, stage)}/"

    def sweep(self, removed: list[str], up_to_date: list[str]) -> None:
        """What the runner swept from the working copy goes from the URL too, and so does the
        resume folder of a stage that is up to date (a crash between its manifest PUT and the
        deletion of `.tmp-<stage>/` leaves one)."""
        stale = {f".tmp-{name}" for name in up_to_date}
        for name in sorted(stale):
            shutil.rmtree(self.local / name, ignore_errors=True)
        for name in sorted(set(removed) | stale):
            self.remove_dir(name)

    # ------------------------------------------------------------ listing and one file

    def _key(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def listing(self, rel: str = "") -> dict[str, int]:
        """{path relative to the run folder: size} of every file under `rel` on the URL."""
        import pyarrow.fs as pafs

        base = self._key(rel)
        sel = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        out = {}
        for info in self.fs.get_file_info(sel):
            if info.type == pafs.FileType.File:
                out[info.path[len(self.root) + 1 :]] = info.size
        return out

    def upload(self, rel: str) -> None:
        """One local file to its key: a single stream, visible whole once closed."""
        crash_point(f"before uploading {rel}")
        parent = self._key(rel).rpartition("/")[0]
        if parent not in self._dirs:  # local and hdfs need the folder; object stores do not
            if self.fs.type_name not in ("s3", "gcs"):  # (there it is an extra empty key)
                self.fs.create_dir(parent, recursive=True)
            self._dirs.add(parent)
        with open(self.local / rel, "rb") as src, self.fs.open_output_stream(self._key(rel)) as dst:
            while block := src.read(CHUNK):
                dst.write(block)

    def download(self, rel: str) -> None:
        """One key to the working copy, through a temp file and a rename (never half a file)."""
        path = self.local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.pull.tmp")
        with self.fs.open_input_stream(self._key(rel)) as src, open(tmp, "wb") as dst:
            while block := src.read(CHUNK):
                dst.write(block)
        tmp.replace(path)

    def delete(self, rels: list[str]) -> None:
        for rel in rels:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(self._key(rel))

    # ------------------------------------------------------------ folders

    def pull(self, rel: str = "", skip: tuple[str, ...] = ()) -> list[str]:
        """Download every file under `rel` missing from the working copy (or of another size);
        names starting with one of `skip` stay remote. Returns what was downloaded."""
        got = []
        for path, size in sorted(self.listing(rel).items()):
            if path.startswith(skip):
                continue
            local = self.local / path
            if not local.is_file() or local.stat().st_size != size:
                self.download(path)
                got.append(path)
        return got

    def pull_path(self, rel: str) -> None:
        """Download the file `rel`, or every file under the folder `rel`, where missing."""
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self._key(rel))
        if info.type == pafs.FileType.File:
            local = self.local / rel
            if not local.is_file() or local.stat().st_size != info.size:
                self.download(rel)
        elif info.type == pafs.FileType.Directory:
            self.pull(rel)

    def push_dir(self, rel: str) -> None:
        """Make `<url>/<rel>/` hold exactly the local folder: upload every local file, then
        delete the keys no local file has (stale outputs of an older run)."""
        base = self.local / rel
        mine = sorted(p.relative_to(self.local).as_posix() for p in base.rglob("*") if p.is_file())
        for path in mine:
            self.upload(path)
        self.prune(rel)

    def prune(self, rel: str) -> None:
        """Delete the keys under `rel` that the working copy does not have."""
        self.delete([p for p in sorted(self.listing(rel)) if not (self.local / p).is_file()])

    def remove_dir(self, rel: str) -> None:
        """Delete every key under `rel` (or the one key `rel`)."""
        import pyarrow.fs as pafs

        if self.fs.get_file_info(self._key(rel)).type == pafs.FileType.File:
            self.delete([rel])
            return
        self.delete(sorted(self.listing(rel)))
        with contextlib.suppress(OSError):
            self.fs.delete_dir(self._key(rel))

    def check(self, write: bool = True) -> None:
        """The URL can be listed (and written), or one line says why."""
        probe = ".pipeline-probe.tmp"  # a leftover of a kill is swept like any temp file
        try:
            if write:
                self.fs.create_dir(self.root, recursive=True)
                with self.fs.open_output_stream(self._key(probe)) as f:
                    f.write(b"probe")
                self.fs.delete_file(self._key(probe))
            self.listing()
        except Exception as exc:  # noqa: BLE001 - any backend's error (auth, network, bucket)
            raise PipelineError(
                f"out_dir {self.url}: cannot write the run folder ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200] if str(exc) else exc!r}); check the URL and "
                "its credentials, or use a local path"
            ) from None

    def upload_quietly(self, rel: str) -> None:
        """For a view (report.html): a failed upload warns; the next run pushes it again."""
        try:
            self.upload(rel)
        except OSError as exc:
            log.warning("%s not uploaded to %s (%s)", rel, self.url, exc)


@contextlib.contextmanager
def working_copy(url: str, write: bool = True) -> Iterator[Store]:
    """A fresh node-local copy of the run folder at `url`, pulled at start, removed at the end
    (the URL is the truth; the runner pushes to it at each commit). A local path is its own
    working copy: its Store, nothing pulled or removed."""
    if not is_url(url):
        yield Store(Path(url))
        return
    open_fs(url)  # a URL nothing opens fails here, before any scratch folder exists
    store = UrlStore(url, Path(tempfile.mkdtemp(prefix="pipeline-run-")))
    try:
        store.check(write)
        got = store.pull(skip=(".lock", ".old-"))
        log.info("working copy of %s in %s (%d files pulled)", url, store.local, len(got))
        yield store
    finally:
        shutil.rmtree(store.local, ignore_errors=True)


def stamp(path: Path) -> tuple[int, int] | None:
    """(size, mtime) of a file, None if it is missing: did a writer touch it?"""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


# ---------------------------------------------------------------- task side (pipeline.run.resume)


def push_files(url: str | None, local: str, rels: list[str]) -> None:
    """Upload `rels` (relative to the working copy `local`) in order; nothing for a local run.
    Runs in workers: the order is the order of visibility (outputs first, their marker last)."""
    if url is None:
        return
    store = UrlStore(url, Path(local))
    for rel in rels:
        store.upload(rel)
        PUSHED.add(rel)
