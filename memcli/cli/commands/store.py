"""memcli init | status."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, open_store, output, settings, where
from memcli.cli.output import Output, register
from memcli.index import LibraryIndex
from memcli.paths import PROJECT_STORE_DIRNAME, Resolved, resolve_config_file, store_cache_dir
from memcli.store import CURRENT_ID, Store


@dataclass
class InitResult:
    store: str
    created: bool

    def to_dict(self) -> dict:
        return {"store": self.store, "created": self.created}


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
    chosen = where(ctx)
    if directory is None and chosen.source in ("--store", "$MEMCLI_STORE"):
        root = chosen.path
    else:
        root = (directory or Path.cwd()).absolute() / PROJECT_STORE_DIRNAME
    existed = (root / "state.json").exists()
    Store.open(Resolved(root, "memcli init"), create=True)
    out.emit(InitResult(str(root), not existed))


@register(InitResult)
def _render_init(result: InitResult, out: Output) -> None:
    out.write(f"{'created' if result.created else 'already a store:'} {result.store}")


@dataclass
class StatusResult:
    store: str
    store_source: str
    documents: int
    entries: int
    library_tokens: int
    current_entries: int
    current_tokens: int
    current_oldest: str | None
    next_seq: int
    consolidation_due: str | None  # why CURRENT is due for consolidation, or None
    settings: dict
    config_file: str
    index_cache: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@app.command()
def status(
    ctx: typer.Context,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Show the store, how it was chosen, its size, CURRENT and the thresholds in force."""
    out = output(ctx, json, quiet, verbose)
    store = open_store(ctx)
    cfg = settings(ctx, store)
    with store.reading():
        index = LibraryIndex(store, cfg.search_partition_tokens)
        rows = index.catalog()
        current = store.load(CURRENT_ID).doc
        times = [e.time for _, e in current.entries() if e.time]
        state = store.read_state()
    cur = next((r for r in rows if r.id == CURRENT_ID), None)
    oldest = min(times) if times else None
    from memcli.consolidate.run import due

    reason = due(store, cfg)
    out.emit(StatusResult(
        store=str(store.root), store_source=where(ctx).source,
        documents=sum(1 for r in rows if r.id != CURRENT_ID),
        entries=sum(r.entries for r in rows),
        library_tokens=sum(r.token_count for r in rows if r.id != CURRENT_ID),
        current_entries=cur.entries if cur else 0, current_tokens=cur.token_count if cur else 0,
        current_oldest=oldest, next_seq=int(state.get("next_seq", 1)), consolidation_due=reason,
        settings=cfg.to_dict(), config_file=str(resolve_config_file().path),
        index_cache=str(store_cache_dir(store.root)),
    ))


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
    out.write(f"config file:  {result.config_file}")
    out.write(f"index cache:  {result.index_cache}")
