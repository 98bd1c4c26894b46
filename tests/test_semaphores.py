"""A SIGKILLed `--workers 2` run left its pool's 5 named semaphores in /dev/shm for good (issue
28, also noticed): they are named after the run's pid, and the next pool removes a dead run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from pipeline.semaphores import SHM_DIR, sweep_semaphores

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM_DIR), reason="named semaphores: Linux")

_RUN = textwrap.dedent(
    """
    import time
    from pipeline.executor import Executor
    if __name__ == "__main__":
        print(Executor(2).map(abs, [-1, -2, -3]), flush=True)
        time.sleep(60)
    """
)


def _ours(pid: int) -> list[str]:
    return sorted(n for n in os.listdir(SHM_DIR) if n.startswith(f"sem.mp-pipeline-{pid}-"))


def test_a_sigkilled_pools_semaphores_are_swept(tmp_path):
    script = tmp_path / "run.py"  # forkserver re-imports __main__: a file with a main guard
    script.write_text(_RUN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        assert proc.stdout.readline().strip() == b"[1, 2, 3]"
        live = _ours(proc.pid)
        assert live, "the pool's semaphores carry the run's pid"
        assert not set(live) & set(sweep_semaphores())  # a live run's stay
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run, its forkserver and resource tracker
        proc.wait()
    assert _ours(proc.pid) == live  # nobody cleaned up: the leak the issue saw
    assert sorted(set(sweep_semaphores()) & set(live)) == live
    assert _ours(proc.pid) == []
