"""memcli init | status | embed | trust."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output, state
from memcli.cli.output import Output, register
from memcli.memory import Memory
from memcli.paths import Resolved
from memcli.reports import EmbedResult, InitResult, StatusResult, TrustResult
from memcli.semantic.job import AlreadyRunning, describe


@app.command()
def init(
    ctx: typer.Context,
    directory: Annotated[Optional[Path], typer.Argument(
        help="Where to create .memcli/ (default: the current directory).")] = None,
    git: Annotated[bool, typer.Option(
        "--git", help="Share the store through git: unique entry ids, the entry merge driver, a commit a change.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Create a project store, DIR/.memcli/, used by memcli anywhere below DIR.

    Without DIR, the store named by --store or $MEMCLI_STORE is created if one
    is given, else ./.memcli/. With --git (also on an existing store) the store
    is shared through the git work tree it is in (a repository is made in the
    store when there is none): see `memcli sync`, `memcli log`, `memcli undo`.
    """
    out = output(ctx, json, quiet, verbose)
    created = Memory.init(directory, store=state(ctx).store)
    if not git:
        out.emit(created)
        return
    out.emit(memory(ctx, where=Resolved(Path(created.store), "memcli init")).share())


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
    if result.shared is None:
        out.write(f"entries:      {result.entries} in all; next seq {result.next_seq}")
    else:
        origin = result.shared["origin"]
        out.write(f"entries:      {result.entries} in all; shared through git (`memcli sync`), this clone's "
                  f"origin {origin if origin is not None else 'drawn on its first write'}")
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
    if result.vectors is not None:
        job = result.vectors.get("job") or {}
        out.write(f"vectors:      {describe(job, result.vectors['missing'])}")
    out.write(f"config file:  {result.config_file}")
    if result.approvals:
        out.write(f"approvals:    {result.approvals['file']}: {result.approvals['damaged']}; none of its approvals "
                  "is honoured (repair it or move it aside, then `memcli trust`)")
    out.write(f"index cache:  {result.index_cache}")


@app.command()
def embed(
    ctx: typer.Context,
    worker: Annotated[bool, typer.Option("--worker", hidden=True)] = False,
    index_dir: Annotated[Optional[Path], typer.Option("--index-dir", hidden=True)] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Compute the entries' vectors now (the semantic signal of ask's evidence).

    After each write a background job computes them (search.vectors =
    background); until it is done, a question ranks the entries it has not
    reached by their words alone and says how many. `memcli status` shows
    how far it is. This command waits for a running job, then computes
    whatever is still missing, with a progress bar.
    """
    out = output(ctx, json, quiet, verbose)
    if worker:  # the detached job a write started: its own lock; another job running is not an error
        app_state = state(ctx)
        mem = Memory(app_state.store, settings=app_state.overrides or None, cache_dir=index_dir,
                     on_warning=out.warn)
        try:
            out.emit(EmbedResult(**mem.compute_vectors()))
        except AlreadyRunning:
            pass
        return
    mem = memory(ctx)
    with out.stages() as progress:
        seconds = mem.embed(progress)
    status = mem.vectors_status()
    if status is None:
        out.emit(EmbedResult(state="off", why=mem.index.semantic_missing or "search.semantic is off"))
        return
    out.emit(EmbedResult(state="done", entries=status["entries"], seconds=round(seconds, 2)))


@register(EmbedResult)
def _render_embed(result: EmbedResult, out: Output) -> None:
    if result.state == "off":
        out.write(f"no vectors: {result.why}")
    else:
        out.write(f"vectors: {result.entries} entries"
                  + (f" ({result.seconds} s)" if result.seconds is not None else ""))


@app.command()
def trust(
    ctx: typer.Context,
    revoke: Annotated[bool, typer.Option("--revoke", help="Take the approval back.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Approve the store's own model and KV-folder settings, as its config.toml sets them now.

    A store's config.toml travels with it (git, a copied folder), so memcli
    takes model.backend, model.base_url, model.api_key_env, model.name,
    model.path and kv.dir from it only once you approve them here, for this
    store on this machine; your own config file, MEMCLI_* variables and flags
    are always used. Any later change to one of them needs a new approval.
    """
    out = output(ctx, json, quiet, verbose)
    out.emit(memory(ctx).trust(revoke=revoke))


@register(TrustResult)
def _render_trust(result: TrustResult, out: Output) -> None:
    if not result.settings:
        out.write(f"{result.store}/config.toml sets nothing that needs approval")
        return
    for key, value in sorted(result.settings.items()):
        out.write(f"{key} = {value}")
    out.write("approved for this store: these are used" if result.approved else
              "not approved: these are not used (`memcli trust` approves them)")
