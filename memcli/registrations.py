"""memcli in the agents people use: the file that registers the MCP server (and Claude Code's hooks,
:mod:`memcli.hooks`) with each.

Two kinds of file. A store of the user's own (``--store``, ``$MEMCLI_STORE``, the XDG store) is
named by absolute path, with this Python as the command, so the file works from any directory and
any PATH: it belongs in the user's own configuration. A project's store (the ``.memcli/`` that
``memcli init`` made, found from the directory the command runs in) is registered portably: the
command is ``memcli`` on PATH and the store is the project's, found from the directory the host
starts the server in (the project's, or named through the host's workspace variable where it has
one), so the file can be committed and works on every clone.

Where a host has timeout settings, the file sets them: long enough for the server's first start
and for ``ask`` (whose model work stops at ``mcp.ask_seconds``, 20 s by default).
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

AGENTS = ("claude-code", "claude-code-hooks", "cursor", "vscode", "claude-desktop", "gemini", "gemini-hooks", "opencode",
          "codex", "codex-hooks")
# the events each host's hook entries name, and how long the host waits for each (seconds; Gemini CLI's
# file counts in milliseconds): the session start's recall, the prompt's recall (memcli gives up first, at
# hook.prompt_seconds, and adds nothing), the saves' detached ingest
HOOK_TIMEOUTS = {
    "claude-code": {"SessionStart": 30, "UserPromptSubmit": 10, "PreCompact": 10, "SessionEnd": 10},
    "codex": {"SessionStart": 30, "UserPromptSubmit": 10, "Stop": 10, "PreCompact": 10},
    "gemini": {"SessionStart": 30, "BeforeAgent": 10, "SessionEnd": 10, "PreCompress": 10},
}
STARTUP_SECONDS = 30  # a host's limit on the server's start (Codex: startup_timeout_sec, default 10)
TOOL_SECONDS = 60  # a host's limit on one tool call (Codex tool_timeout_sec, Gemini timeout; past ask's 20 s)
PORTABLE = ("claude-code", "claude-code-hooks", "cursor", "vscode", "gemini", "gemini-hooks", "opencode", "codex-hooks")  # files kept in a project
WORKSPACE = {"cursor": "${workspaceFolder}", "vscode": "${workspaceFolder}"}  # the project, as the host names it


@dataclass(frozen=True)
class Registration:
    """What registers memcli with one agent: ``text`` is a whole file the host reads as it is (JSON or
    TOML, no comments), ``where`` says where it goes (printed apart, on stderr), ``data`` is the same
    configuration as an object (``--json``)."""

    agent: str
    where: str
    text: str
    data: dict


def server_command(store: Path | None, read_only: bool = False, *, portable: str | None = None) -> list[str]:
    """The command an agent runs to start the server: this interpreter on ``store`` (no PATH needed),
    or with ``portable`` (the project's folder as the host names it, '' for its working directory)
    ``memcli`` on PATH on the project's own ``.memcli/``."""
    flags = ["--read-only"] if read_only else []
    if portable is not None:
        return ["memcli", *(["--store", f"{portable}/.memcli"] if portable else []), "mcp", *flags]
    return [sys.executable, "-m", "memcli", "--store", str(store), "mcp", *flags]


def hook_command(store: Path | None, *, portable: bool = False, host: str = "claude-code") -> str:
    """The hook's command: on ``store``, or (None) on the store of each session's project."""
    python = ["memcli"] if portable else [sys.executable, "-m", "memcli"]
    return shlex.join([*python, *(["--store", str(store)] if store else []), "hook", host])


# How the Codex plugin finds memcli (Codex gives a plugin's commands no folder of their own, so the search is written
# out): only PATH's absolute entries, never an empty one, "." or a relative one (each names the session's folder,
# the project, where a repository could commit its own ./memcli). The Claude Code plugin's bin/memcli-on-path
# searches the same way.
ABSOLUTE_PATH_SEARCH = 'set -f; IFS=:; for d in ${PATH-}; do case "$d" in /*) if [ -f "$d/memcli" ] && [ -x "$d/memcli" ]; then exec "$d/memcli" "$@"; fi;; esac; done; echo "memcli plugin: the memcli command is not on PATH (only its absolute entries are searched). Install it first: pipx install ./memcli" >&2; exit 1'


def plugin_command(*args: str) -> str:
    """A shell command that runs the installed memcli with ``args`` (:data:`ABSOLUTE_PATH_SEARCH`)."""
    return f"/bin/sh -c '{ABSOLUTE_PATH_SEARCH}' memcli " + " ".join(args)


def hook_entries(host: str, command: str) -> dict:
    """The ``hooks`` object of ``host``'s settings: one command hook an event (Claude Code's and
    Codex's shape; Gemini CLI's the same with a name and milliseconds)."""
    def one(event: str, limit: int) -> dict:
        if host == "gemini":
            return {"name": f"memcli-{event}", "type": "command", "command": command, "timeout": limit * 1000}
        return {"type": "command", "command": command, "timeout": limit}
    return {event: [{"hooks": [one(event, limit)]}] for event, limit in HOOK_TIMEOUTS[host].items()}


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string, for any text (characters outside the BMP as themselves;
    quotes, backslashes and control characters escaped)."""
    out = []
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char < " " or char == "\x7f":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(char, f"\\u{ord(char):04X}"))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def registration(agent: str, store: Path, *, read_only: bool = False, pinned: bool = True,
                 project: bool = False) -> Registration:
    """What registers memcli's MCP server (on ``store``) with ``agent``, ready to save as the host's file.
    ``pinned``: the store was named (--store, $MEMCLI_STORE), so hooks use it too; otherwise each
    session goes to the store of its project (:func:`memcli.hooks.hook_store`). ``project``: ``store``
    is the project's ``.memcli/``, so a file kept in the project is written to work on every clone."""
    portable = project and not pinned and agent in PORTABLE
    command, *args = server_command(store, read_only, portable=WORKSPACE.get(agent, "") if portable else None)
    stdio = {"command": command, "args": args}
    kept = ("; memcli on PATH, the project's .memcli/ store: commit it" if portable else "")
    if agent in ("claude-code", "cursor", "claude-desktop", "gemini"):
        where = {
            "claude-code": f".mcp.json in the project (or run: claude mcp add --scope user memcli -- "
                           f"{shlex.join([command, *args])}); the hooks: --print-config claude-code-hooks",
            "cursor": ".cursor/mcp.json in the project (or ~/.cursor/mcp.json for all projects)",
            "claude-desktop": "claude_desktop_config.json (Settings > Developer > Edit Config; macOS: "
                              "~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)",
            "gemini": ".gemini/settings.json in the project (or ~/.gemini/settings.json); merge with what is there",
        }[agent] + kept
        server = {**stdio, "timeout": TOOL_SECONDS * 1000} if agent == "gemini" else stdio  # milliseconds
        data = {"mcpServers": {"memcli": server}}
    elif agent.endswith("-hooks"):
        host = agent.removesuffix("-hooks")
        where = {
            "claude-code": ".claude/settings.json in the project (or ~/.claude/settings.json); merge with what is there",
            "codex": ".codex/hooks.json in the project (or ~/.codex/hooks.json); Codex asks you to trust new hooks",
            "gemini": ".gemini/settings.json in the project (or ~/.gemini/settings.json); merge with what is there; "
                      "hooks must be on (/settings: Enable Hooks System)",
        }[host] + kept
        data = {"hooks": hook_entries(host, hook_command(store if pinned else None, portable=portable, host=host))}
    elif agent == "vscode":
        where = ".vscode/mcp.json in the workspace" + kept
        data = {"servers": {"memcli": {"type": "stdio", **stdio}}}
    elif agent == "opencode":
        where = "opencode.json in the project (or ~/.config/opencode/opencode.json); merge with what is there" + kept
        data = {"$schema": "https://opencode.ai/config.json",
                "mcp": {"memcli": {"type": "local", "command": [command, *args], "enabled": True,
                                   "timeout": STARTUP_SECONDS * 1000}}}  # its limit on listing the tools (ms)
    elif agent == "codex":
        where = "~/.codex/config.toml (append)"
        server = {**stdio, "startup_timeout_sec": STARTUP_SECONDS, "tool_timeout_sec": TOOL_SECONDS}
        data = {"mcp_servers": {"memcli": server}}
        return Registration(agent, where, f"[mcp_servers.memcli]\ncommand = {toml_string(command)}\n"
                                          f"args = [{', '.join(map(toml_string, args))}]\n"
                                          f"startup_timeout_sec = {STARTUP_SECONDS}\n"
                                          f"tool_timeout_sec = {TOOL_SECONDS}\n", data)
    else:
        raise ValueError(agent)
    return Registration(agent, where, json.dumps(data, indent=2, ensure_ascii=False) + "\n", data)
