"""The lock and status file of a detached job (consolidation, the vectors job): one job at a time, and
others can see it running, and what it says it is doing, without waiting."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path


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
            data = json.loads(fh.read(65536).decode("utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None
