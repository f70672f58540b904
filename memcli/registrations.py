"""memcli in the agents people use: the file that registers the MCP server (and Claude Code's hooks,
:mod:`memcli.hooks`) with each, naming this Python and the store by absolute path, so it works from
any directory and any PATH.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

AGENTS = ("claude-code", "claude-code-hooks", "cursor", "vscode", "claude-desktop", "gemini", "opencode", "codex")
HOOK_TIMEOUTS = {"SessionStart": 15, "PreCompact": 10, "SessionEnd": 10}  # seconds Claude Code waits at most


@dataclass(frozen=True)
class Registration:
    """What registers memcli with one agent: ``text`` is a whole file the host reads as it is (JSON or
    TOML, no comments), ``where`` says where it goes (printed apart, on stderr), ``data`` is the same
    configuration as an object (``--json``)."""

    agent: str
    where: str
    text: str
    data: dict


def server_command(store: Path, read_only: bool = False) -> list[str]:
    """The command an agent runs to start the server: this interpreter, so no PATH is needed."""
    return [sys.executable, "-m", "memcli", "--store", str(store), "mcp", *(["--read-only"] if read_only else [])]


def hook_command(store: Path | None) -> str:
    """The hook's command: on ``store``, or (None) on the store of each session's project."""
    return shlex.join([sys.executable, "-m", "memcli", *(["--store", str(store)] if store else []), "hook",
                       "claude-code"])


def registration(agent: str, store: Path, *, read_only: bool = False, pinned: bool = True) -> Registration:
    """What registers memcli's MCP server (on ``store``) with ``agent``, ready to save as the host's file.
    ``pinned``: the store was named (--store, $MEMCLI_STORE), so hooks use it too; otherwise each
    session goes to the store of its project (:func:`memcli.hooks.hook_store`)."""
    command, *args = server_command(store, read_only)
    stdio = {"command": command, "args": args}
    if agent in ("claude-code", "cursor", "claude-desktop", "gemini"):
        where = {
            "claude-code": f".mcp.json in the project (or run: claude mcp add --scope user memcli -- "
                           f"{shlex.join([command, *args])}); the hooks: --print-config claude-code-hooks",
            "cursor": ".cursor/mcp.json in the project (or ~/.cursor/mcp.json for all projects)",
            "claude-desktop": "claude_desktop_config.json (Settings > Developer > Edit Config; macOS: "
                              "~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)",
            "gemini": ".gemini/settings.json in the project (or ~/.gemini/settings.json); merge with what is there",
        }[agent]
        data = {"mcpServers": {"memcli": stdio}}
    elif agent == "claude-code-hooks":
        where = ".claude/settings.json in the project (or ~/.claude/settings.json); merge with what is there"
        command = hook_command(store if pinned else None)
        data = {"hooks": {event: [{"hooks": [{"type": "command", "command": command, "timeout": limit}]}]
                          for event, limit in HOOK_TIMEOUTS.items()}}
    elif agent == "vscode":
        where = ".vscode/mcp.json in the workspace"
        data = {"servers": {"memcli": {"type": "stdio", **stdio}}}
    elif agent == "opencode":
        where = "opencode.json in the project (or ~/.config/opencode/opencode.json); merge with what is there"
        data = {"$schema": "https://opencode.ai/config.json",
                "mcp": {"memcli": {"type": "local", "command": [command, *args], "enabled": True}}}
    elif agent == "codex":
        where = "~/.codex/config.toml (append)"
        data = {"mcp_servers": {"memcli": stdio}}

        def toml(value: str) -> str:
            return json.dumps(value)  # a JSON string is a valid TOML basic string

        return Registration(agent, where, f"[mcp_servers.memcli]\ncommand = {toml(command)}\n"
                                          f"args = [{', '.join(map(toml, args))}]\n", data)
    else:
        raise ValueError(agent)
    return Registration(agent, where, json.dumps(data, indent=2) + "\n", data)
