"""An input's bytes: a regular file (never a FIFO, device or socket) or an open file, within the size
limit; a large agent session (one record a line) read record by record without its tool output."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memcli.errors import InputError

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
    if stat.S_ISDIR(info.st_mode):
        raise InputError(name, "is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(name, "not a regular file (a FIFO, device or socket); pass a file, or - for standard input")
    if info.st_size > max_bytes and not json_lines:
        raise InputError(name, too_big)
    try:
        with open(source, "rb") as handle:
            if info.st_size <= max_bytes:
                data = handle.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise InputError(name, too_big)
                return Source(data, name)
            kept, size, dropped = [], 0, 0
            for record in handle:  # lines; a record over the limit is skipped without being kept whole
                if len(record) > record_limit:
                    dropped += 1
                    continue
                size += len(record)
                if size > max_bytes:
                    raise InputError(name, f"{too_big}, even without its {dropped} records over "
                                           f"{record_limit:,} bytes")
                kept.append(record)
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror}") from None
    return Source(b"".join(kept), name, dropped, record_limit)
