"""The Typer application and its global options."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memcli import __version__
from memcli.cli.common import AppState

app = typer.Typer(
    name="memcli",
    help="Local long-term memory for LLM agents, kept as plain Markdown files.\n\n"
         "Ingest transcripts into CURRENT, then read, grep and search the memory. "
         "Exit codes: 0 ok, 1 no match or failure, 2 usage, 3 configuration or "
         "model missing, 4 bad input, 130 interrupted.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"memcli {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    store: Annotated[Optional[str], typer.Option(
        "--store", metavar="DIR", help="Store directory (else $MEMCLI_STORE, the nearest .memcli/, "
                                       "or $XDG_DATA_HOME/memcli).")] = None,
    json: Annotated[bool, typer.Option("--json", help="JSON output for every command.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only data and errors.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More diagnostics on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Tracebacks on errors (or MEMCLI_DEBUG=1).")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    ctx.obj = AppState(store=store, json=json, quiet=quiet, verbose=verbose, debug=debug)
