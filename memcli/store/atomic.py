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
  before it reads or writes. Once the manifest exists nothing deletes the
  files it names except their renames, so recovery can always finish it;
  SIGINT, SIGTERM and SIGHUP are held back from the commit point until the
  last rename, and a rename that fails leaves the manifest for the next
  command (:class:`~memcli.errors.StoreWriteError` says which file and why).
* A manifest is applied only when every path in it is one of the store's
  own files (:func:`store_path`): a crafted ``.txn/manifest.json`` cannot
  make memcli write or delete anything outside the store.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from memcli import parsing
from memcli.errors import StoreError, StoreWriteError
from memcli.regular import NotRegular, open_regular_fd

FILE_MODE = 0o600
TXN_DIR = ".txn"
MANIFEST = "manifest.json"
DOC_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}"  # a topic document's id (its file name without .md)
# the files a transaction may write or delete, relative to the store root
_STORE_FILE = re.compile(rf"(CURRENT\.md|state\.json|ingested\.txt|forgotten\.txt|aliases\.txt|\.gitattributes|\.gitignore"
                         rf"|docs/{DOC_ID}\.md)")
_STAGED = re.compile(r"\d{5}\.stage")
_DEFERRED = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


def store_path(root: Path, relpath: object) -> Path:
    """``root / relpath`` when ``relpath`` names one of the store's own files and no folder on the way
    is a symbolic link; anything else is refused (a :class:`StoreError`)."""
    if not isinstance(relpath, str) or not _STORE_FILE.fullmatch(relpath) or ".." in PurePosixPath(relpath).parts:
        raise StoreError(f"{root / TXN_DIR / MANIFEST}: {str(relpath)[:200]!r} is not a file of this store; "
                         "the pending transaction was not written by memcli and is not applied",
                         hint=f"move {root / TXN_DIR} out of the store to use it again; nothing outside the store "
                              "was touched")
    dest = root / relpath
    folder = dest.parent
    if folder != root and folder.is_symlink():
        raise StoreError(f"{folder} is a symbolic link; memcli does not write through links",
                         hint="replace the link with a real folder")
    return dest


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back for the duration (they arrive right after it)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    except (AttributeError, ValueError, OSError):  # no signal masks here: nothing to defer
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def open_regular(path: Path):
    """``path`` opened for binary reading. It must be a regular file reached without following a
    symbolic link; anything else is a :class:`StoreError` (``FileNotFoundError`` passes through)."""
    try:
        return os.fdopen(open_regular_fd(path, follow=False), "rb")
    except NotRegular:
        raise StoreError(f"{path} is not a regular file; memcli reads only regular files in a store") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{path} is a symbolic link; memcli does not follow links inside a store",
                             hint="replace the link with the file itself") from None
        raise


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


# what a writer says of itself in the lock (for one that times out waiting): the program and the
# command's name, never its arguments (a forget's pattern, a note's text); the CLI sets the command
HOLDER_NOTE = [os.path.basename(sys.argv[0] or "python")[:40]]


class StoreLock:
    """Inter-process lock on a store: ``exclusive`` for writers, shared for readers."""

    def __init__(self, root: Path, exclusive: bool, timeout: float | None = None):
        self.path = root / ".lock"
        self.exclusive = exclusive
        self.timeout = timeout
        self._fd: int | None = None

    def acquire(self) -> None:
        nofollow = getattr(os, "O_NOFOLLOW", 0)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | nofollow, FILE_MODE)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StoreError(f"{self.path} is a symbolic link; memcli does not follow links inside a store",
                                 hint=f"remove {self.path}; memcli makes it again") from None
            if self.exclusive or exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise StoreWriteError.of(self.path, exc, "open the lock") from None
            try:  # a reader of a read-only store: a shared lock needs no write access
                self._fd = os.open(self.path, os.O_RDONLY | nofollow)
            except OSError:
                raise StoreWriteError.of(self.path, exc, "open the lock") from None
        op = fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH
        if self.timeout is None:
            fcntl.flock(self._fd, op)
        else:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(self._fd, op | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        self.release()
                        raise
                    if time.monotonic() > deadline:
                        holder = self.holder()
                        self.release()
                        raise StoreError(
                            f"the store {self.path.parent} is busy: waited {self.timeout:g} s for its lock"
                            + (f", held by {holder}" if holder else ""),
                            hint="wait for that command to finish, or raise store.lock_timeout") from None
                    time.sleep(0.05)
        if self.exclusive:  # say who writes, for a writer that times out waiting
            try:
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, f"{os.getpid()} {HOLDER_NOTE[0]}\n".encode(), 0)
            except OSError:
                pass  # a read-only store: the lock still works, only the note is missing

    def holder(self) -> str | None:
        """The last writer that held the lock: ``pid N (command)``, when it is still running."""
        try:
            note = os.pread(self._fd, 300, 0).decode("utf-8", "replace").strip()
            pid, _, command = note.partition(" ")
            os.kill(int(pid), 0)
        except (OSError, ValueError, TypeError):
            return None
        return f"process {pid} ({command})" if command else f"process {pid}"

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


def _txn_dir(root: Path) -> Path:
    txn = root / TXN_DIR
    if txn.is_symlink():
        raise StoreError(f"{txn} is a symbolic link; memcli does not stage writes through links",
                         hint=f"remove the link {txn}")
    return txn


def _checked_ops(root: Path, manifest: Path) -> list[dict]:
    """The manifest's operations, each checked to name a store file (and a staged file of this store)."""
    try:
        data = parsing.loads(manifest.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{manifest}: unreadable pending transaction: {exc}",
                         hint=f"move {manifest.parent} out of the store to use it again") from None
    ops = data.get("ops") if isinstance(data, dict) else None
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise StoreError(f"{manifest}: not a memcli transaction", hint=f"move {manifest.parent} out of the store")
    for op in ops:
        store_path(root, op.get("path"))
        if op.get("op") not in ("write", "delete") or (
                op["op"] == "write" and not (isinstance(op.get("staged"), str) and _STAGED.fullmatch(op["staged"]))):
            raise StoreError(f"{manifest}: not a memcli transaction (operation {str(op)[:200]})",
                             hint=f"move {manifest.parent} out of the store")
    return ops


def recover(root: Path) -> str | None:
    """Finish or roll back an interrupted transaction. Call with the exclusive lock held.

    Idempotent: a manifest is applied again from wherever it stopped (a staged file that is gone was
    renamed already). Returns ``"completed"``, ``"rolled back"`` or None when there was nothing to do.
    """
    txn = _txn_dir(root)
    if not txn.is_dir():
        return None
    manifest = txn / MANIFEST
    outcome = None
    if manifest.exists():
        ops = _checked_ops(root, manifest)
        with deferred_signals():
            _apply(root, ops)
        outcome = "completed"
    try:
        for leftover in txn.iterdir():
            if leftover.is_dir() and not leftover.is_symlink():
                continue  # not memcli's: left alone
            leftover.unlink()
            outcome = outcome or "rolled back"
    except OSError as exc:
        raise StoreWriteError.of(txn, exc, "clean up") from None
    fsync_dir(txn)
    return outcome


def committed_view(root: Path) -> dict[Path, Path | None]:
    """What a committed but unapplied transaction changes, for reading the committed state without
    writing: each store file it writes, mapped to its staged copy, and each it deletes, mapped to None.
    Empty when there is no manifest (staged files without one were never committed). Call with a lock
    held, so no writer is between its commit point and its last rename."""
    manifest = root / TXN_DIR / MANIFEST
    if not manifest.exists():
        return {}
    view: dict[Path, Path | None] = {}
    for op in _checked_ops(root, manifest):
        dest = store_path(root, op["path"])
        if op["op"] == "delete":
            view[dest] = None
        elif (root / TXN_DIR / op["staged"]).exists():  # absent: renamed already, the file is the new one
            view[dest] = root / TXN_DIR / op["staged"]
    return view


def _apply(root: Path, ops: list[dict]) -> None:
    touched: set[Path] = set()
    for op in ops:
        dest = store_path(root, op["path"])
        try:
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
        except OSError as exc:
            raise StoreWriteError.of(dest, exc, "write" if op["op"] == "write" else "delete") from None
        touched.add(dest.parent)
    for folder in touched:
        fsync_dir(folder)
    manifest = root / TXN_DIR / MANIFEST
    try:
        manifest.unlink()
    except OSError as exc:
        raise StoreWriteError.of(manifest, exc, "remove") from None
    fsync_dir(root / TXN_DIR)


class Transaction:
    """Stage writes and deletes of store files; :meth:`commit` applies them all or none.

    Paths are relative to the store root. Must be used with the exclusive lock held.
    """

    def __init__(self, root: Path):
        self.root = root
        self.ops: list[dict] = []
        self._dir = _txn_dir(root)
        try:
            self._dir.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreWriteError.of(self._dir, exc, "create") from None

    def write(self, relpath: str, data: str | bytes) -> None:
        store_path(self.root, relpath)
        if isinstance(data, str):
            data = data.encode("utf-8")
        staged = f"{len(self.ops):05d}.stage"
        try:
            write_file_synced(self._dir / staged, data)
        except OSError as exc:
            try:
                (self._dir / staged).unlink()
            except OSError:
                pass
            raise StoreWriteError.of(self._dir / staged, exc) from None
        self.ops.append({"op": "write", "path": relpath, "staged": staged})

    def delete(self, relpath: str) -> None:
        store_path(self.root, relpath)
        self.ops.append({"op": "delete", "path": relpath})

    def commit(self) -> None:
        """Write the manifest (the commit point) and apply it. Signals are held back meanwhile; once
        the manifest exists the transaction belongs to it (``abort`` no longer touches its files),
        and an apply that fails is finished by the next command's :func:`recover`."""
        if not self.ops:
            return
        manifest_tmp = self._dir / "manifest.tmp"
        try:
            fsync_dir(self._dir)
            write_file_synced(manifest_tmp, json.dumps({"ops": self.ops}).encode())
        except OSError as exc:
            raise StoreWriteError.of(manifest_tmp, exc) from None
        ops, self.ops = self.ops, []
        with deferred_signals():
            try:
                os.replace(manifest_tmp, self._dir / MANIFEST)  # the commit point
            except OSError as exc:
                self.ops = ops  # not committed: abort may discard the staged files
                raise StoreWriteError.of(self._dir / MANIFEST, exc) from None
            fsync_dir(self._dir)
            try:
                _apply(self.root, ops)
            except StoreWriteError as exc:  # committed: say so, since the next command will finish it
                raise StoreWriteError(f"{exc.message}; the change is committed and the next memcli command "
                                      "completes it once that file can be written",
                                      hint=exc.hint) from None

    def abort(self) -> None:
        for op in self.ops:
            if op["op"] == "write":
                try:
                    (self._dir / op["staged"]).unlink()
                except FileNotFoundError:
                    pass
        self.ops = []
