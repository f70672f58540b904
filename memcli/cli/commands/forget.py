"""memcli forget."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import ClockOpt, JsonOpt, QuietOpt, SinceOpt, UntilOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.errors import EXIT_NO_MATCH
from memcli.forget import Forgotten, seq_ranges


@app.command()
def forget(
    ctx: typer.Context,
    targets: Annotated[Optional[list[str]], typer.Argument(
        metavar="[CITATION|SEQ]...", help="Citations (doc:12-14, CURRENT:30) and seqs (17, 17-20).")] = None,
    conv: Annotated[Optional[str], typer.Option(
        "--conv", "--session", help="Only entries of this conversation or session (its conv=).")] = None,
    since: SinceOpt = None, until: UntilOpt = None, clock: ClockOpt = None,
    grep: Annotated[Optional[str], typer.Option(
        "--grep", "-e", help="Only entries whose text matches this regular expression.")] = None,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="--grep ignores case.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be forgotten; change nothing.")] = False,
    everything: Annotated[bool, typer.Option(
        "--all", help="Allow the selection to take every entry (alone: forget the whole memory).")] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Take entries out of memory for good.

    Choose them by citation or seq (these add up), and narrow with --conv
    (a conversation or agent session), --since/--until (when the entries
    were said, or with --clock event the day they speak of; an entry with no
    time is in no stretch) and --grep (every one given must hold). The entries leave the documents and CURRENT in one
    transaction (a topic document left empty is removed); then the search
    index, the vectors, every KV block made from a changed document and any
    chat session that holds their text are cleaned. The update log records
    which seqs went, not their text; ingesting the same file again does not
    bring them back. Exit 1 when nothing matches.

    A selection that would take every entry in memory, and a --grep pattern
    that matches the empty string ("", "(?i)", "x*"), are refused (exit 2)
    unless --all is given. A citation is a place, and places move: after a
    --dry-run, a forget with the same citation is refused when the line now
    holds another entry than the dry run showed.
    """
    out = output(ctx, json, quiet, verbose)
    result = memory(ctx).forget(targets or [], conv=conv, since=since, until=until, clock=clock, grep=grep,
                                ignore_case=ignore_case, dry_run=dry_run, everything=everything)
    for warning in result.warnings:
        out.warn(warning)
    out.emit(result)
    if not result.count:
        raise typer.Exit(EXIT_NO_MATCH)


@register(Forgotten)
def _render(result: Forgotten, out: Output) -> None:
    if result.dry_run:
        for e in result.entries:
            out.write(f"{e['doc']}:{e['line']}  seq={e['seq']} {e['time'] or ''} {e['speaker'] or ''}: {e['text']}")
        if not out.quiet:
            out.write(f"would forget {_n(result.count, 'entry', 'entries')} from "
                      f"{_n(len(result.documents_changed), 'document')}" if result.count else "nothing matches")
        return
    if out.quiet:
        return
    if not result.count:
        out.write("nothing matches; nothing was forgotten")
        return
    out.write(f"forgot {_n(result.count, 'entry', 'entries')} (seq {', '.join(seq_ranges(result.seqs))}) from "
              f"{_n(len(result.documents_changed) + len(result.documents_removed), 'document')}"
              + (f"; removed the emptied {', '.join(result.documents_removed)}" if result.documents_removed else ""))
    if result.caches:
        out.write("caches cleaned: " + ", ".join(f"{k} {v}" for k, v in result.caches.items()))


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"
