"""Foreground model work first: a background consolidation waits while a model command runs.

Two llama.cpp processes computing at once on a small machine slow each other badly (their threads
meet at barriers, and a niced thread still takes its time slices): a chat reply beside a background
consolidation ran at a third of its speed even with the consolidation at ``nice`` 19 on one thread.
So a process that runs a model for the user (``ask``, ``chat``, ``eval``, a foreground
``consolidate``) holds a shared ``flock`` on one per-user file while its model is open (``chat``
lets go while it waits for the next message), and a background consolidation, before each batch it
decodes, waits until it can take that lock exclusively, that is until no foreground model work is
under way. It decodes in small batches, so a foreground command waits at most one of them.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memcli.paths import ensure_private_dir, resolve_cache_dir

LOCK_NAME = "foreground-model.lock"
BACKGROUND_BATCH = 32  # tokens a background process decodes between two looks at the lock

_state = {"background": False, "fd": None, "holds": 0, "idle": 0}


def lock_path() -> Path:
    return resolve_cache_dir().path / LOCK_NAME


def run_in_background() -> None:
    """This process works in the background: it yields to foreground model work (call before the model opens)."""
    _state["background"] = True


def in_background() -> bool:
    return bool(_state["background"])


def _fd() -> int | None:
    if _state["fd"] is None:
        try:
            path = lock_path()
            ensure_private_dir(path.parent)
            _state["fd"] = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError:
            return None  # no cache directory to hold the lock in: nobody yields, nothing breaks
    return _state["fd"]


def hold() -> None:
    """A model opened for the user: background model work waits until :func:`release`."""
    if _state["background"]:
        return
    _state["holds"] += 1
    if _state["holds"] == 1 and not _state["idle"] and (fd := _fd()) is not None:
        fcntl.flock(fd, fcntl.LOCK_SH)


def release() -> None:
    if _state["background"] or _state["holds"] == 0:
        return
    _state["holds"] -= 1
    if _state["holds"] == 0 and _state["fd"] is not None:
        fcntl.flock(_state["fd"], fcntl.LOCK_UN)


@contextmanager
def idle() -> Iterator[None]:
    """The foreground waits for the user (chat's prompt): background work may run meanwhile."""
    held = _state["holds"] > 0 and not _state["idle"] and _state["fd"] is not None
    _state["idle"] += 1
    if held:
        fcntl.flock(_state["fd"], fcntl.LOCK_UN)
    try:
        yield
    finally:
        _state["idle"] -= 1
        if held and not _state["idle"]:
            fcntl.flock(_state["fd"], fcntl.LOCK_SH)


@contextmanager
def busy() -> Iterator[None]:
    """Foreground model work inside an idle stretch (a server's request between idle waits)."""
    fd = None if _state["background"] or not _state["idle"] else _fd()
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        yield
    finally:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)


def wait_turn() -> None:
    """In a background process: return once no foreground model work is under way (else at once)."""
    if not _state["background"] or (fd := _fd()) is None:
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    fcntl.flock(fd, fcntl.LOCK_UN)
