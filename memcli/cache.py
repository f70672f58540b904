"""The caches beside a store (the search index, entry vectors, chat's memory units): SQLite files private to
their user, rebuilt when the code or settings that built them change, keyed on the documents' file
signatures. Deleting them loses nothing but time."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from pathlib import Path

from memcli.errors import StoreError
from memcli.paths import store_key
from memcli.store import Store
from memcli.store.folder import read_regular

OWNER = "store.txt"  # the absolute path of the store a cache folder serves: one left by a store deleted or moved is found
_KEY = re.compile(r"[0-9a-f]{16}")  # a per-store folder's name (memcli.paths.store_cache_dir)


def open_cache(path: Path | str, schema: str, version: str, tables: tuple[str, ...]) -> sqlite3.Connection:
    """A SQLite cache file (or ``:memory:``), private to its user, emptied when its ``version`` (the
    code's and settings' that built it) is not the one wanted."""
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA secure_delete = ON")  # a deleted row (a forgotten entry's words) is overwritten, not left
    if path != ":memory:":
        try:
            os.chmod(path, 0o600)
        except OSError:
            pass
    db.executescript(schema)
    row = db.execute("SELECT value FROM info WHERE key='version'").fetchone()
    if row is None or row[0] != version:
        db.executescript("BEGIN; " + " ".join(f"DELETE FROM {t};" for t in tables) + " COMMIT;")
        db.execute("INSERT OR REPLACE INTO info VALUES('version', ?)", (version,))
    return db


def file_signatures(store: Store) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every document file of ``store``, by id: what the caches are keyed on."""
    return store.signatures()


def note_owner(folder: Path, store_root: Path) -> None:
    """Write which store ``folder`` serves (:data:`OWNER`) unless it says so already; a folder that cannot
    be written is left as it is (the note only lets ``memcli doctor`` find caches left behind)."""
    owner = str(store_root.resolve())
    path = folder / OWNER
    try:
        if read_regular(path).decode("utf-8") == owner:
            return
    except (OSError, StoreError, UnicodeDecodeError):
        pass
    try:  # the folder's name is the path's hash, so the note never changes: created once, never replaced
        path.unlink(missing_ok=True)  # a note cut short, or a link: never written through
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(owner)
    except OSError:
        pass


def left_behind(cache_root: Path) -> tuple[list[dict], int]:
    """The per-store cache folders under ``cache_root/stores`` whose store is gone (deleted, or moved: the
    folder is keyed by the path), each ``{folder, store, bytes}``; and how many folders do not say which
    store they serve (made before memcli noted it), which are left alone. A folder's search index holds
    its store's words, and its vectors much of their meaning."""
    stores = cache_root / "stores"
    found: list[dict] = []
    unknown = 0
    if stores.is_symlink() or not stores.is_dir():
        return found, unknown
    for folder in sorted(stores.iterdir()):
        if folder.is_symlink() or not folder.is_dir() or not _KEY.fullmatch(folder.name):
            continue
        try:
            owner = read_regular(folder / OWNER).decode("utf-8")
        except (OSError, StoreError, UnicodeDecodeError):
            unknown += 1
            continue
        if store_key(owner) != folder.name:
            unknown += 1  # a note that does not match the folder's key: not trusted to name its store
            continue
        if not (Path(owner) / "state.json").exists():
            found.append({"folder": str(folder), "store": owner, "bytes": _size(folder)})
    return found, unknown


def prune(folders: list[dict]) -> int:
    """Remove the cache folders :func:`left_behind` found (never through a symbolic link); how many went."""
    removed = 0
    for item in folders:
        folder = Path(item["folder"])
        if folder.is_symlink() or not folder.is_dir():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += not folder.exists()
    return removed


def _size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if not path.is_symlink() and path.is_file():
                total += path.stat().st_size
        except OSError:
            pass
    return total
