"""Crash safety: atomic file replacement, the store lock and transactions.

* :func:`atomic_write` writes a temporary file in the destination folder,
  fsyncs it, renames it over the destination and fsyncs the folder, so a
  reader sees the old file or the new one, never a mix.
* :class:`StoreLock` is an ``fcntl.flock`` on ``STORE/.lock``: writers hold it
  exclusively, readers shared, so two processes never interleave writes and a
  reader never sees half of a multi-file change.
* :class:`Transaction` groups writes and deletes of several files. Every new
  file is staged in ``STORE/.txn/``; then a manifest naming all operations is
  written atomically (the commit point); then the operations are applied and
  the manifest removed. A crash before the commit point leaves the old state
  (the staged files are discarded by :func:`recover`); a crash after it is
  completed by :func:`recover`, which every command runs under the lock
  before it reads or writes.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path

FILE_MODE = 0o600
TXN_DIR = ".txn"
MANIFEST = "manifest.json"


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file at ``path`` (mode 0600) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync dir)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_file_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


class StoreLock:
    """Inter-process lock on a store: ``exclusive`` for writers, shared for readers."""

    def __init__(self, root: Path, exclusive: bool, timeout: float | None = None):
        self.path = root / ".lock"
        self.exclusive = exclusive
        self.timeout = timeout
        self._fd: int | None = None

    def acquire(self) -> None:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        op = fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH
        if self.timeout is None:
            fcntl.flock(self._fd, op)
            return
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self._fd, op | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    self.release()
                    raise
                time.sleep(0.02)

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def pending(root: Path) -> bool:
    """True when a transaction was interrupted (staged files or a manifest remain)."""
    txn = root / TXN_DIR
    return txn.is_dir() and any(txn.iterdir())


def recover(root: Path) -> str | None:
    """Finish or roll back an interrupted transaction. Call with the exclusive lock held.

    Returns ``"completed"``, ``"rolled back"`` or None when there was nothing to do.
    """
    txn = root / TXN_DIR
    if not txn.is_dir():
        return None
    manifest = txn / MANIFEST
    outcome = None
    if manifest.exists():
        ops = json.loads(manifest.read_text("utf-8"))["ops"]
        _apply(root, ops)
        outcome = "completed"
    for leftover in txn.iterdir():
        leftover.unlink()
        outcome = outcome or "rolled back"
    fsync_dir(txn)
    return outcome


def _apply(root: Path, ops: list[dict]) -> None:
    touched: set[Path] = set()
    # a test hook: widen the window between renames so fault-injection kills land inside it
    pause = float(os.environ.get("MEMCLI_TEST_COMMIT_PAUSE", "0") or 0)
    for op in ops:
        if pause:
            time.sleep(pause)
        dest = root / op["path"]
        if op["op"] == "write":
            staged = root / TXN_DIR / op["staged"]
            if staged.exists():  # absent: this rename already happened before a crash
                dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.replace(staged, dest)
        elif op["op"] == "delete":
            try:
                dest.unlink()
            except FileNotFoundError:
                pass
        touched.add(dest.parent)
    for folder in touched:
        fsync_dir(folder)
    manifest = root / TXN_DIR / MANIFEST
    manifest.unlink()
    fsync_dir(root / TXN_DIR)


class Transaction:
    """Stage writes and deletes of store files; :meth:`commit` applies them all or none.

    Paths are relative to the store root. Must be used with the exclusive lock held.
    """

    def __init__(self, root: Path):
        self.root = root
        self.ops: list[dict] = []
        self._dir = root / TXN_DIR
        self._dir.mkdir(mode=0o700, exist_ok=True)

    def write(self, relpath: str, data: str | bytes) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        staged = f"{len(self.ops):05d}.stage"
        write_file_synced(self._dir / staged, data)
        self.ops.append({"op": "write", "path": relpath, "staged": staged})

    def delete(self, relpath: str) -> None:
        self.ops.append({"op": "delete", "path": relpath})

    def commit(self) -> None:
        if not self.ops:
            return
        fsync_dir(self._dir)
        manifest_tmp = self._dir / "manifest.tmp"
        write_file_synced(manifest_tmp, json.dumps({"ops": self.ops}).encode())
        os.replace(manifest_tmp, self._dir / MANIFEST)  # the commit point
        fsync_dir(self._dir)
        _apply(self.root, self.ops)
        self.ops = []

    def abort(self) -> None:
        for op in self.ops:
            if op["op"] == "write":
                try:
                    (self._dir / op["staged"]).unlink()
                except FileNotFoundError:
                    pass
        self.ops = []
