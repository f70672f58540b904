"""Options every command shares, and the state the top-level callback keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Optional

import typer

from memcli.cli.output import Output

JsonOpt = Annotated[bool, typer.Option("--json", help="Write one JSON document to stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only data and errors; no progress or notes.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="More diagnostics on stderr.")]
DocOpt = Annotated[Optional[str], typer.Option("--doc", help="Restrict to one document id (or CURRENT).")]
SinceOpt = Annotated[Optional[str], typer.Option(
    "--since", metavar="TIME", help="Only entries from this day or time on (YYYY-MM-DD[THH:MM]), on --clock.")]
UntilOpt = Annotated[Optional[str], typer.Option(
    "--until", metavar="TIME", help="Only entries up to this day (its end) or time, on --clock.")]
ClockOpt = Annotated[Optional[str], typer.Option(
    "--clock", metavar="CLOCK", help="Which time --since/--until read: said (when the entry was said; the "
                                     "default) or event (the day it speaks of, its when=, else the day said).")]


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


def memory(ctx: typer.Context, *, create: bool = False, where=None, read_only: bool = False):
    """The :class:`memcli.Memory` of this invocation: the store (``where``, a
    :class:`~memcli.paths.Resolved`, else flag > environment > nearest .memcli/ > XDG), settings
    (defaults < config files < environment < global flags)."""
    from memcli.memory import Memory

    app = state(ctx)
    out = ctx.meta.get("memcli_output") or output(ctx)
    return Memory(where or app.store, create=create, settings=app.overrides or None, verbose=app.verbose,
                  on_warning=out.warn, read_only=read_only)


def overrides(ctx: typer.Context) -> dict:
    """Settings given as global flags (``--model``, ``--threads``...)."""
    return dict(state(ctx).overrides)

