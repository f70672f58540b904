"""memcli doctor."""

from __future__ import annotations

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, output, overrides, state
from memcli.cli.output import Output, register
from memcli.doctor import DoctorResult, diagnose
from memcli.hook_start import HOSTS


@app.command()
def doctor(
    ctx: typer.Context,
    repair: bool = typer.Option(False, "--repair", help="Put back a damaged state.json (from git's history, "
                                "else made from the store), counters past every entry."),
    prune_caches: bool = typer.Option(False, "--prune-caches", help="Remove the cache folders (search index, "
                                      "vectors) of stores that no longer exist where they were."),
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Check the installation: versions, paths and where they came from, the model, GPU offload,
    and which agents here (Claude Code, Codex, Gemini CLI, Cursor) have memcli's hooks, MCP server or
    plugin wired in.

    Names every folder that holds the store's KV blocks: its KV folder and each
    one outside the store it was used with (kv.dir). Loads the configured
    model and generates one token. --repair puts back a
    damaged state.json (a teammate's commit, a hand edit). A store deleted or
    moved by hand leaves its cache folder (its words in the search index, their
    meaning in the vectors): doctor lists such folders, --prune-caches removes
    them. Exits 0 when every check passes, 3 when the model or configuration is
    missing, 1 otherwise.
    """
    out = output(ctx, json, quiet, verbose)
    result = diagnose(state(ctx).store, overrides(ctx), verbose=out.verbose, repair=repair,
                      prune_caches=prune_caches)
    out.emit(result)
    if not result.ok:
        raise typer.Exit(result.exit_code)


@register(DoctorResult)
def _render(result: DoctorResult, out: Output) -> None:
    out.write(f"memcli {result.versions['memcli']} (Python {result.versions['python']}, "
              f"llama-cpp-python {result.versions.get('llama-cpp-python')})")
    for name, value in result.paths.items():
        extra = "" if value.get("exists", True) else "  (not created yet)"
        out.write(f"{name:12} {value['path']}  [{value['source']}]{extra}")
    model = result.model
    if model.get("path"):
        out.write(f"{'model':12} {model['path']}  [{model.get('source')}]")
        if model.get("sha256"):
            out.write(f"{'sha256':12} {model['sha256']}")
    elif model.get("base_url"):
        out.write(f"{'model':12} {model['model']} at {model['base_url']}")
    for check in result.checks:
        out.write(f"{'ok ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    caches = result.caches
    if "pruned" in caches:
        out.write(f"{'caches':12} removed {caches['pruned']} folders of stores that are gone")
    if caches.get("left_behind"):
        size = sum(item["bytes"] for item in caches["left_behind"]) / 1e6
        out.write(f"{'caches':12} {len(caches['left_behind'])} folders ({size:.1f} MB) of stores that are gone "
                  "still hold their words and vectors (`memcli doctor --prune-caches` removes them):")
        for item in caches["left_behind"]:
            out.write(f"{'':12} {item['folder']}  (was {item['store']})")
    for host in result.hosts:
        hooks = f"hooks ({', '.join(host.events)})" if host.events else "hooks"
        parts = [p for p, on in (("plugin", host.plugin), (hooks, host.hooks), ("MCP server", host.mcp)) if on]
        state = "wired in: " + ", ".join(parts) if parts else "not wired in"
        if host.present or parts:
            hint = "" if host.wired else f"  (memcli mcp --print-config {host.host}" + \
                ("" if host.host == "cursor" else f", {host.host}-hooks") + ")"
            prompt = HOSTS.get(host.host, {}).get("prompt")
            if not hint and host.hooks and not host.plugin and prompt not in host.events:
                hint = f"  (no {prompt} hook: the prompt's recall; memcli mcp --print-config {host.host}-hooks)"
            out.write(f"{'host':12} {host.host}: {state}{hint}")
        for path, why in zip(host.unreadable, host.why, strict=True):
            out.write(f"{'host':12} {host.host}: {path} could not be read as settings ({why})")
