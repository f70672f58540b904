"""The ingest wing: everything between a file (or a note) and new CURRENT entries.

* ``source``: the input's bytes (size limits, special files refused; a large agent session read
  without its tool output);
* ``formats``: which transcript format it is, and its turns (a registry of formats);
* ``sessions`` and ``harness``: agent sessions and chat-app exports, and what an agent's harness
  wrote into a message, taken out;
* ``turns``: what every format parses into (a :class:`~memcli.ingest.turns.Turn` a message) and times;
* ``privacy``: private spans and secrets out of every field before anything is written;
* ``facts``: durable facts extracted by a model (``ingest --extract``);
* ``entries``: turns appended to CURRENT in one transaction, duplicates skipped.

:func:`parse` and :func:`write` are the pipeline ``Memory.ingest`` runs; :func:`note` makes the
one turn of ``remember``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

from memcli.errors import InputError, UsageError
from memcli.ingest.entries import IngestResult, ingest_turns
from memcli.ingest.formats import FORMATS, fingerprint_turns, parse_input
from memcli.ingest.source import JSON_LINES, read_input
from memcli.ingest.turns import Parsed, Turn, parse_time
from memcli.llm.base import CallStats
from memcli.store import Store
from memcli.store.folder import now_iso

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def parse(source: str | Path | IO | list, settings, *, format: str | None = None, sample: str | None = None,
          conv: str | None = None, time: str | None = None, name: str | None = None, keep_harness: bool = False,
          project: str | None = None, warn: Callable[[str], None]) -> tuple[Parsed, str]:
    """The input's turns and its name for messages and entries; nothing is written. ``source``: a path,
    an open file, or a list of turns."""
    if format is not None and format not in FORMATS:
        raise UsageError(f"unknown format {format!r} (choose from {', '.join(FORMATS)})")
    default_time = parse_time(time, "--time", "value") if time else now_iso("minutes")
    if isinstance(source, list):
        name = name or f"<{conv or 'turns'}>"
        fingerprint_turns(source, name, format or "turns")
        parsed = Parsed(format or "turns", source)
    else:
        lines = format in JSON_LINES or str(name or source).lower().endswith((".jsonl", ".ndjson"))
        found = read_input(source, name, settings.ingest_max_bytes, json_lines=lines,
                           record_limit=max(256 * 1024, 8 * settings.ingest_max_entry_chars))
        name = found.name
        if found.dropped:
            warn(f"{name}: larger than ingest.max_bytes; {found.dropped} records over {found.record_limit:,} bytes "
                 "(tool output) left out, the rest read")
        parsed = parse_input(found.data, name, fmt=format, sample=sample, default_time=default_time, conv=conv,
                             max_entry_chars=settings.ingest_max_entry_chars, keep_harness=keep_harness)
    if project:
        for turn in parsed.turns:
            turn.project = project
    return parsed, name


def write(store: Store, parsed: Parsed, name: str, settings, *, facts: Callable | None = None,
          progress: Progress | None = None, warn: Callable[[str], None]) -> IngestResult:
    """The parsed turns appended to CURRENT (one transaction); with ``facts`` (``facts(turns, stats,
    progress)``, a model's extraction) the facts of the turns not ingested before, in their place."""
    if facts is not None:
        known = store.read_fingerprints()
        fresh = [t for t in parsed.turns if t.fingerprint not in known]
        stats = CallStats()
        extracted = facts(fresh, stats, (lambda d, t: progress("extracting facts", d, t)) if progress else None) \
            if fresh else []
        result = ingest_turns(store, extracted, source=name, fmt=parsed.format, ignored=parsed.ignored,
                              consumed=[t.fingerprint for t in fresh], input_turns=len(parsed.turns))
        result.extraction = stats.to_dict()
    else:
        shown = progress if progress and len(parsed.turns) >= settings.ingest_progress_min else None
        total = len(parsed.turns)
        result = ingest_turns(store, parsed.turns, source=name, fmt=parsed.format, ignored=parsed.ignored,
                              progress=(lambda done: shown("ingesting", done, total)) if shown else None)
    if parsed.rejected:
        result.rejected = [{"where": where, "reason": why} for where, why in parsed.rejected]
        where, why = parsed.rejected[0]
        warn(f"{name}: {len(parsed.rejected)} bad records left out, the rest kept (first: {where}: {why})")
    return result


def note(text: str, settings, *, speaker: str | None = None, time: str | None = None, source: str | None = None,
         conv: str | None = None) -> Turn:
    """The one turn of a note (``remember``), checked."""
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        raise InputError(source or "<note>", "the note is empty")
    if len(text) > settings.ingest_max_entry_chars:
        raise InputError(source or "<note>", f"a note of {len(text):,} characters is longer than one memory "
                         f"entry may be ({settings.ingest_max_entry_chars:,}; ingest.max_entry_chars)")
    if "\x00" in text:
        raise InputError(source or "<note>", "the note holds a NUL byte")
    when = parse_time(time, "time", "value") if time else now_iso("minutes")
    turn = Turn(text=text, time=when, speaker=speaker, source=source, conv=conv, time_given=time is not None)
    fingerprint_turns([turn], conv or "note", "note")
    return turn


__all__ = ["IngestResult", "Parsed", "Turn", "ingest_turns", "note", "parse", "write"]
