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

from memcli.paths import resolve_config_file

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


def _read() -> dict:
    try:
        data = json.loads(trust_file().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def approved(store_root: Path, values: dict[str, Any]) -> bool:
    """Whether the user approved exactly ``values`` for this store."""
    record = _read().get(_key(store_root))
    return isinstance(record, dict) and record.get("digest") == digest(values)


def approve(store_root: Path, values: dict[str, Any] | None) -> None:
    """Record the user's approval of ``values`` for this store (None: take the approval back)."""
    data = _read()
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

