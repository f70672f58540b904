"""memcli consolidate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.consolidate.job import work
from memcli.consolidate.report import ConsolidationResult
from memcli.errors import UsageError
from memcli.results import Result


@app.command()
def consolidate(
    ctx: typer.Context,
    split: Annotated[Optional[int], typer.Option(
        "--split", metavar="TOKENS", help="Split documents larger than this (default: consolidate.split_tokens, 5000).")] = None,
    merge: Annotated[Optional[int], typer.Option(
        "--merge", metavar="TOKENS", help="Merge similar documents smaller than this (default 1000; 0: never).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
    llm: Annotated[Optional[bool], typer.Option(
        "--llm/--no-llm", help="Use the model, or the deterministic path only (default: consolidate.llm; "
                               "auto: the model when its profile is capable).")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Wait for a running (background) consolidation to finish and report how it ended.")] = False,
    stop: Annotated[bool, typer.Option(
        "--stop", help="Stop a running consolidation: its committed flushes stay, the rest stays in CURRENT.")]
    = False,
    worker_fd: Annotated[Optional[int], typer.Option("--worker-fd", hidden=True)] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Move CURRENT into the topic library: group, file, split and merge, losing nothing.

    CURRENT is consolidated in flushes of at most consolidate.threshold_tokens
    tokens. Each flush groups entries into topics, files each group into an
    existing document or a new one, splits documents over --split tokens,
    merges small similar ones under --merge tokens, refreshes summaries, and
    is committed only after a check in code that every entry is still there,
    unchanged (replaced facts move under a Superseded heading). With the
    model (--llm, or a capable model's default) every answer it gives is
    validated, and the deterministic path takes over where it fails.

    Only one consolidation runs at a time; it takes the store's lock only to
    commit each flush, so ingests and questions go on meanwhile. An ingest
    that crosses a threshold while the model consolidates starts it in the
    background (consolidate.background): `memcli status` shows it, --wait
    waits for it, --stop stops it.
    """
    out = output(ctx, json, quiet, verbose)
    if sum((wait, stop, worker_fd is not None)) > 1 or ((wait or stop) and dry_run):
        raise UsageError("--wait, --stop and --dry-run exclude each other")
    mem = memory(ctx)
    if wait or stop:
        if stop:
            final = mem.stop_consolidation()
        else:
            with out.stages() as progress:
                final = mem.wait_for_consolidation(lambda now: progress(
                    f"flush {now.get('flush', 0)}/{now.get('flushes', 0)}: {now.get('stage', 'starting')}",
                    now.get("done", 0), now.get("total", 0)))
        out.emit(JobReport("stop" if stop else "wait", final))
        return
    if worker_fd is not None:
        _work(mem, worker_fd, llm, split, merge, out)
        return
    with out.stages() as progress:
        result = mem.consolidate(split=split, merge=merge, dry_run=dry_run, llm=llm, progress=progress)
    out.emit(result)


@dataclass
class JobReport(Result):
    action: str  # wait | stop
    job: dict | None  # the consolidation's final status (None: none was running)


def _work(mem, fd: int, llm: bool | None, split, merge, out) -> None:
    """The background worker an ingest started (it holds the job lock it inherited)."""
    result = work(mem, fd, llm=llm, split=split, merge=merge)
    out.emit(result)


@register(JobReport)
def _render_job(report: JobReport, out: Output) -> None:
    job = report.job
    if job is None:
        out.write("no consolidation is running")
        return
    done = job.get("result") or {}
    line = f"consolidation (process {job.get('pid', '?')}) {job.get('state')}"
    if done:
        line += f": {done.get('entries_consolidated', 0)} entries in {done.get('flushes', 0)} flush(es), " \
                f"{done.get('seconds', 0):.1f} s; CURRENT: {done.get('current_entries_left', 0)} entries left"
    if job.get("error"):
        line += f": {job['error']}"
    out.write(line)


@register(ConsolidationResult)
def render_consolidation(result: ConsolidationResult, out: Output) -> None:
    if out.quiet and not result.dry_run:  # a report of what was written: -q says nothing (a dry run's is its data)
        return
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
        for old, new in flush.renamed.items():
            out.write(f"  renamed {old} -> {new}")
    calls = result.calls
    if result.llm:
        out.write(f"model: {calls['calls']} calls, {calls['prompt_tokens']} tokens in, "
                  f"{calls['completion_tokens']} out; {calls['invalid']} answers rejected; "
                  f"fallbacks {calls['fallbacks'] or 'none'}")
    out.write(f"library: {len(result.documents)} documents; CURRENT: {result.current_entries_left} entries left")
    if result.kv_invalidated_blocks:
        out.write(f"KV blocks invalidated: {result.kv_invalidated_blocks} ({result.kv_invalidated_tokens} tokens)")
