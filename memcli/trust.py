"""Which of a store's own settings this user has approved.

A store's ``config.toml`` travels with the store (through git, a copied folder, an archive), so it
is written by whoever wrote the store, not necessarily by the person running memcli. Settings that
send memory off the machine, name a credential, load a file as a model or choose a folder memcli
deletes in (:data:`GUARDED`) are honoured from that file only when the user approved exactly those
values for that store on this machine (``memcli trust``); the user's own configuration file, the
environment and flags are always honoured. An approval is kept in the user's configuration folder,
never in the store, keyed by the store's absolute path and a digest of the guarded values: a
teammate who changes any of them needs a new approval.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from memcli import parsing
from memcli.errors import ConfigError
from memcli.paths import resolve_config_file
from memcli.regular import NotRegular, read_bounded

# send data off the machine, name a credential, load a file as a model, delete files in a folder
GUARDED = ("model.backend", "model.base_url", "model.api_key_env", "model.name", "model.path", "kv.dir")
TRUST_FILE = "trusted-stores.json"


def trust_file() -> Path:
    """The approvals: beside the user's configuration file (never inside a store)."""
    return resolve_config_file().path.parent / TRUST_FILE


def guarded(table: dict[str, Any]) -> dict[str, Any]:
    """The guarded settings a store configuration sets."""
    return {key: table[key] for key in GUARDED if key in table}


def digest(values: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


def _key(store_root: Path) -> str:
    return str(store_root.absolute())


MAX_BYTES = 16 << 20  # far more approvals than one person gives


def read_approvals() -> tuple[dict, str | None]:
    """(the approvals, why the file cannot be read or None). No file: no approvals. A file that is
    not a regular one (opened without blocking) or not a JSON object is damage: nothing in it is
    honoured, and it is reported, never silently taken for empty."""
    try:
        raw = read_bounded(trust_file(), MAX_BYTES)
    except FileNotFoundError:
        return {}, None
    except NotRegular:
        return {}, "it is not a regular file"
    except OSError as exc:
        return {}, f"cannot read it: {exc.strerror}"
    try:
        data = parsing.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return {}, "it is not JSON (damaged)"
    if not isinstance(data, dict):
        return {}, "it is not a JSON object (damaged)"
    return data, None


def damage() -> str | None:
    """What is wrong with the approvals file, for ``status`` and the ignored-settings note; None when
    it is readable or absent."""
    why = read_approvals()[1]
    return f"{trust_file()}: {why}; approvals in it are not honoured" if why else None


def approved(store_root: Path, values: dict[str, Any]) -> bool:
    """Whether the user approved exactly ``values`` for this store."""
    record = read_approvals()[0].get(_key(store_root))
    return isinstance(record, dict) and record.get("digest") == digest(values)


def approve(store_root: Path, values: dict[str, Any] | None) -> None:
    """Record the user's approval of ``values`` for this store (None: take the approval back). A damaged
    approvals file is never rewritten with less: the user repairs it or moves it aside first."""
    data, why = read_approvals()
    if why:
        raise ConfigError(f"{trust_file()}: {why}; memcli does not overwrite it, which would lose every "
                          "approval it holds", hint=f"repair {trust_file()} or move it aside, then run memcli trust "
                          "again")
    if values is None:
        data.pop(_key(store_root), None)
    else:
        data[_key(store_root)] = {"digest": digest(values), "settings": sorted(values)}
    path = trust_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(staged, path)
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError:
        pass

