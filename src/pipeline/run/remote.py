"""Ray tasks over a run folder on a URL: each node works in its own copy, synced through the URL.

Stage code passes local paths to its tasks (parts, `out_dir`, side files). With a URL run folder
those paths point into the driver's working copy (pipeline.run.storage), which other nodes lack. So
around each map over Ray (`MapSync`, driver side):

- before: the driver uploads what it wrote into the stage temp folder since the last map (a
  model, a tokenizer the tasks read); tasks are wrapped in `run_task`;
- in the task: on the driver's own node it simply runs. Elsewhere every path under the driver's
  copy, in the task's function and item, is mapped into the node's copy
  (`$TMPDIR/pipeline-node-<token>`); the files and folders they name are pulled from the URL
  where missing; the task runs; the files it wrote into the stage temp folder are uploaded
  (resume markers last, so a marker never names a file not yet there), and paths in its result
  are mapped back;
- after: the driver pulls the new files of the stage temp folder, so driver code that reads what
  tasks wrote (and the commit, which hashes every output) sees them.

Only names change: the bytes a task writes are those of a local run. Files are write-once within
a stage run (tasks are pure functions of their inputs), so "missing or another size" is enough
to decide a download.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.run.resume import RESUME_DIR
from pipeline.run.storage import PUSHED, Store, UrlStore

DRIVER_MARK = ".pipeline-driver"  # in the driver's working copy: its token (same node test)
PER_PROCESS_ENV = "PIPELINE_NODE_PER_PROCESS"  # tests: each worker process acts as a node


@dataclass(frozen=True)
class TaskSpec:
    url: str
    driver_root: str  # the driver's working copy: the prefix of the paths in tasks' arguments
    stage: str  # the stage temp folder tasks write into, relative to the run folder
    token: str  # this run's id: names the nodes' copies
    folders: tuple[str, ...] = ()  # the stage folder's sub-folders (tasks write into them)


def node_root(spec: TaskSpec) -> Path:
    name = f"pipeline-node-{spec.token}"
    if os.environ.get(PER_PROCESS_ENV):
        name += f"-{os.getpid()}"
    return Path(tempfile.gettempdir()) / name


def on_driver_node(spec: TaskSpec) -> bool:
    if os.environ.get(PER_PROCESS_ENV):
        return False
    try:
        return (Path(spec.driver_root) / DRIVER_MARK).read_text() == spec.token
    except OSError:
        return False


def translate(obj: Any, old: str, new: str) -> Any:
    """`obj` with every path (str or Path) under `old` moved under `new`, through tuples, lists,
    dicts, functools.partial and dataclasses; anything else is returned as is."""
    if isinstance(obj, str):
        return new + obj[len(old) :] if obj == old or obj.startswith(old + "/") else obj
    if isinstance(obj, Path):
        moved = translate(str(obj), old, new)
        return obj if moved is str(obj) else Path(moved)
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(translate(v, old, new) for v in obj)
    if isinstance(obj, list):
        return [translate(v, old, new) for v in obj]
    if isinstance(obj, dict):
        return {k: translate(v, old, new) for k, v in obj.items()}
    if isinstance(obj, functools.partial):
        args = translate(obj.args, old, new)
        return functools.partial(obj.func, *args, **translate(obj.keywords, old, new))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = [f for f in dataclasses.fields(obj) if f.init]
        changes = {f.name: translate(getattr(obj, f.name), old, new) for f in fields}
        changed = {k: v for k, v in changes.items() if v is not getattr(obj, k)}
        return dataclasses.replace(obj, **changed) if changed else obj
    return obj


def referenced(obj: Any, root: str) -> set[str]:
    """Paths under `root` that `obj` names, relative to it (what translate would move)."""
    found: set[str] = set()

    def walk(o: Any) -> None:
        if isinstance(o, (str, Path)):
            s = str(o)
            if s.startswith(root + "/"):
                found.add(s[len(root) + 1 :])
        elif isinstance(o, (tuple, list)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, functools.partial):
            walk(o.args)
            walk(o.keywords)
        elif dataclasses.is_dataclass(o) and not isinstance(o, type):
            for f in dataclasses.fields(o):
                walk(getattr(o, f.name))

    walk(obj)
    return found


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    out = {}
    if folder.is_dir():
        for p in folder.rglob("*"):
            if p.is_file() and not p.name.endswith(".tmp"):
                st = p.stat()
                out[p.as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def run_task(item: Any, fn: Any, spec: TaskSpec) -> Any:
    """One task of a map over a URL run folder (see the module docstring)."""
    if on_driver_node(spec):
        return fn(item)
    root = node_root(spec)
    store = UrlStore(spec.url, root)
    fn, item = translate((fn, item), spec.driver_root, str(root))
    for rel in sorted(referenced((fn, item), str(root))):
        store.pull_path(rel)
    folder = root / spec.stage
    for sub in ("", *spec.folders):  # empty folders the driver made: not on the URL
        (folder / sub).mkdir(parents=True, exist_ok=True)
    before = _snapshot(folder)
    PUSHED.clear()
    result = fn(item)
    after = _snapshot(folder)
    new = [p for p, stamp in sorted(after.items()) if before.get(p) != stamp]
    rels = [Path(p).relative_to(root).as_posix() for p in new]
    rels = [r for r in rels if r not in PUSHED]
    rels.sort(key=lambda r: f"/{RESUME_DIR}/" in f"/{r}")  # markers last
    for rel in rels:
        store.upload(rel)
    PUSHED.clear()
    return translate(result, str(root), spec.driver_root)


def remove_node_copies(token: str) -> None:
    """Run on each node at the end of a run: its copies of the run folder go."""
    for p in Path(tempfile.gettempdir()).glob(f"pipeline-node-{token}*"):
        shutil.rmtree(p, ignore_errors=True)


def map_sync(store: Store, stage: str, remote_nodes: bool) -> MapSync | None:
    """What keeps the stage folder `stage` in step around each map: a MapSync when the run
    folder is on a URL and tasks may run on other nodes; else None (tasks see the driver's
    own folder)."""
    if isinstance(store, UrlStore) and remote_nodes:
        return MapSync(store, stage, store.token)
    return None


class MapSync:
    """Driver side: keeps the URL's stage temp folder and the driver's copy in step around each
    map over Ray."""

    def __init__(self, store: UrlStore, stage: str, token: str):
        self.store, self.stage, self.token = store, stage, token
        (store.local / DRIVER_MARK).write_text(token)
        self._seen = _snapshot(store.local / stage)

    def wrap(self, fn: Any) -> Any:
        """Sync the stage folder (what the driver wrote goes up); `fn` as a URL-aware task."""
        self._sync()
        folder = self.store.local / self.stage
        subs = tuple(sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*/")))
        spec = TaskSpec(self.store.url, str(self.store.local), self.stage, self.token, subs)
        return functools.partial(run_task, fn=fn, spec=spec)

    def after(self) -> None:
        """Sync again: what tasks on other nodes wrote comes down, what tasks on this node
        wrote (into this very folder) goes up for the next map's tasks elsewhere."""
        self._sync()

    def _sync(self) -> None:
        store, local = self.store, self.store.local
        now = _snapshot(local / self.stage)
        gone = [Path(p).relative_to(local).as_posix() for p in self._seen if p not in now]
        store.delete(gone)  # scratch the driver removed (a stage's own temp files)
        got = set(store.pull(self.stage))
        remote = store.listing(self.stage)
        for p, stamp in sorted(_snapshot(local / self.stage).items()):
            rel = Path(p).relative_to(local).as_posix()
            old = self._seen.get(p)
            # new here and not up there, or rewritten here (a new file already up there was
            # uploaded by the task that wrote it)
            if rel not in got and (rel not in remote or (old is not None and old != stamp)):
                store.upload(rel)
        self._seen = _snapshot(local / self.stage)
