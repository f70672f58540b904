"""What a killed ``memcli sync`` leaves in a clone, cleared by the next one: git's lock files
(``index.lock``, ``HEAD.lock``, refs' locks), the merge driver's temporaries (``.merge_file_*``,
which hold entry lines) and, when the kill came mid-merge, the merge itself (memcli notes the
merge it starts; a merge a person started is never touched). Nothing is cleared while a git
process works in this repository."""

from __future__ import annotations

import json
import os
from pathlib import Path

from memcli import parsing
from memcli.share.git import Repo
from memcli.store.atomic import atomic_write

SYNC_NOTE = ".sync.json"  # in the store, never shared: the merge a running sync started


def git_dir(repo: Repo) -> Path:
    path = Path(repo.run("rev-parse", "--git-dir").stdout.strip())
    return path if path.is_absolute() else repo.top / path


def git_busy(repo: Repo, folder: Path) -> bool:
    """Whether a live git process works in this work tree or its git folder (Linux's /proc; where
    there is none, assumed busy, so nothing is cleared)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    roots = [str(repo.top.resolve()), str(folder.resolve())]
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if not (entry / "comm").read_text().startswith("git"):
                continue
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if any(cwd == root or cwd.startswith(root + os.sep) for root in roots):
            return True
    return False


def clear_stale(repo: Repo, store_root: Path) -> list[str]:
    """Remove what a killed git left, when no git process is running here; the paths cleared."""
    folder = git_dir(repo)
    stale = [p for p in (folder / "index.lock", folder / "HEAD.lock", folder / "ORIG_HEAD.lock",
                         folder / "config.lock", folder / "packed-refs.lock", folder / "MERGE_HEAD.lock")
             if p.exists()]
    refs = folder / "refs"
    stale += [p for p in refs.rglob("*.lock")] if refs.is_dir() else []
    stale += [p for where in {repo.top, store_root} for p in where.glob(".merge_file_*")]
    note = _note(store_root)
    if not stale and note is None:
        return []
    if git_busy(repo, folder):
        return []
    cleared = []
    for path in stale:
        try:
            path.unlink()
            cleared.append(str(path))
        except OSError:
            pass
    if note is not None:
        merge_head = folder / "MERGE_HEAD"
        head = merge_head.read_text().strip() if merge_head.exists() else None
        if head is not None and head == note.get("theirs"):  # our own merge, cut short: taken back
            repo.run("merge", "--abort", check=False)
            cleared.append("an interrupted merge")
        end_merge(store_root)
    return cleared


def _note(store_root: Path) -> dict | None:
    try:
        data = parsing.loads((store_root / SYNC_NOTE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def begin_merge(store_root: Path, theirs_sha: str) -> None:
    atomic_write(store_root / SYNC_NOTE, json.dumps({"theirs": theirs_sha, "pid": os.getpid()}))


def end_merge(store_root: Path) -> None:
    try:
        (store_root / SYNC_NOTE).unlink(missing_ok=True)
    except OSError:
        pass
