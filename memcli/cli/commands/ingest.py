"""memcli ingest."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from memcli.cli.app import app
from memcli.cli.common import JsonOpt, QuietOpt, VerboseOpt, load_model, open_store, output, settings
from memcli.cli.output import Output, register
from memcli.errors import InputError, UsageError
from memcli.ingest import IngestResult, ingest_turns
from memcli.store.store import now_iso
from memcli.transcripts import FORMATS, parse_input, parse_time


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
    json: JsonOpt = False, quiet: QuietOpt = False, verbose: VerboseOpt = False,
) -> None:
    """Append a transcript's turns to CURRENT, one entry per turn.

    Formats: LoCoMo (a conversation object or the locomo10.json sample list),
    chat messages (a JSON list of {role, content}, {"messages": [...]}, or
    JSONL), and plain text or Markdown (one entry per paragraph). Turns already
    ingested are skipped. Bad input changes nothing and exits with code 4.

    When CURRENT then reaches consolidate.threshold_tokens (5000) or its oldest
    entry was added more than consolidate.threshold_age seconds ago, it is
    consolidated right away (see `memcli consolidate`), unless --no-auto or
    consolidate.auto = false.
    """
    out = output(ctx, json, quiet, verbose)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    raw, source = _read_input(file)
    default_time = parse_time(when, "--time", "value") if when else now_iso("minutes")
    parsed = parse_input(raw, source, fmt=fmt, sample=sample, default_time=default_time, conv=conv)
    store = open_store(ctx, create=True)
    cfg = settings(ctx, store)
    out.debug(f"{source}: {parsed.format}, {len(parsed.turns)} turns -> {store.root}")
    if extract if extract is not None else cfg.ingest_extract:
        result = _ingest_extracted(store, parsed, source, cfg, out)
    else:
        with out.progress("ingesting", len(parsed.turns),
                          enabled=len(parsed.turns) >= cfg.ingest_progress_min) as advance:
            result = ingest_turns(store, parsed.turns, source=source, fmt=parsed.format,
                                  ignored=parsed.ignored, progress=advance)
    from memcli.consolidate.run import consolidate, due

    reason = None if no_auto or not cfg.consolidate_auto else due(store, cfg)
    if reason:
        out.info(f"memcli: consolidating: {reason}")
        model = load_model(cfg, out) if cfg.consolidate_llm else None
        with out.stages() as stages:
            result.consolidation = consolidate(store, cfg, model=model, progress=stages, reason=reason).to_dict()
    out.emit(result)


def _ingest_extracted(store, parsed, source: str, cfg, out: Output) -> IngestResult:
    """Facts from the turns not ingested before, written in place of the raw turns."""
    from memcli.extract import extract_facts
    from memcli.llm.base import CallStats

    known = store.read_fingerprints()
    fresh = [t for t in parsed.turns if t.fingerprint not in known]
    facts = []
    stats = CallStats()
    if fresh:
        model = load_model(cfg, out)
        with out.stages() as stages:
            facts = extract_facts(fresh, model=model, stats=stats,
                                  progress=lambda d, t: stages("extracting facts", d, t))
    result = ingest_turns(store, facts, source=source, fmt=parsed.format, ignored=parsed.ignored,
                          consumed=[t.fingerprint for t in fresh], input_turns=len(parsed.turns))
    result.extraction = stats.to_dict()
    return result


def _read_input(file: str) -> tuple[bytes, str]:
    if file == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    path = Path(file)
    try:
        return path.read_bytes(), file
    except FileNotFoundError:
        raise InputError(file, "no such file") from None
    except IsADirectoryError:
        raise InputError(file, "is a directory") from None
    except OSError as exc:
        raise InputError(file, f"cannot read: {exc.strerror}") from None


@register(IngestResult)
def _render(result: IngestResult, out: Output) -> None:
    if result.added:
        out.write(f"{result.source}: added {result.added} entries (seq {result.first_seq}-"
                  f"{result.last_seq}, {result.tokens_added} tokens) from {result.turns} {result.format} turns")
    else:
        out.write(f"{result.source}: nothing new; all {result.turns} turns were ingested before")
    if result.skipped and result.added:
        out.write(f"skipped {result.skipped} turns already in memory")
    if result.ignored:
        out.write(f"ignored {result.ignored} system/tool messages")
    out.write(f"CURRENT: {result.current_entries} entries, {result.current_tokens} tokens ({result.store})")
    if result.consolidation:
        done = result.consolidation
        out.write(f"consolidated {done['entries_consolidated']} entries ({done['reason']}); "
                  f"library: {len(done['documents'])} documents")
