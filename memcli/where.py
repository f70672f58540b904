"""Where the store and the caches are, as plain strings, with nothing but ``os``: the precedence
:mod:`memcli.paths` gives its reasons for (flag > ``MEMCLI_*`` > the nearest ``.memcli/`` > XDG),
kept here so the starts that must be quick (the session-end hook, the MCP server's first answer)
find them without importing pathlib or dataclasses."""

from __future__ import annotations

import os

from memcli.errors import ConfigError

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
    """The nearest ``.memcli/`` directory in ``start`` (default: the working directory) or above; a
    ``start`` that is gone (a removed worktree) or a file counts from the nearest folder above it that
    exists. A ``.memcli`` that is a symbolic link is refused (:func:`refuse_link`)."""
    here = os.path.realpath(start or os.getcwd())
    while not os.path.isdir(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    while True:
        candidate = os.path.join(here, PROJECT_STORE_DIRNAME)
        refuse_link(candidate)
        if os.path.isdir(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def refuse_link(candidate: str) -> None:
    """A project's ``.memcli`` must be the folder itself: a link (committed to a repository, it comes
    with every clone) could name another project's memory, which would then be read and written."""
    if os.path.islink(candidate):
        try:
            target = os.readlink(candidate)
        except OSError:
            target = "?"
        raise ConfigError(f"{candidate} is a symbolic link (to {target}); memcli does not take a link as a "
                          "project's store, since it may name another project's memory",
                          hint=f"to use that store on purpose: memcli --store {os.path.realpath(candidate)} ...")


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


def config_file() -> tuple[str, str]:
    """The user configuration file (TOML) and why: ``$MEMCLI_CONFIG`` > XDG config."""
    env = os.environ.get("MEMCLI_CONFIG")
    if env:
        return absolute(env), "$MEMCLI_CONFIG"
    folder, why = xdg("XDG_CONFIG_HOME", ".config")
    return os.path.join(folder, "config.toml"), why


def cache() -> tuple[str, str]:
    """Where rebuildable caches (search index) live, and why: MEMCLI_CACHE > XDG cache."""
    env = os.environ.get("MEMCLI_CACHE")
    if env:
        return absolute(env), "$MEMCLI_CACHE"
    return xdg("XDG_CACHE_HOME", ".cache")
