"""The consolidation job: one at a time per store, visible while it runs, and runnable in the background.

* ``STORE/.consolidate.lock`` is held (``flock``) by the one process that
  consolidates; the store's own lock is taken only for the short commit of
  each flush, so ingests and readers go on while a model thinks.
* ``STORE/consolidation.json`` says what the job is doing (process, start,
  flush n of m, stage) and, once it ends, how it ended.
* A background job is a detached ``memcli consolidate --worker-fd N``
  process at low CPU priority that inherits the job lock from the command
  that started it (so no second job can slip in between), and writes its
  output to ``STORE/consolidation.log``.

Stopping a job (``memcli consolidate --stop``) sends SIGTERM: a flush's
commit holds signals back until it is complete, and anything not yet
committed is simply still in CURRENT.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from pathlib import Path

from memcli import joblock
from memcli.errors import StoreError, StoreWriteError
from memcli.llm import priority
from memcli.store.atomic import FILE_MODE, atomic_write
from memcli.store.folder import now_iso

LOCK = ".consolidate.lock"
STATUS = "consolidation.json"
LOG = "consolidation.log"
BACKGROUND_NICE = 19  # a background model must not starve the user's foreground command


class AlreadyRunning(StoreError):
    """Another consolidation of the store holds the job lock."""


def _open_lock(root: Path) -> int:
    try:
        return os.open(root / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{root / LOCK} is a symbolic link; memcli does not follow links inside a store",
                             hint=f"remove {root / LOCK}; memcli makes it again") from None
        raise StoreWriteError.of(root / LOCK, exc, "open the consolidation lock") from None


def read_status(root: Path) -> dict | None:
    return joblock.read_status(root / STATUS)


def running(root: Path) -> dict | None:
    """The status of the consolidation running on this store now, or None."""
    if not joblock.held(root / LOCK):
        return None
    return read_status(root) or {"state": "running"}


def status(root: Path) -> dict | None:
    """The consolidation running on the store (process, start, flush n of m, stage) with ``running:
    True``, else how the last one ended (``running: False``; ``killed`` when its process ended
    without saying how), or None if none ran."""
    now = running(root)
    if now is not None:
        return {**now, "running": True, "summary": describe(now)}
    last = read_status(root)
    if last is None:
        return None
    if last.get("state") in ("running", "starting"):
        last["state"] = "killed"
    return {**last, "running": False}


def describe(status: dict) -> str:
    """``process 123, running since 2026-11-23T10:00:00, flush 2 of 5 (plan 3/7)``."""
    parts = [f"process {status.get('pid', '?')}", f"running since {status.get('started', '?')}"]
    if status.get("flushes"):
        step = f"flush {status.get('flush', 0)} of {status['flushes']}"
        if status.get("stage"):
            step += f" ({status['stage']} {status.get('done', 0)}/{status.get('total', 0)})"
        parts.append(step)
    return ", ".join(parts)


class Job:
    """The right to consolidate a store, held for one run; ``fd``: a job lock inherited from the
    process that started this one in the background."""

    def __init__(self, root: Path, *, fd: int | None = None, background: bool = False, model: str | None = None):
        self.root = root
        self.fd = fd
        self.background = background
        self.status = {"state": "running", "pid": os.getpid(), "started": now_iso(), "background": background,
                       "model": model, "flush": 0, "flushes": 0}
        self._written = 0.0

    def __enter__(self) -> Job:
        if self.fd is None:
            fd = _open_lock(self.root)
            try:
                joblock.take(fd)
            except OSError:
                os.close(fd)
                now = read_status(self.root) or {}
                raise AlreadyRunning(f"a consolidation of {self.root} is already running ({describe(now)})",
                                 hint="`memcli consolidate --wait` waits for it; `--stop` stops it") from None
            self.fd = fd
        try:
            self._write(force=True)
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self.status.update(state="finished" if kind is None else "stopped" if kind is KeyboardInterrupt
                           else "failed", ended=now_iso())
        if kind is not None:
            self.status["error"] = str(getattr(exc, "message", None) or exc or kind.__name__)[:500]
        try:
            self._write(force=True)
        finally:
            self._release()

    def _release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def begin_flush(self, flush: int, flushes: int) -> None:
        self.status.update(flush=flush, flushes=flushes, stage=None, done=0, total=0)
        self._write(force=True)

    def progress(self, flush: int, flushes: int, stage: str, done: int, total: int) -> None:
        self.status.update(flush=flush, flushes=flushes, stage=stage, done=done, total=total)
        self._write()

    def finish(self, summary: dict) -> None:
        self.status["result"] = summary

    def _write(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._written >= 1.0:
            self._written = now
            try:
                atomic_write(self.root / STATUS, json.dumps(self.status) + "\n")
            except OSError:
                pass  # the status is a courtesy; the consolidation does not depend on it


def start_background(root: Path, env_settings: dict[str, str]) -> dict:
    """Start ``memcli consolidate`` in a detached low-priority process holding the job lock; returns
    {pid, log}. Raises :class:`AlreadyRunning` when a consolidation is already running, a
    :class:`StoreWriteError` when the store is not writable."""
    fd = _open_lock(root)
    try:
        joblock.take(fd)
    except OSError:
        os.close(fd)
        raise AlreadyRunning(f"a consolidation of {root} is already running "
                             f"({describe(read_status(root) or {})})") from None
    try:
        try:
            atomic_write(root / STATUS, json.dumps({"state": "starting", "started": now_iso(), "background": True})
                         + "\n")
        except OSError as exc:
            raise StoreWriteError.of(root / STATUS, exc) from None
        try:
            pid = joblock.detach(["--store", str(root), "consolidate", "--worker-fd", str(fd), "--json"], root / LOG,
                                 nice=BACKGROUND_NICE, pass_fds=(fd,), env={**os.environ, **env_settings}, cwd=root,
                                 header=f"--- {now_iso()} background consolidation")
        except OSError as exc:
            raise StoreWriteError.of(root / LOG, exc, "open") from None
        if (read_status(root) or {}).get("state") == "starting":  # the child has not said more yet
            atomic_write(root / STATUS, json.dumps({"state": "starting", "pid": pid, "started": now_iso(),
                                                    "background": True}) + "\n")
    finally:
        os.close(fd)  # the child holds the lock now (or, if it failed to start, nobody does)
    return {"pid": pid, "log": str(root / LOG)}


def wait(root: Path, on_status=None, poll: float = 0.5) -> dict | None:
    """Wait until no consolidation runs on the store; ``on_status(status)`` sees its progress.
    Returns the final status (None when none ran)."""
    seen = False
    while (now := running(root)) is not None:
        seen = True
        if on_status:
            on_status(now)
        time.sleep(poll)
    return read_status(root) if seen or (read_status(root) or {}).get("state") != "running" else None


def stop(root: Path, timeout: float = 60.0) -> dict | None:
    """Stop the running consolidation (SIGTERM; its committed flushes stay, the rest stays in
    CURRENT) and wait for it to end. Returns its final status, or None when none was running."""
    now = running(root)
    if now is None:
        return None
    pid = now.get("pid")
    if isinstance(pid, int) and pid > 0:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while running(root) is not None:
        if time.monotonic() > deadline:
            raise StoreError(f"the consolidation (process {pid}) did not stop within {timeout:g} s")
        time.sleep(0.2)
    final = read_status(root) or {}
    if final.get("state") in ("starting", "running"):  # stopped before it could say so (still loading)
        fd = _open_lock(root)
        try:
            joblock.take(fd)  # and no new consolidation has started since
            final = {**final, "state": "stopped", "ended": now_iso()}
            atomic_write(root / STATUS, json.dumps(final) + "\n")
        except OSError:
            pass
        finally:
            os.close(fd)
    return final


def work(memory, fd: int, *, llm: bool | None, split: int | None, merge: int | None):
    """The background process's consolidation: the job lock it inherited as ``fd``, SIGTERM taken as
    a stop between commits, half the cores for the model (unless configured), and the model's
    decoding yielding to foreground model work (:mod:`memcli.llm.priority`)."""
    def stopped(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stopped)
    priority.run_in_background()
    # its model runs on the default threads, half the cores (llm.runtime.default_threads), unless set
    return memory.consolidate(split=split, merge=merge, llm=llm, job=Job(memory.root, fd=fd, background=True),
                              reason="started in the background by an ingest")
