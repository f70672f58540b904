"""Reading a file that someone else may have put in its place, on ``os`` alone (the fast paths use it):
opened without blocking (a FIFO or a device where a file should be is no file to wait on), it must
be a regular file, and no more than a bound is read."""

from __future__ import annotations

import errno
import os
import stat


class NotRegular(OSError):
    """The path names a FIFO, a device, a socket or a folder."""


def open_regular_fd(path: str | os.PathLike, *, follow: bool = True) -> int:
    """A descriptor of ``path`` for reading, opened without blocking, once it is known to be a regular
    file. ``FileNotFoundError`` and other ``OSError`` pass through; a path that is not a regular file
    is :class:`NotRegular`; ``follow=False`` refuses a symbolic link (``ELOOP``)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular(errno.EINVAL, "not a regular file (a FIFO, device, socket or folder)", os.fspath(path))
    return fd


def read_bounded(path: str | os.PathLike, limit: int, *, follow: bool = True) -> bytes:
    """At most ``limit + 1`` bytes of ``path`` (one more than the bound, so a caller can tell a file
    that is too large); errors as :func:`open_regular_fd`."""
    with os.fdopen(open_regular_fd(path, follow=follow), "rb") as handle:
        return handle.read(limit + 1)
