"""A time limit on the local models' work in this thread: ``within(seconds)`` around a call; the chat
model's runtime and memcli's reader check it before each batch they run and stop with
:class:`DeadlineExceeded` once it has passed (no batch is left half done). Used where a caller must
answer in time (an MCP host times a tool call out)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memcli.errors import MemcliError

_local = threading.local()


class DeadlineExceeded(MemcliError):
    """The model's work ran past the caller's time limit."""


@contextmanager
def within(seconds: float | None) -> Iterator[None]:
    before = getattr(_local, "at", None)
    _local.at = None if seconds is None else time.monotonic() + seconds
    try:
        yield
    finally:
        _local.at = before


def check() -> None:
    at = getattr(_local, "at", None)
    if at is not None and time.monotonic() > at:
        raise DeadlineExceeded("the model's work ran past its time limit")
