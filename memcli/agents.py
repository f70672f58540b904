"""memcli in the agents people use: what registers the MCP server with each, and Claude Code's hook.

``registration(agent, store)`` is the exact snippet or command for one agent, naming this Python
and the store by absolute path (so it works from any directory and any PATH). ``claude_code_hook``
handles one hook event that Claude Code sends as JSON on stdin: at session end or before a context
compaction it ingests the transcript the event names; at session start it returns a short digest of
what memory holds about the project in the working directory (Claude Code adds a SessionStart
hook's stdout to the session's context).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from memcli.errors import InputError

AGENTS = ("claude-code", "cursor", "codex", "claude-desktop")
SAVE_EVENTS = ("SessionEnd", "PreCompact", "Stop")
DIGEST_BUDGET = 600  # tokens of evidence a session start gets


def server_command(store: Path, read_only: bool = False) -> list[str]:
    """The command an agent runs to start the server: this interpreter, so no PATH is needed."""
    return [sys.executable, "-m", "memcli", "--store", str(store), "mcp", *(["--read-only"] if read_only else [])]


def hook_command(store: Path) -> str:
    return shlex.join([sys.executable, "-m", "memcli", "--store", str(store), "hook", "claude-code"])


def registration(agent: str, store: Path, *, read_only: bool = False) -> str:
    """What registers memcli's MCP server (on ``store``) with ``agent``, ready to paste or run."""
    command, *args = server_command(store, read_only)
    servers = {"mcpServers": {"memcli": {"command": command, "args": args}}}
    if agent == "claude-code":
        hooks = {"hooks": {event: [{"hooks": [{"type": "command", "command": hook_command(store)}]}]
                           for event in ("SessionStart", "PreCompact", "SessionEnd")}}
        return ("# register the server (add --scope user for every project):\n"
                f"claude mcp add memcli -- {shlex.join([command, *args])}\n\n"
                "# optional: save sessions to memory and recall the project at session start;\n"
                "# merge into .claude/settings.json (or ~/.claude/settings.json):\n"
                + json.dumps(hooks, indent=2))
    if agent == "cursor":
        return "// .cursor/mcp.json in the project (or ~/.cursor/mcp.json for all projects)\n" + \
            json.dumps(servers, indent=2)
    if agent == "claude-desktop":
        return ("// claude_desktop_config.json (Settings > Developer > Edit Config; on macOS in\n"
                "// ~/Library/Application Support/Claude/, on Windows in %APPDATA%\\Claude\\)\n"
                + json.dumps(servers, indent=2))
    if agent == "codex":
        def toml(value: str) -> str:
            return json.dumps(value)  # a JSON string is a valid TOML basic string

        return ("# ~/.codex/config.toml\n[mcp_servers.memcli]\n"
                f"command = {toml(command)}\nargs = [{', '.join(map(toml, args))}]\n")
    raise ValueError(agent)


def read_hook_event(raw: str) -> dict:
    """The hook's JSON object, checked."""
    try:
        event = json.loads(raw)
    except ValueError as exc:
        raise InputError("<hook stdin>", f"not JSON: {exc}") from None
    except RecursionError:
        raise InputError("<hook stdin>", "not a hook event: JSON nested too deeply") from None
    if not isinstance(event, dict) or not isinstance(event.get("hook_event_name"), str):
        raise InputError("<hook stdin>", "not a Claude Code hook event (no hook_event_name)")
    return event


def claude_code_hook(memory, event: dict) -> dict:
    """Handle one Claude Code hook event; returns ``{event, action, ...}`` (``digest`` for a session start)."""
    name = event["hook_event_name"]
    if name in SAVE_EVENTS:
        path = event.get("transcript_path")
        if not isinstance(path, str) or not path:
            raise InputError("<hook stdin>", f"{name} event without a transcript_path")
        if "\x00" in path:
            raise InputError("<hook stdin>", "the transcript_path holds a NUL byte", where="transcript_path")
        done = memory.ingest(Path(path).expanduser(), format="claude-code")
        return {"event": name, "action": "ingested", "added": done.added, "skipped": done.skipped,
                "consolidation": done.consolidation}
    if name == "SessionStart":
        cwd = event.get("cwd") if isinstance(event.get("cwd"), str) else None
        project = Path(cwd).name if cwd else ""
        if not project or memory.status().entries == 0:
            return {"event": name, "action": "digest", "digest": ""}
        found = memory.ask(f"{project} project: what was decided, done and left to do",
                           reader="evidence-only", budget=DIGEST_BUDGET)
        lines = [f"Memory about {project} (memcli; cite as doc:lines, search more with the memory_search tool):"]
        lines += [f"{e.citation}\n{e.text}" for e in found.evidence]
        return {"event": name, "action": "digest", "digest": "\n".join(lines) if found.evidence else ""}
    return {"event": name, "action": "ignored"}
