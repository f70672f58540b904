"""The one place memcli runs git: a command in a folder, with git's prompts and locale kept out.

:mod:`memcli.share.git` builds sharing on it; the store uses it only to name the commit that last changed
a file it refuses (a teammate's damaged ``state.json`` or document).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from memcli.errors import ConfigError, StoreError


class GitError(StoreError):
    """A git command failed (its message is git's own)."""


def git(where: Path, *args: str, check: bool = True, env: dict | None = None,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """``git -C where args...``, never asking on the terminal; GitError when ``check`` and it fails."""
    if shutil.which("git") is None:
        raise ConfigError("git is not installed", hint="install git to share a store")
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
    done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, env=full_env,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    if check and done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {(done.stderr or done.stdout).strip() or f'exit {done.returncode}'}")
    return done


def last_commit(path: Path) -> str:
    """``"; last changed by commit abc123 (Ann, 2 hours ago)"`` when git tracks ``path``, else ``""``:
    for errors about a file that may have come from a teammate."""
    if shutil.which("git") is None:
        return ""
    try:
        done = git(path.parent, "log", "-1", "--format=%h (%an, %ar)", "--", path.name, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    said = done.stdout.strip()
    return f"; last changed by commit {said}" if done.returncode == 0 and said else ""
