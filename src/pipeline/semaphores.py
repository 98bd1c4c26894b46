"""Named POSIX semaphores of our process pools, owned by a pid and swept once it is dead.

A forkserver pool's queues and locks are named semaphores (`/dev/shm/sem.mp-<random>`) that
multiprocessing's resource tracker unlinks when the run ends; a SIGKILL of the run's process
group kills the tracker too and leaves them in /dev/shm for good. Naming them
`/mp-pipeline-<pid>-<random>` (multiprocessing's `semprefix`) tells a dead run's from a live
one's, and the next pool removes the dead ones. Not here: the pool itself (pipeline.executor).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import re

log = logging.getLogger("pipeline")
SEM_PREFIX = "/mp-pipeline-"  # + "<owner pid>"; multiprocessing appends "-<random>"
SHM_DIR = "/dev/shm"  # where Linux keeps named semaphores, as sem.<name without '/'>
_NAME = re.compile(r"^sem\.mp-pipeline-(\d+)-")


def own_semaphores() -> None:
    """Name the semaphores this process creates from now on after its pid. multiprocessing has
    no public setting for it; its per-process `_config['semprefix']` (since Python 3.4) is it."""
    config = getattr(mp.current_process(), "_config", None)
    if isinstance(config, dict):
        config["semprefix"] = f"{SEM_PREFIX}{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: leave its semaphores alone
        return True
    return True


def _mine(path: str) -> bool:
    try:
        return os.stat(path).st_uid == os.getuid()
    except OSError:
        return False


def sweep_semaphores(root: str = SHM_DIR) -> list[str]:
    """Unlink the semaphores of our pools whose owner is dead; names removed."""
    try:
        names = sorted(os.listdir(root))
    except OSError:  # not Linux, or no /dev/shm: nothing of ours can be there
        return []
    removed = []
    for name in names:
        m = _NAME.match(name)
        if m and _mine(os.path.join(root, name)) and not _alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(root, name))
            except FileNotFoundError:
                continue  # another run swept it first
            except OSError as exc:
                log.warning("%s: cannot remove a dead run's semaphore (%s)", name, exc)
                continue
            removed.append(name)
    if removed:
        log.info("removed %d semaphore(s) of dead runs from %s", len(removed), root)
    return removed
