"""memcli kv build | ls | stats | verify | prune."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.errors import EXIT_FAILURE
from memcli.kv import admin
from memcli.kv.admin import KVReport

kv_app = typer.Typer(help="The KV-block store: saved llama.cpp states of memory.", no_args_is_help=True)
app.add_typer(kv_app, name="kv")


@kv_app.command("build")
def build(
    ctx: typer.Context,
    kv_verify: Annotated[bool, typer.Option(
        "--kv-verify", help="Check restored blocks' next-token predictions; rebuild on a mismatch.")] = False,
    ask_units: Annotated[bool, typer.Option(
        "--ask-units", help="Also make the block of every memory unit `ask --kv-compose` places.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Prefill and save the blocks of chat's memory context (header, documents, CURRENT).

    Blocks already stored and valid are restored instead; a block saved under
    another model context is refused and rebuilt. --ask-units also makes the
    composed block of every memory unit (runs of entries of one document, up
    to 512 tokens), so the first `ask --kv-compose` prefills only its question.
    """
    out = output(ctx, json, quiet, verbose)
    mem = memory(ctx)
    with out.stages() as stages:
        report = admin.build(mem, verify=kv_verify, ask_units=ask_units,
                             progress=lambda done, total: stages("making memory unit blocks", done, total))
    out.emit(report)


@kv_app.command("ls")
def ls(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """List stored blocks: key, unit, start, tokens, size, last use (newest first)."""
    output(ctx, json, quiet, verbose).emit(admin.listing(memory(ctx)))


@kv_app.command("stats")
def stats(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Blocks, tokens and bytes stored, by kind of unit, against the budget (kv.budget_mb)."""
    output(ctx, json, quiet, verbose).emit(admin.stats(memory(ctx)))


@kv_app.command("verify")
def verify(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False) -> None:
    """Check every block's header, checksum and parent; exit 1 when any is bad (no model needed)."""
    report = admin.verify(memory(ctx))
    output(ctx, json, quiet, verbose).emit(report)
    if report.bad:
        raise typer.Exit(EXIT_FAILURE)


@kv_app.command("prune")
def prune(
    ctx: typer.Context,
    budget: Annotated[Optional[int], typer.Option("--budget", metavar="MB", help="Evict to this size (default: "
                                                  "kv.budget_mb).")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Remove stale blocks (their document changed), broken ones, then least recently used ones over budget,
    and key summaries (latent selection) left without their block."""
    output(ctx, json, quiet, verbose).emit(admin.prune(memory(ctx), budget))


@register(KVReport)
def _render(report: KVReport, out: Output) -> None:
    if report.action == "ls":
        out.table("KV blocks", ["key", "unit", "start", "tokens", "MB", "parent"],
                  [[r["key"][:12], r["unit"], str(r["start"]), str(r["n_tokens"]), f"{r['bytes'] / 1e6:.1f}",
                    (r["parent"] or "-")[:12]] for r in report.rows])
        return
    for key, value in report.data.items():
        if isinstance(value, (dict, list)) and value:
            out.write(f"{key}:")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                out.write(f"  {k}: {_plain(v)}" if isinstance(value, dict) else f"  {_plain(v)}")
        else:
            out.write(f"{key}: {_plain(value)}")


def _plain(value) -> str:
    """A value as a person reads it: ``none`` for nothing, ``blocks 3, tokens 120`` for a record."""
    if value is None or value == {} or value == []:
        return "none"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    return str(value)
