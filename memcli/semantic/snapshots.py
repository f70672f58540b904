"""The matrix of every entry's vector, kept as files beside the vectors' cache and named by what it holds
(:class:`memcli.semantic.vectors.EntryVectors` maps one at start instead of reading every row), and how they go:
removed, or overwritten with zeros first when a forget took out vectors they hold."""

from __future__ import annotations

import os
from pathlib import Path

SNAPSHOT = "vectors-matrix"  # the files' names begin so


def drop_snapshots(folder: Path, wipe: bool = False) -> list[str]:
    """Remove every snapshot of the matrix in ``folder``; ``wipe``: overwritten with zeros first (a
    forget: they hold the forgotten entries' vectors, and the cache's rows are overwritten too)."""
    gone = []
    for path in folder.glob(f"{SNAPSHOT}-*"):
        try:
            if wipe:
                wipe_file(path)
            else:
                path.unlink()
            gone.append(str(path))
        except FileNotFoundError:
            pass
    return gone


def wipe_file(path: Path) -> None:
    """Overwrite ``path`` with zeros and remove it."""
    try:
        with open(path, "r+b") as handle:
            size = os.fstat(handle.fileno()).st_size
            for _ in range(0, size, 1 << 20):
                handle.write(bytes(min(1 << 20, size - handle.tell())))
            handle.flush()
            os.fsync(handle.fileno())
        path.unlink()
    except FileNotFoundError:
        pass
