"""memcli hook: one line in an agent's hook configuration saves and recalls memory."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import Annotated

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output, state
from memcli.errors import UsageError
from memcli.hooks import (
    HOSTS,
    digest,
    hook_store,
    nothing_to_save,
    read_hook_event,
    recall,
    save,
    start_output,
    start_saving,
)


@app.command()
def hook(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent sending the event: claude-code, codex or gemini.")],
    wait: Annotated[bool, typer.Option(
        "--wait", help="Save the session before answering (default: a detached ingest, the hook answers at once).")
    ] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Handle one hook event an agent sends as JSON on stdin.

    The save events (claude-code: SessionEnd, PreCompact, Stop; codex: Stop,
    the end of each turn, and PreCompact; gemini: SessionEnd, PreCompress)
    save the session transcript the event names (only turns not saved
    before; the usual automatic consolidation follows) in a detached ingest,
    so the hook answers at once (--wait: before answering). SessionStart
    prints what memory holds about the event's project within
    hook.start_tokens (600): its recent sessions, newest first (when, what
    was asked, how it ended, each cited doc:line), then lines of decisions
    and open items; nothing when memory holds nothing about it. The prompt
    event (claude-code, codex: UserPromptSubmit; gemini: BeforeAgent)
    prints the lines of earlier sessions that bear on the prompt, within
    hook.prompt_tokens (300), and nothing when none bears on it enough or
    when hook.prompt_seconds (2) pass first: it never holds a prompt up.
    Both are written as the agent reads them: text for Claude Code, the
    hosts' JSON (additionalContext) for Codex and Gemini CLI. The store: --store or $MEMCLI_STORE, else the
    nearest .memcli/ above the event's cwd, else your user store, with each
    entry tagged with its project. Other events are ignored. `memcli mcp
    --print-config claude-code-hooks` (codex-hooks, gemini-hooks) prints the
    hook entries.
    """
    out = output(ctx, json, quiet, verbose)
    if agent not in HOSTS:
        raise UsageError(f"unknown agent {agent!r} (agents with hooks: {', '.join(HOSTS)})")
    event = read_hook_event(sys.stdin.read(), agent)
    name, prompt = event["hook_event_name"], HOSTS[agent]["prompt"]
    if name not in (*HOSTS[agent]["save"], "SessionStart", prompt):
        done = {"event": name, "action": "ignored"}
    elif name not in ("SessionStart", prompt) and nothing_to_save(event, agent):
        done = {"event": name, "action": "nothing to save", "why": "the event names no transcript"}
    else:
        where, project = hook_store(event, state(ctx).store)
        if name == "SessionStart":
            done = digest(memory(ctx, create=True, where=where), event, project)
        elif name == prompt:
            done = recall(memory(ctx, create=True, where=where), event, project, agent)
        elif wait:
            done = save(memory(ctx, create=True, where=where), event, project, agent)
        else:
            done = start_saving(event, where.path, project, agent)
    if out.json:
        typer.echo(jsonlib.dumps(done, ensure_ascii=False))
    elif done.get("digest") or done.get("recall"):
        out.write(start_output(agent, done.get("digest") or done["recall"], name))
    elif done["action"] == "ingested":
        out.info(f"memcli: {done['added']} new turns of the session saved to memory ({done['store']})")
    elif done["action"] == "recall" and done.get("why"):
        out.info(f"memcli: {done['why']}")
    elif done["action"] == "saving":
        out.info(f"memcli: saving the session to {done['store']} (process {done['pid']}, log {done['log']})")
