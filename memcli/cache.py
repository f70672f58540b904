"""The caches beside a store (the search index, entry vectors, chat's memory units): SQLite files private to
their user, rebuilt when the code or settings that built them change, keyed on the documents' file
signatures. Deleting them loses nothing but time."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memcli.store import Store


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
