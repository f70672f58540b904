"""memcli consolidate."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.consolidate.report import ConsolidationResult


@app.command()
def consolidate(
    ctx: typer.Context,
    split: Annotated[Optional[int], typer.Option(
        "--split", metavar="TOKENS", help="Split documents larger than this (default: consolidate.split_tokens, 5000).")] = None,
    merge: Annotated[Optional[int], typer.Option(
        "--merge", metavar="TOKENS", help="Merge similar documents smaller than this (default 1000; 0: never).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
    no_llm: Annotated[bool, typer.Option("--no-llm", help="Deterministic path only: no model.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Move CURRENT into the topic library: group, file, split and merge, losing nothing.

    CURRENT is consolidated in flushes of at most consolidate.threshold_tokens
    tokens. Each flush groups entries into topics, files each group into an
    existing document or a new one, splits documents over --split tokens,
    merges small similar ones under --merge tokens, refreshes summaries, and
    is committed only after a check in code that every entry is still there,
    unchanged (replaced facts move under a Superseded heading). Without
    --no-llm the configured model helps; every answer it gives is validated,
    and the deterministic path takes over where it fails.
    """
    out = output(ctx, json, quiet, verbose)
    mem = memory(ctx)
    with out.stages() as progress:
        result = mem.consolidate(split=split, merge=merge, dry_run=dry_run, llm=False if no_llm else None,
                                 progress=progress)
    out.emit(result)


@register(ConsolidationResult)
def render_consolidation(result: ConsolidationResult, out: Output) -> None:
    head = "dry run: would consolidate" if result.dry_run else "consolidated"
    if not result.flushes:
        out.write("CURRENT is empty: nothing to consolidate")
        return
    out.write(f"{head} {result.entries_consolidated} entries in {len(result.flushes)} flush(es) "
              f"({'model ' + str(result.model) if result.llm else 'deterministic'}, {result.seconds:.1f} s)")
    for number, flush in enumerate(result.flushes, 1):
        out.write(f"flush {number}: seq {flush.first_seq}-{flush.last_seq}, {flush.blocks} blocks, "
                  f"{flush.superseded} superseded"
                  + ("  [model output rejected by the guard; redone deterministically]" if flush.deterministic_redo else ""))
        for doc_id in flush.created:
            out.write(f"  + {doc_id} ({flush.token_delta.get(doc_id, 0):+d} tokens)")
        for doc_id in flush.updated:
            out.write(f"  ~ {doc_id} ({flush.token_delta.get(doc_id, 0):+d} tokens)")
        for doc_id, parts in flush.split.items():
            out.write(f"  split {doc_id} -> {', '.join(parts)}")
        for group in flush.merged:
            out.write(f"  merged {', '.join(group[1:])} into {group[0]}")
    calls = result.calls
    if result.llm:
        out.write(f"model: {calls['calls']} calls, {calls['prompt_tokens']} tokens in, "
                  f"{calls['completion_tokens']} out; {calls['invalid']} answers rejected; "
                  f"fallbacks {calls['fallbacks'] or 'none'}")
    out.write(f"library: {len(result.documents)} documents; CURRENT: {result.current_entries_left} entries left")
    if result.kv_invalidated_blocks:
        out.write(f"KV blocks invalidated: {result.kv_invalidated_blocks} ({result.kv_invalidated_tokens} tokens)")
