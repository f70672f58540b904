"""memcli init | status."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output, state
from memcli.cli.output import Output, register
from memcli.memory import InitResult, Memory, StatusResult


@app.command()
def init(
    ctx: typer.Context,
    directory: Annotated[Optional[Path], typer.Argument(
        help="Where to create .memcli/ (default: the current directory).")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Create a project store, DIR/.memcli/, used by memcli anywhere below DIR.

    Without DIR, the store named by --store or $MEMCLI_STORE is created if one
    is given, else ./.memcli/.
    """
    out = output(ctx, json, quiet, verbose)
    out.emit(Memory.init(directory, store=state(ctx).store))


@register(InitResult)
def _render_init(result: InitResult, out: Output) -> None:
    out.write(f"{'created' if result.created else 'already a store:'} {result.store}")


@app.command()
def status(
    ctx: typer.Context,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Show the store, how it was chosen, its size, CURRENT and the thresholds in force."""
    out = output(ctx, json, quiet, verbose)
    out.emit(memory(ctx).status())


@register(StatusResult)
def _render_status(result: StatusResult, out: Output) -> None:
    s = result.settings
    out.write(f"store:        {result.store}  (from {result.store_source})")
    out.write(f"documents:    {result.documents} ({result.library_tokens} tokens)")
    out.write(f"entries:      {result.entries} in all; next seq {result.next_seq}")
    out.write(f"CURRENT:      {result.current_entries} entries, {result.current_tokens} tokens"
              + (f", oldest {result.current_oldest}" if result.current_oldest else ""))
    out.write(f"consolidate:  at {s['consolidate.threshold_tokens']['value']} tokens or "
              f"{s['consolidate.threshold_age']['value']} s; split > {s['consolidate.split_tokens']['value']}, "
              f"merge < {s['consolidate.merge_tokens']['value']} tokens"
              + (f"  (due now: {result.consolidation_due})" if result.consolidation_due else ""))
    job = result.consolidation
    if job and job.get("running"):
        out.write(f"running:      consolidation, {job['summary']}")
    elif job:
        out.write(f"last run:     consolidation {job.get('state')} at {job.get('ended', '?')}"
                  + (f": {job['error']}" if job.get("error") else ""))
    p = result.profile
    out.write(f"model:        profile {p['name']} ({p['reason']}); ask reader {result.reader}, "
              f"consolidation {'with the model' if result.consolidate_llm else 'deterministic'}")
    out.write(f"config file:  {result.config_file}")
    out.write(f"index cache:  {result.index_cache}")
