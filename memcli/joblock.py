"""The lock and status file of a detached job (consolidation, the vectors job): one job at a time, and
others can see it running, and what it says it is doing, without waiting."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from memcli import parsing


def held(lock: Path) -> bool:
    """Whether a job holds ``lock`` now (probed with a shared lock for an instant; a missing file: no)."""
    try:
        fd = os.open(lock, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def take(fd: int) -> None:
    """The job lock on ``fd``, exclusively, or OSError when a job holds it. :func:`held` probes it for an
    instant, so a refusal is retried for a moment before it counts."""
    for attempt in range(20):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            if attempt == 19:
                raise
            time.sleep(0.01)


def read_status(path: Path) -> dict | None:
    """A job's status file (a JSON object), or None when it is missing or unreadable."""
    try:
        with open(path, "rb") as fh:
            data = parsing.loads(fh.read(65536).decode("utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def detach(args: list[str], log: Path, *, nice: int = 0, pass_fds: tuple[int, ...] = (), env: dict | None = None,
           cwd: Path | None = None, header: str | None = None) -> int:
    """Start ``python -m memcli ARGS`` as a detached process (its own session, no standard input, its
    output appended to ``log``, which is never followed as a link and is private to the user); its
    process id. ``nice``: how much lower its CPU priority is; ``pass_fds``: descriptors it inherits (a
    job lock it holds from then on); ``header``: a line written to the log first."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        if header:
            os.write(fd, f"{header}\n".encode())
        child = subprocess.Popen([sys.executable, "-m", "memcli", *args], stdin=subprocess.DEVNULL, stdout=fd,
                                 stderr=fd, pass_fds=pass_fds, close_fds=True, env=env,
                                 cwd=str(cwd) if cwd else None, start_new_session=True,
                                 preexec_fn=(lambda: lower_priority(nice)) if nice else None)
    finally:
        os.close(fd)
    return child.pid


AUTOGROUP = Path("/proc/self/autogroup")


def lower_priority(nice: int) -> None:
    """Lower this process's CPU priority by ``nice``, in its own session as well: where Linux groups a
    session's processes for the scheduler (``sched_autogroup_enabled``, the default of desktop kernels), a
    process's nice value orders it only within its session, and a detached job in a session of its own
    took a whole share beside the user's command whatever its nice value (``consolidate --no-llm`` right
    after an ingest, beside its vectors job: median 2.40 s, 2.09 s with this); so the session's group is
    niced too. Run in the child after it has its session (``start_new_session``); a kernel without groups
    or /proc is left as it is."""
    os.nice(nice)
    try:  # plain system calls: this runs between fork and exec
        fd = os.open(AUTOGROUP, os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, str(nice).encode())
    except OSError:
        pass
    finally:
        os.close(fd)
