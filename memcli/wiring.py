"""Which agents on this machine have memcli wired in (``memcli doctor``): for each host, whether it is
here at all (its command on PATH or its settings folder), and which of memcli's parts its files name:
the session hooks (``memcli hook HOST``), the MCP server (``memcli mcp``), memcli's plugin (Claude Code,
Codex).

Read-only and forgiving: a settings file that is missing, unreadable or not valid JSON/TOML counts
as naming nothing (and says so), never as an error of memcli's.
"""

from __future__ import annotations

import errno
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from memcli import parsing
from memcli.regular import NotRegular, read_bounded
from memcli.results import Result


@dataclass
class Host(Result):
    host: str
    present: bool  # the host's command on PATH, or its settings folder
    hooks: bool  # its hook entries run `memcli hook <host>`
    mcp: bool  # it registers memcli's MCP server
    plugin: bool = False  # Claude Code, Codex: the memcli plugin installed and enabled
    files: list[str] = field(default_factory=list)  # the files that name memcli
    unreadable: list[str] = field(default_factory=list)  # settings files that could not be read ...
    why: list[str] = field(default_factory=list)  # ... and why, in the same order
    events: list[str] = field(default_factory=list)  # the events whose hook entries run `memcli hook <host>`

    @property
    def wired(self) -> bool:
        return self.plugin or (self.hooks and self.mcp)


SETTINGS_LIMIT = 32 << 20  # ~/.claude.json grows with a user's history; past this a file is reported, not read


def _read(path: Path, found: Host | None = None):
    """The parsed settings file, or None: missing, or unreadable (then named in ``found.unreadable`` with why:
    not a regular file, too large, not UTF-8, not valid JSON/TOML). Read through
    :func:`memcli.regular.read_bounded`, so a link to a device, a FIFO or an endless file costs a bounded read
    and never blocks."""
    try:
        raw = read_bounded(path, SETTINGS_LIMIT)
    except FileNotFoundError:
        return None
    except NotRegular:
        return _unreadable(found, path, "not a regular file")
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ENAMETOOLONG):
            return None
        return _unreadable(found, path, exc.strerror or str(exc))
    if len(raw) > SETTINGS_LIMIT:
        return _unreadable(found, path, f"larger than {SETTINGS_LIMIT >> 20} MiB")
    kind = "TOML" if path.suffix == ".toml" else "JSON"
    try:
        text = raw.decode("utf-8")
        return parsing.toml_loads(text) if kind == "TOML" else parsing.loads(text)
    except UnicodeError:
        return _unreadable(found, path, "not UTF-8")
    except parsing.TooDeep:
        return _unreadable(found, path, "nested too deeply")
    except (ValueError, tomllib.TOMLDecodeError):
        return _unreadable(found, path, f"not valid {kind}")


def _unreadable(found: Host | None, path: Path, why: str) -> None:
    if found is not None:
        found.unreadable.append(str(path))
        found.why.append(why)


def _items(value) -> list:
    """A JSON list's items; anything else holds none."""
    return value if isinstance(value, list) else []


def _object(value) -> dict:
    """A JSON object; anything else is an empty one."""
    return value if isinstance(value, dict) else {}


def _hook_commands(data) -> list[tuple[str, str]]:
    """Every (event, ``command``) of a ``hooks`` object of Claude Code's, Codex's or Gemini CLI's shape (a part of
    another shape names nothing)."""
    out = []
    for event, groups in _object(_object(data).get("hooks")).items():
        for group in _items(groups):
            for hook in _items(_object(group).get("hooks")):
                if isinstance(_object(hook).get("command"), str):
                    out.append((event, hook["command"]))
    return out


def _names_server(data, key: str) -> bool:
    for server in _object(_object(data).get(key)).values():
        server = _object(server)
        command, args = server.get("command"), _items(server.get("args"))
        if "mcp" in args and "memcli" in " ".join(map(str, [command if isinstance(command, str) else "", *args])):
            return True
    return False


def _host(name: str, command: str, folder: Path, files: list[tuple[Path, str | None]], plugin: bool = False) -> Host:
    """``files``: (settings file, its MCP servers' key or None for a hooks-only file)."""
    found = Host(name, bool(shutil.which(command)) or folder.is_dir(), False, False, plugin)
    for path, servers in files:
        data = _read(path, found)
        if data is None:
            continue
        events = [e for e, c in _hook_commands(data) if f"hook {name}" in c and "memcli" in c]
        hooks = bool(events)
        found.events += [e for e in events if e not in found.events]
        mcp = bool(servers) and _names_server(data, servers)
        found.hooks, found.mcp = found.hooks or hooks, found.mcp or mcp
        if hooks or mcp:
            found.files.append(str(path))
    return found


def _claude_plugin(folder: Path) -> bool:
    installed = _object(_read(folder / "plugins" / "installed_plugins.json"))
    names = [k for k in _object(installed.get("plugins")) if k.split("@")[0] == "memcli"]
    enabled = _object(_read(folder / "settings.json")).get("enabledPlugins")
    return bool(names) and (not isinstance(enabled, dict) or any(enabled.get(n, True) for n in names))


def _codex_plugin(folder: Path) -> bool:
    plugins = _object(_read(folder / "config.toml")).get("plugins")
    return any(name.split("@")[0] == "memcli" and isinstance(entry, dict) and entry.get("enabled", True)
               for name, entry in _object(plugins).items())


def hosts(project: Path | None = None, home: Path | None = None) -> list[Host]:
    """Claude Code, Codex, Gemini CLI and Cursor: their user settings and ``project``'s (default: the
    working directory)."""
    home = home or Path.home()
    project = project or Path.cwd()
    claude = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    codex = Path(os.environ.get("CODEX_HOME") or home / ".codex")
    gemini = home / ".gemini"
    return [
        _host("claude-code", "claude", claude, [
            (claude / "settings.json", None), (project / ".claude" / "settings.json", None),
            (project / ".claude" / "settings.local.json", None), (home / ".claude.json", "mcpServers"),
            (project / ".mcp.json", "mcpServers")], plugin=_claude_plugin(claude)),
        _host("codex", "codex", codex, [
            (codex / "hooks.json", None), (codex / "config.toml", "mcp_servers"),
            (project / ".codex" / "hooks.json", None), (project / ".codex" / "config.toml", "mcp_servers")],
              plugin=_codex_plugin(codex)),
        _host("gemini", "gemini", gemini, [
            (gemini / "settings.json", "mcpServers"), (project / ".gemini" / "settings.json", "mcpServers")]),
        _host("cursor", "cursor", home / ".cursor", [
            (home / ".cursor" / "mcp.json", "mcpServers"), (project / ".cursor" / "mcp.json", "mcpServers")]),
    ]
