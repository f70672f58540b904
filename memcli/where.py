"""Where the store and the caches are, as plain strings, with nothing but ``os``: the precedence
:mod:`memcli.paths` gives its reasons for (flag > ``MEMCLI_*`` > the nearest ``.memcli/`` > XDG),
kept here so the starts that must be quick (the session-end hook, the MCP server's first answer)
find them without importing pathlib or dataclasses."""

from __future__ import annotations

import os

PROJECT_STORE_DIRNAME = ".memcli"


def xdg(var: str, fallback: str) -> tuple[str, str]:
    """(``$VAR/memcli`` or ``~/FALLBACK/memcli``, why)."""
    value = os.environ.get(var)
    if value and os.path.isabs(value):
        return os.path.join(value, "memcli"), f"${var}"
    return os.path.join(os.path.expanduser("~"), fallback, "memcli"), f"~/{fallback} (XDG default)"


def absolute(path: str) -> str:
    """``path`` with ``~`` expanded, made absolute as ``Path.absolute`` does (``..`` kept, ``.`` dropped)."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    return "/" + "/".join(part for part in path.split("/") if part not in ("", "."))


def project_store(start: str | None = None) -> str | None:
    """The nearest ``.memcli/`` directory in ``start`` (default: the working directory) or above."""
    here = os.path.realpath(start or os.getcwd())
    while True:
        candidate = os.path.join(here, PROJECT_STORE_DIRNAME)
        if os.path.isdir(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def user_store() -> tuple[str, str]:
    """The user's own store, in the XDG data directory."""
    return xdg("XDG_DATA_HOME", ".local/share")


def store(flag: str | os.PathLike | None = None) -> tuple[str, str]:
    """The store directory and why: --store > MEMCLI_STORE > nearest .memcli/ > XDG data."""
    if flag:
        return absolute(os.fspath(flag)), "--store"
    env = os.environ.get("MEMCLI_STORE")
    if env:
        return absolute(env), "$MEMCLI_STORE"
    found = project_store()
    if found is not None:
        return found, f"nearest {PROJECT_STORE_DIRNAME}/ (memcli init)"
    return user_store()


def cache() -> tuple[str, str]:
    """Where rebuildable caches (search index) live, and why: MEMCLI_CACHE > XDG cache."""
    env = os.environ.get("MEMCLI_CACHE")
    if env:
        return absolute(env), "$MEMCLI_CACHE"
    return xdg("XDG_CACHE_HOME", ".cache")
