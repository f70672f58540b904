"""Errors memcli raises on purpose, each with the exit code it maps to.

The exit-code table (documented in the README):

====  ==========================================================
0     success
1     no match (``grep``, ``search``) or a general failure
2     usage error (bad option, bad regular expression, bad range)
3     configuration or model missing
4     bad input (unreadable file, invalid JSON, unknown shape)
5     the store cannot be written (read-only, disk full, permission denied)
130   interrupted
====  ==========================================================
"""

from __future__ import annotations

import errno

EXIT_NO_MATCH = 1
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_BAD_INPUT = 4
EXIT_STORE_WRITE = 5
EXIT_INTERRUPTED = 130


class MemcliError(Exception):
    """Base class: a failure with a message meant for the user."""

    exit_code = EXIT_FAILURE
    kind = "error"

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict:
        out = {"type": self.kind, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        return out


class UsageError(MemcliError):
    """The command was called with arguments that cannot work."""

    exit_code = EXIT_USAGE
    kind = "usage"


class ConfigError(MemcliError):
    """Configuration is invalid or something it names (a model) is missing."""

    exit_code = EXIT_CONFIG
    kind = "config"


class InputError(MemcliError):
    """Input data is unreadable or malformed; nothing was written."""

    exit_code = EXIT_BAD_INPUT
    kind = "bad_input"

    def __init__(self, source: str, message: str, *, where: str | None = None):
        location = f"{source}: {where}" if where else source
        super().__init__(f"{location}: {message}")
        self.source = source
        self.where = where
        self.reason = message  # what is wrong, without the place


class StoreError(MemcliError):
    """The store on disk is not in a state memcli can use."""

    exit_code = EXIT_FAILURE
    kind = "store"


class StoreWriteError(StoreError):
    """A file of the store could not be written; the message names it and the OS error."""

    ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM})  # what "cannot write" means

    exit_code = EXIT_STORE_WRITE
    kind = "store_write"

    @classmethod
    def of(cls, path, exc: OSError, doing: str = "write") -> StoreWriteError:
        reason = exc.strerror or str(exc)
        hints = {errno.EROFS: "the store is on a read-only file system", errno.ENOSPC: "free some space on that disk",
                 errno.EDQUOT: "free some space on that disk (the disk quota is used up)",
                 errno.EACCES: "check the permissions of the store directory",
                 errno.EPERM: "check the permissions of the store directory"}
        return cls(f"cannot {doing} {path}: {reason}",
                   hint=hints.get(exc.errno or 0, "nothing was lost: the next command finishes or rolls back "
                                               "the interrupted write"))


class NotFound(MemcliError):
    """A document or other named thing does not exist."""

    exit_code = EXIT_USAGE
    kind = "not_found"
