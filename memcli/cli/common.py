"""Options every command shares, and the state the top-level callback keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Optional

import typer

from memcli.cli.output import Output
from memcli.config import Settings
from memcli.paths import Resolved, resolve_store
from memcli.store import Store

JsonOpt = Annotated[bool, typer.Option("--json", help="Write one JSON document to stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only data and errors; no progress or notes.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="More diagnostics on stderr.")]
DocOpt = Annotated[Optional[str], typer.Option("--doc", help="Restrict to one document id (or CURRENT).")]


@dataclass
class AppState:
    store: Optional[str] = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    debug: bool = False
    overrides: dict = field(default_factory=dict)  # settings given as global flags


def state(ctx: typer.Context) -> AppState:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, AppState) else AppState()


def output(ctx: typer.Context, json: bool = False, quiet: bool = False, verbose: bool = False) -> Output:
    """The renderer for this command, merging its flags with the global ones."""
    app = state(ctx)
    out = Output(json=json or app.json, quiet=quiet or app.quiet, verbose=verbose or app.verbose)
    ctx.meta["memcli_output"] = out
    return out


def where(ctx: typer.Context) -> Resolved:
    return resolve_store(state(ctx).store)


def open_store(ctx: typer.Context, create: bool = False) -> Store:
    return Store.open(where(ctx), create=create)


def settings(ctx: typer.Context, store: Store | None = None, **overrides) -> Settings:
    """Effective settings: defaults < config files < environment < global flags < ``overrides``."""
    merged = {**state(ctx).overrides, **{k: v for k, v in overrides.items() if v is not None}}
    return Settings.load(store.root if store else None, merged or None)


def load_model(cfg: Settings, out: Output, *, kv_sequences: int = 1):
    """Open the configured model (a note on stderr, since a large model takes a while);
    ``kv_sequences=2``: a local context made for KV blocks."""
    from memcli.llm import open_model

    out.debug("loading the model")
    return open_model(cfg, verbose=out.verbose, kv_sequences=kv_sequences)
