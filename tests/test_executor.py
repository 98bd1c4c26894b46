"""The executor: results in item order for any worker count; abort stops workers mid-task; the
`executor:` run key and `--executor` (validation, CLI override, factory)."""

from __future__ import annotations

import functools
import inspect
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from pipeline import executor
from pipeline.cli import main
from pipeline.errors import RecipeError
from pipeline.executor import BaseExecutor, Executor
from pipeline.recipe import build_recipe
from pipeline.run.runner import make_executor
from ray_tasks import check_bind


def _all_executors() -> list[type]:
    import pipeline.run.ray  # noqa: F401 - its class (Ray itself is imported at start)

    found, todo = [], list(BaseExecutor.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_every_executor_implements_the_one_interface():
    """The runner reaches an executor only through BaseExecutor: bind(ledger, sync), map,
    check_shared, abort, close. Each subclass implements every abstract part of it."""
    classes = _all_executors()
    assert {c.__name__ for c in classes} >= {"Executor", "RayExecutor"}
    for cls in classes:
        assert not inspect.isabstract(cls), f"{cls.__name__}: {cls.__abstractmethods__}"
        assert list(inspect.signature(cls.bind).parameters) == ["self", "ledger", "sync"]

    class Partial(BaseExecutor):  # no check_shared/abort/close: refused at construction
        def _map(self, fn, items, bar):
            return [fn(i) for i in items]

    with pytest.raises(TypeError, match="abstract"):
        Partial()


@pytest.mark.parametrize("workers", [1, 2])
def test_local_executor_binds_ledger_and_sync(workers):
    with Executor(workers) as ex:
        check_bind(ex)


def _square_after(delay_s: float, x: int) -> int:
    time.sleep(delay_s * (5 - x % 5))  # later items finish first: order must still hold
    return x * x


def _slow_write(path: str) -> None:
    time.sleep(1.0)
    Path(path).write_text("written")


def test_results_in_item_order_for_any_worker_count():
    items = list(range(10))
    fn = functools.partial(_square_after, 0.01)
    with Executor(1) as one, Executor(3) as three:
        assert one.map(fn, items) == three.map(fn, items) == [x * x for x in items]


def test_abort_stops_workers_before_they_write(tmp_path):
    target = tmp_path / "late.txt"
    ex = Executor(2)
    future = ex._get_pool().submit(_slow_write, str(target))
    time.sleep(0.3)  # the task is running in a worker now
    ex.abort()
    time.sleep(1.5)  # longer than the task would have needed
    assert not target.exists()
    assert not future.done() or future.cancelled() or future.exception() is not None


_ORPHAN_SCRIPT = """
import functools, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from pipeline.executor import BaseExecutor, Executor

def park(folder, i):
    Path(folder, f"{os.getpid()}.pid").write_text("")
    time.sleep(120)

if __name__ == "__main__":
    with Executor(2) as ex:
        ex.map(functools.partial(park, sys.argv[1]), range(2))
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie awaiting its reaper is gone too
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_when_the_parent_is_killed(tmp_path):
    """SIGKILL of the run's process (the OOM killer) must not leave workers running."""
    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN_SCRIPT)
    src = str(Path(__file__).resolve().parents[1] / "src")
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path), src])
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2:
            assert parent.poll() is None and time.monotonic() < deadline, "workers never started"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
    pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
    deadline = time.monotonic() + 15
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [p for p in pids if not _gone(p)]
    for p in alive:  # do not leak them into the rest of the test session
        os.kill(p, signal.SIGKILL)
    assert not alive


_PRELOAD_SCRIPT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from pipeline.executor import Executor

def seen(_):
    forkserver = os.getppid()
    threads = len(os.listdir(f"/proc/{forkserver}/task"))
    return threads, "pipeline.stages" in sys.modules

if __name__ == "__main__":
    with Executor(2) as ex:
        print(json.dumps(ex.map(seen, range(4))))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("jemalloc_conf", [None, "background_thread:true"])
def test_forkserver_preloads_the_stages_only_while_single_threaded(tmp_path, jemalloc_conf):
    """Workers fork from a forkserver that imported the stages once, and that forkserver runs
    one thread (pyarrow's jemalloc purge thread off). A user's own jemalloc setting would start
    that thread: then nothing is preloaded and the workers import the stages themselves."""
    script = tmp_path / "preload.py"
    script.write_text(_PRELOAD_SCRIPT)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}
    if jemalloc_conf:
        env["JE_ARROW_MALLOC_CONF"] = jemalloc_conf
    out = subprocess.run(
        [sys.executable, str(script), src], env=env, capture_output=True, text=True, check=True
    )
    seen = yaml.safe_load(out.stdout)
    assert [threads for threads, _ in seen] == [1] * 4
    assert [preloaded for _, preloaded in seen] == [jemalloc_conf is None] * 4


def test_watchdog_exits_when_the_parent_is_gone(monkeypatch):
    """The portable fallback (no prctl): a worker polls for its run's process."""
    exits = []
    monkeypatch.setattr(executor, "WATCH_S", 0.01)
    monkeypatch.setattr(executor.os, "_exit", exits.append)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    thread = threading.Thread(target=executor._watch_parent, args=(proc.pid,), daemon=True)
    thread.start()
    time.sleep(0.1)
    assert thread.is_alive() and not exits  # parent alive: keep working
    proc.kill()
    proc.wait()
    thread.join(10)
    assert exits == [1]


DOWNLOAD = {"download": {"source": "toy", "max_docs": 10}}


def test_default_is_the_local_pool():
    recipe = build_recipe({**DOWNLOAD, "workers": 3})
    assert recipe.run.executor.kind == "local"
    with make_executor(recipe.run) as ex:
        assert isinstance(ex, Executor) and ex.workers == 3


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"kind": "spark"}, "executor.kind: got 'spark', expected one of 'local', 'ray'"),
        ({"address": "auto"}, "executor.address: only applies to kind: ray"),
        ({"kind": "ray", "max_retries": -1}, "executor.max_retries: must be in [0, inf)"),
        ({"kind": "ray", "adress": "auto"}, "executor.adress: unknown key (did you mean"),
    ],
)
def test_bad_executor_block_names_the_key(block, message):
    with pytest.raises(RecipeError, match=re.escape(message)):
        build_recipe({**DOWNLOAD, "executor": block})


def test_cli_flag_sets_the_kind(tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({**DOWNLOAD, "executor": {"address": None}}))
    assert main(["show", "--config", str(path), "--executor", "ray"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["executor"] == {
        "kind": "ray",
        "address": None,
        "max_retries": 3,
        "max_in_flight": None,
    }


def test_object_store_out_dir_is_a_valid_recipe_key():
    """A URL run folder is accepted by the recipe (pipeline.run.storage opens it at run time)."""
    assert build_recipe({**DOWNLOAD, "out_dir": "s3://b/run"}).run.out_dir == "s3://b/run"
