"""memcli sync | log | undo | merge-driver: a store shared through git."""

from __future__ import annotations

import json as _json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.errors import InputError
from memcli.share.git import History, ShareResult, Undone
from memcli.share.merge import merge_file
from memcli.share.sync import Synced


@app.command()
def sync(
    ctx: typer.Context,
    remote: Annotated[Optional[str], typer.Option(
        "--remote", help="The git remote (default: the branch's upstream, or the only remote).")] = None,
    no_push: Annotated[bool, typer.Option("--no-push", help="Commit and merge; do not push.")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Commit the store's changes, merge the remote's entry by entry, push.

    For a store shared with `memcli init --git`. git merges the store's files
    with `memcli merge-driver`; entries both clones filed are then kept once
    and entries a clone forgot are taken out, of the files and of this
    clone's caches (search index, vectors, KV blocks). Refuses while a
    consolidation runs. Exit 1 when git fails or a file outside the store
    conflicts (the merge is then aborted and the store left as it was).
    """
    out = output(ctx, json, quiet, verbose)
    out.emit(memory(ctx).sync(remote=remote, push=not no_push))


@register(Synced)
def _render_sync(result: Synced, out: Output) -> None:
    parts = [f"merged {result.merged} commit{'s' if result.merged != 1 else ''} from {result.remote}/{result.branch}"]
    if result.committed:
        parts.append(f"committed local changes ({result.committed[:12]})")
    if result.duplicates or result.forgotten:
        parts.append(f"{result.duplicates} entries held twice kept once, {result.forgotten} forgotten entries removed")
    if result.settled:
        parts.append(f"settled {len(result.settled)} files")
    if result.leaving:
        parts.append(f"{len(result.leaving)} entries another clone forgot taken from this clone's caches")
    parts.append("pushed" if result.pushed else "not pushed")
    out.write("; ".join(parts) + f"; now at {result.head[:12]}")
    for warning in result.warnings:
        out.warn(warning)
    for path in result.ignored:
        out.warn(f"{path} is tracked in git (someone added it with -f); it is another clone's forget note, which "
                 "memcli never reads: ignored (`git rm --cached` takes it out of the history's next commit)")


@app.command()
def log(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("-n", "--limit", min=1, help="How many commits to list.")] = 20,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """List the store's history in git, newest first: what each change did.

    memcli's own commits (ingest, remember, consolidate, forget, undo, sync)
    carry their operation; other commits touching the store are listed too.
    """
    out = output(ctx, json, quiet, verbose)
    out.emit(memory(ctx).log(limit))


@register(History)
def _render_log(result: History, out: Output) -> None:
    out.table(None, ["commit", "time", "op", "what"],
              [[c.commit[:12], c.time, c.op or "-", c.message] for c in result.changes])


@app.command()
def undo(
    ctx: typer.Context,
    any_clone: Annotated[bool, typer.Option(
        "--any", help="Take back the newest change whichever clone made it (a teammate's too).")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Revert the last change this clone made to a shared store, as a new commit.

    Successive undos walk back through this clone's changes; a teammate's
    change that arrived through sync is never taken back unless --any says
    so (without it, when this clone made none, the newest change's author is
    named, exit 2). History is never rewritten. The revert must give back
    exactly the entries the store had before that change, or nothing is
    done. A forget cannot be undone. Exit 1 when the change cannot be
    reverted cleanly.
    """
    out = output(ctx, json, quiet, verbose)
    out.emit(memory(ctx).undo(any_clone=any_clone))


@register(Undone)
def _render_undo(result: Undone, out: Output) -> None:
    out.write(f"undid {result.reverted[:12]} ({result.message}) in {result.commit[:12]}"
              + (f"; {len(result.entries_removed)} entries it added are gone" if result.entries_removed else ""))


@register(ShareResult)
def _render_share(result: ShareResult, out: Output) -> None:
    made = "a new repository at " if result.created_repository else "the repository "
    out.write(f"shared {result.store} through {made}{result.repository}"
              + (f" ({result.commit[:12]})" if result.commit else ""))


@app.command("merge-driver")
def merge_driver(
    ctx: typer.Context,
    base: Annotated[Path, typer.Argument(help="The common ancestor's version (git's %O).")],
    ours: Annotated[Path, typer.Argument(help="Our version, replaced by the merge (%A).")],
    theirs: Annotated[Path, typer.Argument(help="Their version (%B).")],
    path: Annotated[str, typer.Argument(help="The file's path in the repository (%P).")] = "",
    json: JsonOpt = False, quiet: QuietOpt = False,
) -> None:
    """Merge one of a store's files entry by entry (git runs this; see .gitattributes).

    Writes the merge over OURS and exits 0; an entry both sides changed is
    kept twice, theirs marked `merge=conflict`, and said on stderr. Exit 4
    when a version cannot be read (git then leaves the file in conflict).
    """
    texts = []
    for name in (base, ours, theirs):
        try:
            texts.append(name.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(name), f"cannot read: {exc}") from None
    out = output(ctx, json, quiet)
    merged, conflicts = merge_file(path or str(ours), *texts)
    ours.write_bytes(merged.encode("utf-8"))
    if out.json:
        print(_json.dumps({"path": path or str(ours), "conflicts": conflicts}))
    if conflicts and not out.quiet:
        print(f"memcli merge-driver: {path}: {conflicts} entries changed on both sides, kept twice "
              "(merge=conflict)", file=sys.stderr)
