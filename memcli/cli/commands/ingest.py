"""memcli ingest and memcli remember."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, memory, output
from memcli.cli.output import Output, register
from memcli.ingest.entries import IngestResult
from memcli.ingest.formats import FORMATS


@app.command()
def ingest(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE|-", help="Transcript file, or - for standard input.")],
    fmt: Annotated[Optional[str], typer.Option(
        "--format", "-f", help=f"Force the input format: {', '.join(FORMATS)} (default: detected).")] = None,
    sample: Annotated[Optional[str], typer.Option(
        "--sample", help="LoCoMo sample list: ingest only this sample id (e.g. conv-26).")] = None,
    conv: Annotated[Optional[str], typer.Option(
        "--conv", help="Conversation label stored as conv= on chat/text entries.")] = None,
    when: Annotated[Optional[str], typer.Option(
        "--time", help="Observation time for turns without one (ISO 8601; default now).")] = None,
    extract: Annotated[Optional[bool], typer.Option(
        "--extract/--raw", help="Let the model extract durable facts (default: ingest.extract, off: one entry per turn).")] = None,
    no_auto: Annotated[bool, typer.Option(
        "--no-auto", help="Do not consolidate afterwards, even if CURRENT crossed a threshold.")] = False,
    project: Annotated[Optional[str], typer.Option(
        "--project", help="Tag every entry project=NAME (agent sessions in a store several projects share).")] = None,
    keep_harness: Annotated[bool, typer.Option(
        "--keep-harness", help="Keep what an agent's harness wrote into session messages (instruction files, "
                               "context blocks, slash-command wrappers, citation markers); taken out by default.")
    ] = False,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Append a transcript's turns to CURRENT, one entry per turn.

    Formats: LoCoMo (a conversation object or the locomo10.json sample list),
    chat messages (a JSON list of {role, content} or {speaker, text, time}
    messages, {"messages": [...]}, or JSONL), plain text or Markdown (one
    entry per paragraph), and agent
    sessions: Claude Code, Codex, Gemini CLI, pi, Claude Managed Agents and
    OpenCode, and ChatGPT and Claude.ai exports, without the text their
    harness adds (unless --keep-harness). Turns already ingested are skipped;
    a session with no conversation yet writes nothing and exits 0.
    <private>...</private> spans are dropped and secrets (keys, tokens,
    passwords) stored as \\[redacted:TYPE]. Bad input, or a file in no
    format memcli reads, changes nothing and exits with code 4.

    When CURRENT then reaches consolidate.threshold_tokens (5000) or its oldest
    entry was added more than consolidate.threshold_age seconds ago, it is
    consolidated (see `memcli consolidate`), unless --no-auto or
    consolidate.auto = false: right here when that takes seconds (the
    deterministic path, a small model's default), else in a background
    process (consolidate.background) after this command has committed its
    entries and printed its summary.
    """
    out = output(ctx, json, quiet, verbose)
    mem = memory(ctx, create=True)
    out.debug(f"{file} -> {mem.root}")
    with out.stages() as progress:
        result = mem.ingest(sys.stdin.buffer if file == "-" else file, format=fmt, sample=sample, conv=conv,
                            time=when, extract=extract, consolidate=not no_auto, progress=progress,
                            on_consolidate=lambda reason: out.info(f"memcli: consolidating: {reason}"),
                            name="<stdin>" if file == "-" else None, keep_harness=keep_harness,
                            project=project)
    out.emit(result)


@app.command()
def remember(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(metavar="TEXT|-", help="The note or fact, or - to read it from standard input.")],
    speaker: Annotated[Optional[str], typer.Option("--speaker", help="Who said it (speaker=).")] = None,
    source: Annotated[Optional[str], typer.Option(
        "--source", help="Where it comes from, e.g. an agent's name (source=; default: note).")] = None,
    when: Annotated[Optional[str], typer.Option(
        "--time", help="When it was said or happened (ISO 8601; default now).")] = None,
    conv: Annotated[Optional[str], typer.Option("--conv", help="Conversation label stored as conv=.")] = None,
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Store one note or fact as a new CURRENT entry, as the API's remember and the MCP tool do.

    The same note given twice is kept once. Secrets are stored as
    \\[redacted:TYPE] and <private>...</private> spans dropped, as by ingest. An
    empty note, or one longer than ingest.max_entry_chars, changes nothing
    and exits with code 4. `memcli log` lists it as a "remember" commit.
    """
    out = output(ctx, json, quiet, verbose)
    mem = memory(ctx, create=True)
    note = sys.stdin.read() if text == "-" else text
    out.emit(mem.remember(note, speaker=speaker, time=when, source=source, conv=conv))


@register(IngestResult)
def _render(result: IngestResult, out: Output) -> None:
    if out.quiet:  # a report of what was written: -q says nothing, the exit code does (--json has it all)
        return
    if result.format == "note":
        out.write(f"remembered as entry {result.first_seq} ({result.tokens_added} tokens)" if result.added else
                  "already remembered; nothing written")
        out.write(f"CURRENT: {result.current_entries} entries, {result.current_tokens} tokens ({result.store})")
        return
    if not result.turns:
        out.write(f"{result.source}: no conversation in it yet ({result.ignored} records of other kinds); "
                  "nothing written")
        return
    if result.added:
        out.write(f"{result.source}: added {result.added} entries (seq {result.first_seq}-"
                  f"{result.last_seq}, {result.tokens_added} tokens) from {result.turns} {result.format} turns")
    else:
        out.write(f"{result.source}: nothing new; all {result.turns} turns were ingested before")
    if result.skipped and result.added:
        out.write(f"skipped {result.skipped} turns already in memory")
    if result.ignored:
        out.write(f"ignored {result.ignored} system/tool messages")
    if result.redacted or result.private:
        out.write("kept out of memory: " + ", ".join(
            part for part in (f"{result.redacted} secrets (stored as [redacted:TYPE])" if result.redacted else "",
                              f"{result.private} <private> spans" if result.private else "") if part))
    if result.superseded:
        out.write(f"marked {result.superseded} earlier entries superseded by a correction that denies what they say")
    if result.rejected:
        out.write(f"left out {len(result.rejected)} bad records: "
                  + "; ".join(f"{r['where']}: {r['reason']}" for r in result.rejected[:5])
                  + (" ..." if len(result.rejected) > 5 else ""))
    out.write(f"CURRENT: {result.current_entries} entries, {result.current_tokens} tokens ({result.store})")
    done = result.consolidation
    if done and done.get("background"):
        out.write(f"consolidating in the background ({done['reason']}): "
                  + ("a consolidation was already running" if done.get("already_running") else
                     f"process {done['pid']}, log {done['log']}")
                  + "; `memcli status` shows it, `memcli consolidate --wait` waits for it")
    elif done:
        out.write(f"consolidated {done['entries_consolidated']} entries ({done['reason']}); "
                  f"library: {len(done['documents'])} documents")
