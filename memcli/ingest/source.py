"""An input's bytes: a regular file (never a FIFO, device or socket) or an open file, within the size
limit; a large agent session (one record a line) read record by record without its tool output."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memcli.errors import InputError
from memcli.regular import NotRegular, open_regular_fd

MAX_INPUT_BYTES = 64 * 1024 * 1024  # the default of ingest.max_bytes
JSON_LINES = ("claude-code", "codex", "pi", "gemini-stream", "managed-agents", "jsonl")  # formats of one record a line, read record by record when large


@dataclass
class Source:
    data: bytes
    name: str
    dropped: int = 0  # records of a large JSON-lines file left out for their size (tool output)
    record_limit: int = 0


def read_input(source: str | Path | IO[bytes] | IO[str], name: str | None = None,
               max_bytes: int = MAX_INPUT_BYTES, *, json_lines: bool = False,
               record_limit: int = 256 * 1024) -> Source:
    """The bytes of an input and its name for messages: a path to a regular file, or an open file (named
    ``name``, else its own name); at most ``max_bytes``. A FIFO, device or socket path is refused, never
    waited on. With ``json_lines`` (an agent session: one record a line) a file over
    ``max_bytes`` is read record by record: a record over ``record_limit`` bytes (a tool's output;
    no message memcli keeps is that long) is left out and counted, and the rest must fit."""
    too_big = f"larger than {max_bytes:,} bytes (ingest.max_bytes)"
    if hasattr(source, "read"):
        name = name or str(getattr(source, "name", "<input>"))
        data = source.read(max_bytes + 1)
        data = data.encode("utf-8") if isinstance(data, str) else data
        if len(data) > max_bytes:
            raise InputError(name, too_big)
        return Source(data, name)
    name = str(source)
    try:
        os.fsencode(source)
        info = os.stat(source)
    except UnicodeError:
        raise InputError(name.encode("utf-8", "replace").decode("utf-8"), "not a usable file name") from None
    except FileNotFoundError:
        raise InputError(name, "no such file") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror}") from None
    _check_regular(name, info.st_mode)  # before any open: opening a device can itself do something
    try:
        fd = open_regular_fd(source)  # never waits; checked again: the path may have changed since
    except NotRegular:
        raise InputError(name, "not a regular file (a FIFO, device or socket); pass a file, or - for standard "
                         "input") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if info.st_size > max_bytes and not json_lines:
            raise InputError(name, too_big)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            if info.st_size <= max_bytes:
                data = handle.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise InputError(name, too_big)
                return Source(data, name)
            kept, dropped = _records(handle, name, max_bytes, record_limit, too_big)
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    return Source(b"".join(kept), name, dropped, record_limit)


def _check_regular(name: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise InputError(name, "is a directory")
    if not stat.S_ISREG(mode):
        raise InputError(name, "not a regular file (a FIFO, device or socket); pass a file, or - for standard input")


CHUNK = 1 << 20


def _records(handle, name: str, max_bytes: int, record_limit: int, too_big: str) -> tuple[list[bytes], int]:
    """The lines of ``handle`` read a chunk at a time, each kept if at most ``record_limit`` bytes:
    a longer one is counted and skipped as it streams past, never held whole (a line of gigabytes
    costs a chunk of memory, not its size). What is kept must fit ``max_bytes``."""
    kept: list[bytes] = []
    size = dropped = 0
    line = bytearray()
    skipping = False

    def keep(record: bytes) -> None:
        nonlocal size
        size += len(record)
        if size > max_bytes:
            raise InputError(name, f"{too_big}, even without its {dropped} records over {record_limit:,} bytes")
        kept.append(record)

    while chunk := handle.read(CHUNK):
        at = 0
        while at < len(chunk):
            end = chunk.find(b"\n", at)
            stop = len(chunk) if end < 0 else end + 1
            if not skipping:
                line += chunk[at:stop]
                if len(line) > record_limit:
                    skipping, line = True, bytearray()
                    dropped += 1
            if end >= 0:
                if not skipping:
                    keep(bytes(line))
                skipping, line = False, bytearray()
            at = stop
    if line and not skipping:
        keep(bytes(line))
    return kept, dropped
