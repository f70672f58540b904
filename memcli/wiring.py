"""Which agents on this machine have memcli wired in (``memcli doctor``): for each host, whether it is
here at all (its command on PATH or its settings folder), and which of memcli's parts its files name:
the session hooks (``memcli hook HOST``), the MCP server (``memcli mcp``), memcli's plugin (Claude Code,
Codex).

Read-only and forgiving: a settings file that is missing, unreadable or not valid JSON/TOML counts
as naming nothing (and says so), never as an error of memcli's.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from memcli.results import Result


@dataclass
class Host(Result):
    host: str
    present: bool  # the host's command on PATH, or its settings folder
    hooks: bool  # its hook entries run `memcli hook <host>`
    mcp: bool  # it registers memcli's MCP server
    plugin: bool = False  # Claude Code, Codex: the memcli plugin installed and enabled
    files: list[str] = field(default_factory=list)  # the files that name memcli
    unreadable: list[str] = field(default_factory=list)

    @property
    def wired(self) -> bool:
        return self.plugin or (self.hooks and self.mcp)


def _read(path: Path, unreadable: list[str]):
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeError):
        unreadable.append(str(path))
        return None
    try:
        return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError):
        unreadable.append(str(path))
        return None


def _hook_commands(data) -> list[str]:
    """Every ``command`` of a ``hooks`` object of Claude Code's, Codex's or Gemini CLI's shape."""
    hooks = data.get("hooks") if isinstance(data, dict) else None
    out = []
    for groups in (hooks.values() if isinstance(hooks, dict) else []):
        for group in groups if isinstance(groups, list) else []:
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if isinstance(hook, dict) and isinstance(hook.get("command"), str):
                    out.append(hook["command"])
    return out


def _names_server(data, key: str) -> bool:
    servers = data.get(key) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return False
    return any(isinstance(s, dict) and "mcp" in (s.get("args") or []) and "memcli" in
               " ".join(map(str, [s.get("command", ""), *(s.get("args") or [])])) for s in servers.values())


def _host(name: str, command: str, folder: Path, files: list[tuple[Path, str | None]], plugin: bool = False) -> Host:
    """``files``: (settings file, its MCP servers' key or None for a hooks-only file)."""
    found = Host(name, bool(shutil.which(command)) or folder.is_dir(), False, False, plugin)
    for path, servers in files:
        data = _read(path, found.unreadable)
        if data is None:
            continue
        hooks = any(f"hook {name}" in c and "memcli" in c for c in _hook_commands(data))
        mcp = bool(servers) and _names_server(data, servers)
        found.hooks, found.mcp = found.hooks or hooks, found.mcp or mcp
        if hooks or mcp:
            found.files.append(str(path))
    return found


def _claude_plugin(folder: Path) -> bool:
    installed = _read(folder / "plugins" / "installed_plugins.json", [])
    settings = _read(folder / "settings.json", []) or {}
    names = [k for k in ((installed or {}).get("plugins") or {}) if k.split("@")[0] == "memcli"]
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    return bool(names) and (not isinstance(enabled, dict) or any(enabled.get(n, True) for n in names))


def _codex_plugin(folder: Path) -> bool:
    config = _read(folder / "config.toml", []) or {}
    plugins = config.get("plugins") if isinstance(config, dict) else None
    return isinstance(plugins, dict) and any(
        name.split("@")[0] == "memcli" and isinstance(entry, dict) and entry.get("enabled", True)
        for name, entry in plugins.items())


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
