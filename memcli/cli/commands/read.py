"""memcli docs | read | grep | search: the read-side tools."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import ClockOpt, DocOpt, JsonOpt, QuietOpt, SinceOpt, UntilOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.errors import EXIT_NO_MATCH
from memcli.read_tools import DocsResult, GrepResult, ReadResult, SearchResult, parse_range


@app.command()
def docs(
    ctx: typer.Context,
    offset: Annotated[int, typer.Option("--offset", help="Skip this many documents.")] = 0,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Show at most this many.")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """List the catalog: id, summary, tokens and last update of every document (CURRENT last)."""
    out = output(ctx, json, quiet, verbose)
    result = memory(ctx).docs(offset, limit)
    for problem in result.refused:
        out.warn(f"not read: {problem}")
    out.emit(result)


@register(DocsResult)
def _render_docs(result: DocsResult, out: Output) -> None:
    rows = [[d.id, str(d.token_count), str(d.entries), d.updated_time or "", d.summary
             + (f"  [unreadable front matter: {d.error}]" if d.error else "")] for d in result.docs]
    out.table(f"{result.total} documents", ["id", "tokens", "entries", "updated", "summary"], rows)


@app.command()
def read(
    ctx: typer.Context,
    doc: Annotated[str, typer.Argument(metavar="DOC", help="Document id, or CURRENT.")],
    lines: Annotated[Optional[str], typer.Option("--lines", "-l", metavar="A-B",
                                                 help="Only these file lines (A-B, A- or A).")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Print a document with file line numbers, so a line range can be cited as DOC:A-B."""
    out = output(ctx, json, quiet, verbose)
    start, end = parse_range(lines) if lines else (1, None)
    result = memory(ctx).read(doc, start, end)
    if result.warning:
        out.warn(result.warning)
    if result.moved_from:
        out.info(f"{result.moved_from} is now {result.doc} (renamed or merged; its line numbers may have moved)")
    out.emit(result)


@register(ReadResult)
def _render_read(result: ReadResult, out: Output) -> None:
    width = len(str(result.end_line))
    for line in result.lines:
        out.write(f"{line.line:>{width}}  {line.text}")


@app.command()
def grep(
    ctx: typer.Context,
    pattern: Annotated[str, typer.Argument(help="Python regular expression.")],
    doc: DocOpt = None,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Case-insensitive.")] = False,
    context: Annotated[int, typer.Option("--context", "-C", metavar="N", help="Lines of context.")] = 0,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Stop after N matching lines "
                                                 "(default: grep.limit, 100).")] = None,
    since: SinceOpt = None, until: UntilOpt = None, clock: ClockOpt = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Search document bodies and CURRENT with a regular expression; exit 1 when nothing matches.

    Output is DOC:LINE: TEXT (context lines as DOC-LINE- TEXT), like grep.
    --since/--until keep to entries of that stretch of time: when they were
    said, or with --clock event the day they speak of ("yesterday" in a line
    said on 8 May is 7 May).
    """
    out = output(ctx, json, quiet, verbose)
    result = memory(ctx).grep(pattern, doc=doc, ignore_case=ignore_case, context=context, limit=limit,
                              since=since, until=until, clock=clock)
    out.emit(result)
    if result.truncated:
        out.info(f"memcli: stopped after {len(result.matches)} matches (--limit)")
    if not result.matches:
        raise typer.Exit(EXIT_NO_MATCH)


@register(GrepResult)
def _render_grep(result: GrepResult, out: Output) -> None:
    for match in result.matches:
        if match.before or match.after:
            out.write("--")
        for line in match.before:
            out.write(f"{match.doc}-{line.line}- {line.text}")
        out.write(f"{match.doc}:{match.line}: {match.text}")
        for line in match.after:
            out.write(f"{match.doc}-{line.line}- {line.text}")


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to look for (BM25 ranking).")],
    k: Annotated[Optional[int], typer.Option("-k", help="Number of hits (default: search.k, 10).")] = None,
    doc: DocOpt = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Rank heading sections of the library and CURRENT by BM25; exit 1 when nothing matches."""
    out = output(ctx, json, quiet, verbose)
    result = memory(ctx).search(query, k=k, doc=doc)
    out.emit(result)
    if not result.hits:
        raise typer.Exit(EXIT_NO_MATCH)


@register(SearchResult)
def _render_search(result: SearchResult, out: Output) -> None:
    if not out.stdout_tty:
        for hit in result.hits:
            out.write(f"{hit.doc}:{hit.start_line}-{hit.end_line}\t{hit.score:.3f}\t{hit.heading}\t{hit.snippet}")
        return
    out.table(None, ["doc:lines", "score", "heading", "snippet"],
              [[f"{h.doc}:{h.start_line}-{h.end_line}", f"{h.score:.2f}", h.heading, h.snippet]
               for h in result.hits])
