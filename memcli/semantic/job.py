"""The vectors job: entries' vectors computed in a detached process after memory is written, so that no
question waits for them.

* ``vectors.lock`` in the store's cache folder is held (``flock``) by the one process computing vectors;
  a second one started meanwhile sees it and leaves at once.
* ``vectors.json`` beside it says what the job is doing (process, start, texts done of the total) and,
  once it ends, how it ended; ``memcli status`` shows it.
* The job (``memcli embed --worker``, at low CPU priority, output in ``vectors.log``) embeds in chunks,
  each stored as it is done, and looks again until nothing is missing: a write made while it runs is
  covered too, and a job that is stopped or killed resumes from the last chunk when the next one starts
  (every write, and a question that finds vectors missing, starts one).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from memcli import joblock
from memcli.cpu import background_environment
from memcli.errors import StoreError
from memcli.paths import ensure_private_dir
from memcli.store.atomic import FILE_MODE, atomic_write
from memcli.store.folder import now_iso

LOCK = "vectors.lock"
STATUS = "vectors.json"
LOG = "vectors.log"
NICE = 19  # the job must not slow the user's own commands
WRITE_EVERY = 0.5  # seconds between two progress writes


class AlreadyRunning(StoreError):
    """Another process holds the vectors job's lock."""


def read_status(folder: Path) -> dict | None:
    """The job's status file; one that says running while no process holds the lock is a job that was
    killed: reported as such (the next write or question starts another)."""
    status = joblock.read_status(folder / STATUS)
    if status is not None and status.get("state") == "running" and not joblock.held(folder / LOCK):
        status = {**status, "state": "killed", "error": "the job ended without saying so (killed); the next "
                  "write or question starts another"}
    return status


def running(folder: Path) -> dict | None:
    """The running job's status, or None when no job holds the lock."""
    if not joblock.held(folder / LOCK):
        return None
    return joblock.read_status(folder / STATUS) or {"state": "running"}


def start(store_root: Path, folder: Path) -> int | None:
    """Start a detached job for the store whose cache is ``folder``, unless one runs; its process id."""
    if running(folder):
        return None
    try:
        ensure_private_dir(folder)
        return joblock.detach(["--store", str(store_root), "embed", "--worker", "--index-dir", str(folder)],
                              folder / LOG, nice=NICE, env=background_environment())
    except OSError:
        return None  # a cache: the next question or write tries again


def run(vectors, folder: Path, on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Compute every missing vector of ``vectors`` (:class:`memcli.semantic.vectors.EntryVectors`)
    under the job's lock, writing progress to ``vectors.json``; returns the final status. Raises
    :class:`AlreadyRunning` when another process holds the lock."""
    ensure_private_dir(folder)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        try:
            joblock.take(fd)
        except OSError:
            raise AlreadyRunning("vectors are being computed by another process",
                                 hint="memcli status shows how far it is") from None
        status = {"state": "running", "pid": os.getpid(), "started": now_iso(), "done": 0, "total": 0}
        last = [0.0]

        def progress(done: int, total: int) -> None:
            status.update(done=done, total=total)
            if time.monotonic() - last[0] >= WRITE_EVERY:
                last[0] = time.monotonic()
                _write(folder, status)
            if on_progress:
                on_progress(done, total)

        _write(folder, status)
        embedded, begin = 0, time.perf_counter()
        try:
            while True:
                vectors.changed = False
                embedded += vectors.refresh(on_progress=progress)
                if not vectors.changed:
                    break
        except BaseException as exc:
            status.update(state="stopped", finished=now_iso(), error=str(exc) or type(exc).__name__)
            _write(folder, status)
            raise
        status.update(state="done", finished=now_iso(), embedded=embedded, entries=vectors.entries,
                      seconds=round(time.perf_counter() - begin, 2))
        for key in ("done", "total"):
            status.pop(key, None)
        _write(folder, status)
        return status
    finally:
        os.close(fd)


def _write(folder: Path, status: dict) -> None:
    try:
        atomic_write(folder / STATUS, json.dumps(status).encode())
    except OSError:
        pass  # progress is only shown; the vectors are what matters


def describe(status: dict | None, missing: int) -> str:
    """One line for ``memcli status``."""
    if status and status.get("state") == "running":
        total = status.get("total") or 0
        return (f"being computed in the background (process {status.get('pid')}, "
                f"{status.get('done', 0)} of {total} texts)" if total else
                f"being computed in the background (process {status.get('pid')})")
    if status and status.get("state") == "killed" and missing:
        return f"{missing} entries have none yet; the last job was killed (memcli embed computes them now)"
    if missing:
        return f"{missing} entries have none yet (memcli embed computes them now)"
    return "every entry has one"
