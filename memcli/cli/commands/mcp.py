"""memcli mcp: serve a store to agents over the Model Context Protocol."""

from __future__ import annotations

import json as jsonlib
import sys
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output, state
from memcli.errors import UsageError
from memcli.paths import resolve_store


@app.command()
def mcp(
    ctx: typer.Context,
    read_only: Annotated[bool, typer.Option(
        "--read-only", help="Serve only the read tools (no remember, consolidate or forget).")] = False,
    ask: Annotated[bool, typer.Option(
        "--ask/--no-ask", help="Offer the ask tool (memcli's own reader and model; default on).")] = True,
    print_config: Annotated[Optional[str], typer.Option(
        "--print-config", metavar="AGENT",
        help="Print the file that registers this server with AGENT (claude-code, claude-code-hooks, cursor, "
             "vscode, claude-desktop, gemini, opencode, codex) and exit; where it goes is said on stderr.")]
    = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Serve the store over MCP (stdio) to an agent: memory_search, grep, search, list_docs, read, ask,
    remember, consolidate, forget and status; topic documents as memcli://docs/<id> resources.

    The agent starts this command itself; register it with --print-config AGENT. The server keeps
    the search index warm between calls. Errors come back as tool errors with the CLI's messages.
    --json applies to --print-config (the server itself speaks JSON-RPC on stdout).
    """
    from memcli.registrations import AGENTS, registration

    if print_config is not None:
        if print_config not in AGENTS:
            raise UsageError(f"unknown agent {print_config!r} (agents: {', '.join(AGENTS)})")
        chosen = resolve_store(state(ctx).store)
        found = registration(print_config, chosen.path, read_only=read_only,
                             pinned=chosen.source in ("--store", "$MEMCLI_STORE"),
                             project=chosen.source.startswith("nearest "))
        out = output(ctx, json, quiet, verbose)
        if out.json:
            typer.echo(jsonlib.dumps({"agent": found.agent, "where": found.where, "config": found.data}))
        else:
            out.info(f"memcli: save as {found.where}")
            sys.stdout.write(found.text)
        return
    from memcli.mcp_server import serve

    serve(memory(ctx, create=not read_only, read_only=read_only), read_only=read_only, with_ask=ask)  # read-only: never creates one
