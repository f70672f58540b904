"""memcli hook: one line in an agent's hook configuration saves and recalls memory."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import Annotated

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.errors import UsageError


@app.command()
def hook(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent sending the event: claude-code.")],
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Handle one hook event an agent sends as JSON on stdin.

    claude-code: SessionEnd, PreCompact and Stop ingest the session transcript
    the event names (only turns not ingested before; the usual automatic
    consolidation follows); SessionStart prints what memory holds about the
    project in the event's working directory (Claude Code adds it to the
    session's context). Other events are ignored. `memcli mcp --print-config
    claude-code` prints the hook entries.
    """
    from memcli.agents import claude_code_hook, read_hook_event

    out = output(ctx, json, quiet, verbose)
    if agent != "claude-code":
        raise UsageError(f"unknown agent {agent!r} (agents with hooks: claude-code)")
    event = read_hook_event(sys.stdin.read())
    done = claude_code_hook(memory(ctx, create=True), event)
    if json:
        typer.echo(jsonlib.dumps(done, ensure_ascii=False))
    elif done.get("digest"):
        out.write(done["digest"])
    elif done["action"] == "ingested":
        out.info(f"memcli: {done['added']} new turns of the session saved to memory")
