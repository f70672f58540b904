"""Where the store, the configuration and the caches live, and why.

Precedence for each location: command-line flag > ``MEMCLI_*`` environment
variable > (for the store) the nearest ``.memcli/`` directory made by
``memcli init`` > the XDG base directory > the XDG fallback under ``~``.

Data (the memory itself), configuration and caches live apart: deleting the
cache directory loses nothing but time; the store is the only thing to back up.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from memcli import where
from memcli.results import Result
from memcli.where import PROJECT_STORE_DIRNAME  # noqa: F401  (said in where, named here too)


@dataclass(frozen=True)
class Resolved(Result):
    """A resolved location and a human-readable account of where it came from."""

    path: Path
    source: str


def _resolved(found: tuple[str, str]) -> Resolved:
    return Resolved(Path(found[0]), found[1])


def find_project_store(start: Path | None = None) -> Path | None:
    """The nearest ``.memcli/`` directory in ``start`` or one of its parents."""
    found = where.project_store(str(start) if start is not None else None)
    return Path(found) if found is not None else None


def resolve_store(flag: str | os.PathLike | None = None) -> Resolved:
    """The store directory: --store > MEMCLI_STORE > nearest .memcli/ > XDG data."""
    return _resolved(where.store(flag))


def user_store() -> Resolved:
    """The user's own store, in the XDG data directory."""
    return _resolved(where.user_store())


def resolve_config_file() -> Resolved:
    """The user configuration file (TOML): MEMCLI_CONFIG > XDG config."""
    return _resolved(where.config_file())


def resolve_cache_dir() -> Resolved:
    """Where rebuildable caches (search index) live: MEMCLI_CACHE > XDG cache."""
    return _resolved(where.cache())


def store_cache_dir(store_root: Path) -> Path:
    """The cache folder of one store, keyed by the store's absolute path."""
    return resolve_cache_dir().path / "stores" / store_key(str(store_root.resolve()))


def store_key(resolved: str) -> str:
    """The name of a store's cache folder: a hash of its absolute path."""
    return hashlib.sha256(resolved.encode()).hexdigest()[:16]


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and each missing parent) with mode 0700: memory is personal data."""
    missing = []
    folder = path
    while not folder.exists() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    try:
        if (path.stat().st_mode & 0o777) != 0o700:
            path.chmod(0o700)
    except PermissionError:
        pass
    return path
