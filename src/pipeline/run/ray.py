"""Run per-part work as Ray tasks (`executor: {kind: ray, address: ...}`, the `ray` extra).

Same contract as the local pool: results in item order, so outputs are byte-identical to the
local executor's for any cluster size. Tasks read and write parts on a path every node sees
(`out_dir` must be shared: NFS, Lustre, a FUSE mount; checked at start) and return only small
summaries. At most `max_in_flight` tasks (default 2 x cluster CPUs) are submitted at once and
refilled from `ray.wait`, so the driver never holds more than that many pending results.

Faults: a task whose worker process or node dies, or that raises OSError (a shared-filesystem
hiccup), is re-run up to `max_retries` times by Ray; any other exception is a bug or bad data
and fails the stage at once with the task's own error. Part files are written under a unique
temp name and renamed, so a retried or duplicated task cannot leave a corrupt part.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pipeline
from pipeline.config import ExecutorConfig
from pipeline.errors import PipelineError
from pipeline.executor import BaseExecutor, TaskLedger, TaskSync
from pipeline.progress import Progress
from pipeline.run.remote import PER_PROCESS_ENV

log = logging.getLogger("pipeline")


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    return fn(item)


def probe_path(run_dir: Path) -> Path:
    """The file check_shared writes for every node to see: a dot name ending in .tmp, so a run
    killed during the probe leaves a temp file the next run's sweep_temps removes."""
    return Path(run_dir) / f".ray-probe-{uuid.uuid4().hex}.tmp"


def _probe(path: str | None) -> tuple[str, bool, str]:
    """Run on one node: (node ip, can it read `path`, the pipeline version it imports)."""
    import ray

    seen = path is None or Path(path).is_file()
    return ray.util.get_node_ip_address(), seen, pipeline.__version__


def _cleanup(token: str) -> None:
    from pipeline.run.remote import remove_node_copies

    remove_node_copies(token)


def _import_ray():
    try:
        import ray
    except ImportError:
        raise PipelineError(
            "executor kind ray needs Ray: pip install 'pipeline[ray]' (or set executor.kind: local)"
        ) from None
    return ray


class RayExecutor(BaseExecutor):
    remote_nodes = True

    def __init__(self, cfg: ExecutorConfig, workers: int = 1, progress: bool = False):
        ray = _import_ray()
        self._ray, self.cfg, self.progress = ray, cfg, progress
        self._owns = not ray.is_initialized()
        if self._owns:
            self._init(cfg, workers)
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        # workers import this very source tree (same files on every node: a shared path or
        # the same install) with a fixed hash seed, whatever the environment of `ray start`
        src = str(Path(pipeline.__file__).resolve().parent.parent)
        env = {"PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(_paths(src))}
        if os.environ.get(PER_PROCESS_ENV):  # tests: every worker process plays a node
            env[PER_PROCESS_ENV] = os.environ[PER_PROCESS_ENV]
        self._task = ray.remote(_call).options(
            max_retries=cfg.max_retries,
            retry_exceptions=[OSError],
            runtime_env={"env_vars": env},
        )
        self._env = env
        self._probe = ray.remote(_probe)
        self._pending: list[Any] = []
        self._tokens: list[str] = []  # runs on a URL: the nodes' copies to remove at close

    def bind(self, ledger: TaskLedger | None, sync: TaskSync | None = None) -> None:
        """As BaseExecutor.bind; a sync's token also names the nodes' copies that `close`
        removes on every node."""
        super().bind(ledger, sync)
        if sync is not None and sync.token not in self._tokens:
            self._tokens.append(sync.token)

    def _init(self, cfg: ExecutorConfig, workers: int) -> None:
        ray = self._ray
        try:
            if cfg.address is None:
                ray.init(
                    address="local",
                    num_cpus=max(1, int(workers)),
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                )
            else:
                ray.init(address=cfg.address, logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = cfg.address or "a local instance"
            raise PipelineError(
                f"executor.address: cannot start or reach Ray at {where} ({exc}); start a "
                "cluster with `ray start --head` or leave address null for a local one"
            ) from None

    def _on_each_node(self, fn: Any, *args: Any) -> list[Any]:
        """fn(*args) once on every alive node with CPUs (zero-CPU tasks pinned to each)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        alive = [n for n in ray.nodes() if n.get("Alive")]
        nodes = [n for n in alive if n.get("Resources", {}).get("CPU", 0) > 0] or alive
        refs = [
            fn.options(
                num_cpus=0,
                runtime_env={"env_vars": self._env},
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(*args)
            for n in nodes
        ]
        return ray.get(refs)

    def check_shared(self, run_dir: Path | None) -> None:
        """Every alive node must see `run_dir` (None: a URL, nothing to see) and import the
        same pipeline version."""
        probe = None
        if run_dir is not None:
            run_dir = Path(run_dir).resolve()
            probe = probe_path(run_dir)
            probe.write_text("probe")
        try:
            answers = self._on_each_node(self._probe, None if probe is None else str(probe))
        finally:
            if probe is not None:
                probe.unlink(missing_ok=True)
        for ip, seen, version in answers:
            if not seen:
                raise PipelineError(
                    f"out_dir {run_dir} is not visible on Ray node {ip}: every node must read "
                    "and write the run folder (use a shared filesystem path)"
                )
            if version != pipeline.__version__:
                raise PipelineError(
                    f"Ray node {ip} runs pipeline {version}, the driver {pipeline.__version__}: "
                    "install the same version on every node"
                )

    def _map(self, fn: Callable[[Any], Any], items: list[Any], bar: Progress) -> list[Any]:
        if not items:
            return []
        ray = self._ray
        fn_ref = ray.put(fn)  # shipped once per map, not once per task
        window = self.cfg.max_in_flight or 2 * self.workers
        results: list[Any] = [None] * len(items)
        pending: dict[Any, int] = {}
        nxt = 0
        try:
            while nxt < len(items) or pending:
                while nxt < len(items) and len(pending) < window:
                    pending[self._task.remote(fn_ref, items[nxt])] = nxt
                    nxt += 1
                self._pending = list(pending)
                ready, _ = ray.wait(self._pending, num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    results[i] = self._get(ref, i, bar.desc)
                    bar.update(1)
        finally:
            self._pending = list(pending)
        return results

    def _get(self, ref: Any, index: int, desc: str) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None  # the task's own error: DataError names its file
            raise
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
            raise PipelineError(
                f"{desc}: item {index} lost its Ray worker {self.cfg.max_retries + 1} times "
                f"(executor.max_retries: {self.cfg.max_retries}): {type(exc).__name__}; "
                "re-run the same command to resume"
            ) from None

    def abort(self) -> None:
        """Cancel the tasks in flight (Ctrl-C, a failed part); finished parts stay recorded."""
        for ref in self._pending:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing to cancel
                pass
        self._pending = []

    def close(self) -> None:
        for token in self._tokens:  # scratch copies of a URL run folder: here, on every node
            _cleanup(token)
            try:
                if self._ray.is_initialized():
                    self._on_each_node(self._ray.remote(_cleanup), token)
            except Exception as exc:  # noqa: BLE001 - a node gone: its scratch went with it
                log.warning("could not remove the nodes' working copies: %s", exc)
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def _paths(src: str) -> list[str]:
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]
    return [src, *extra]
