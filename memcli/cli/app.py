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
         "Exit codes: 0 ok, 1 no match (or ask's I don't know) or failure, 2 usage, 3 configuration or "
         "model missing, 4 bad input, 5 the store cannot be written, 130 interrupted.",
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
    model: Annotated[Optional[str], typer.Option(
        "--model", metavar="GGUF", help="Local GGUF model file (else $MEMCLI_MODEL; default SmolLM2-135M).")] = None,
    base_url: Annotated[Optional[str], typer.Option(
        "--base-url", metavar="URL", help="Use an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1.")] = None,
    model_name: Annotated[Optional[str], typer.Option("--model-name", help="Model name sent to the server.")] = None,
    gpu_layers: Annotated[Optional[int], typer.Option(
        "--gpu-layers", metavar="N", help="Layers to offload to the GPU (-1 all; CUDA builds).")] = None,
    threads: Annotated[Optional[int], typer.Option("--threads", metavar="N", help="CPU threads (0: half the cores, at least one).")] = None,
    n_ctx: Annotated[Optional[int], typer.Option("--n-ctx", metavar="N", help="Context window.")] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    overrides = {"model.path": model, "model.base_url": base_url, "model.name": model_name,
                 "model.gpu_layers": gpu_layers, "model.threads": threads, "model.n_ctx": n_ctx}
    if base_url:
        overrides["model.backend"] = "openai"
    ctx.obj = AppState(store=store, json=json, quiet=quiet, verbose=verbose, debug=debug,
                       overrides={k: v for k, v in overrides.items() if v is not None})
