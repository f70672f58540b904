"""Chat's memory units as tokens, kept by the store's file signatures, so a warm start skips the store.

Building the memory context from the store (parsing every document, counting
and tokenizing its entries) costs tens of milliseconds, as much as
restoring the blocks themselves. The units only change when a document file
changes, so they are kept in ``kv/units/<key>.json``, where the key hashes
the model fingerprint, the memory budget, the header text and every
document file's (modification time, size): a warm start stats the files,
reads one small file and goes straight to the restore. An unreadable or
damaged file is rebuilt; writes are atomic; the newest few files are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from memcli import parsing
from memcli.cache import file_signatures
from memcli.errors import StoreError
from memcli.kv.engine import Unit
from memcli.paths import ensure_private_dir
from memcli.store.atomic import atomic_write
from memcli.store.folder import read_regular

VERSION = 1
KEEP = 8  # unit files kept (sessions with other budgets or models share the folder)


def units_key(store, parts: dict) -> str:
    """The key of the store's units as they are now, for the model and settings in ``parts``."""
    files = sorted((doc_id, *sig) for doc_id, sig in file_signatures(store).items())
    blob = json.dumps({"version": VERSION, "parts": parts, "files": files}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def cached_units(folder: Path | None, key: str, build: Callable[[], list[Unit]]) -> list[Unit]:
    """The units stored under ``key`` in ``folder``, else ``build()`` (then stored)."""
    if folder is None:
        return build()
    path = folder / f"{key}.json"
    try:
        data = parsing.loads(read_regular(path).decode("utf-8"))
        units = [Unit(str(label), [int(t) for t in tokens]) for label, tokens in data["units"]]
        if data.get("key") == key:
            os.utime(path)  # its last use, for the pruning below
            return units
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, StoreError):
        pass  # damaged or not a regular file: rebuilt below
    units = build()
    try:
        ensure_private_dir(folder)
        atomic_write(path, json.dumps({"key": key, "units": [[u.label, u.tokens] for u in units]}))
        for old in sorted(folder.glob("*.json"), key=_mtime, reverse=True)[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a cache: the units are used all the same
    return units


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
