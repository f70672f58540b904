"""Ingest: turns -> new CURRENT entries, all or nothing, duplicates skipped."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from memcli.errors import InputError
from memcli.privacy import scrub_fields, scrub_many
from memcli.results import Result
from memcli.store import CURRENT_ID, Store
from memcli.store.format import Entry
from memcli.store.identity import Seqs
from memcli.store.store import new_current, now_iso, read_regular, refresh_token_count
from memcli.tokens import count_tokens
from memcli.turns import Turn

FIELDS = ("speaker", "source", "conv", "ref", "project")  # a turn's stored fields beside its text and time


@dataclass
class IngestResult(Result):
    source: str
    format: str
    turns: int
    added: int
    skipped: int
    ignored: int
    first_seq: int | None
    last_seq: int | None
    tokens_added: int
    current_tokens: int
    current_entries: int
    store: str
    warnings: list[str] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)  # {where, reason} of records left out as bad input
    redacted: int = 0  # secrets replaced by a [redacted:TYPE] placeholder before anything was written
    private: int = 0  # <private> spans dropped
    consolidation: dict | None = None  # the automatic consolidation this ingest triggered
    extraction: dict | None = None  # model calls of --extract


def ingest_turns(store: Store, turns: list[Turn], *, source: str, fmt: str, ignored: int = 0,
                 consumed: list[str] = (), input_turns: int | None = None,
                 progress: Callable[[int], None] | None = None) -> IngestResult:
    """Append every turn not ingested before to CURRENT, in one transaction.

    ``consumed`` are fingerprints of input turns that ``turns`` (extracted
    facts) stand for: recorded as ingested so the same input is skipped next time.
    Private spans and secrets are taken out of every text first (:mod:`memcli.privacy`; a span
    opened in one message of a session runs on into its next ones), and out of every other field
    that is stored (speaker, source, conversation, reference, project) and of ``source``; a turn that
    was all private is recorded as ingested and not stored.
    """
    scrubbed = scrub_many([t.text for t in turns], sessions=[t.conv for t in turns])
    clean = scrub_fields([source, *(getattr(t, key) or "" for t in turns for key in FIELDS)])
    source = clean.get(source, source) or "input"
    for turn in turns:
        for key in FIELDS:
            if getattr(turn, key):
                setattr(turn, key, clean[getattr(turn, key)] or None)
    with store.writing() as txn:
        loaded = store.load(CURRENT_ID, strict=True) if store.current_path.exists() else None
        current = loaded.doc if loaded else new_current()
        known = store.read_fingerprints()
        state = store.read_state()
        seqs = Seqs(store.root, state, [e.seq for _, e in current.entries() if e.seq is not None])

        new_lines: list[str] = []
        new_prints: list[str] = []
        tokens_added = 0
        redacted = private = 0
        for done, (turn, kept) in enumerate(zip(turns, scrubbed, strict=True), 1):
            if turn.fingerprint in known or not known.isdisjoint(turn.aliases):
                if progress:
                    progress(done)
                continue
            known.add(turn.fingerprint)
            redacted, private = redacted + kept.secrets, private + kept.private
            if not kept.text.strip():
                new_prints.append(turn.fingerprint)
                continue
            entry = Entry({"seq": str(seqs.take()), **turn.meta()}, kept.text)
            line = entry.render()
            new_lines.append(line)
            new_prints.append(turn.fingerprint)
            tokens_added += count_tokens(line)
            if progress:
                progress(done)

        added = len(new_lines)
        if added:
            stamp = now_iso()
            current.append_lines(new_lines)
            current.meta["updated_time"] = stamp
            if not isinstance(current.meta.get("update_log"), list):
                current.meta["update_log"] = []
            current.meta["update_log"].append({
                "time": stamp, "op": "ingest", "seq_range": [seqs.first, seqs.last],
                "count": added, "note": source,
            })
            refresh_token_count(current)
            txn.write("CURRENT.md", current.render())
            txn.write("state.json", json.dumps(seqs.save()) + "\n")
        new_prints += [p for p in consumed if p not in known]
        if new_prints:
            exists = store.ingested_path.exists()
            previous = read_regular(store.ingested_path).decode("utf-8", "replace") if exists else ""
            txn.write("ingested.txt", previous + "".join(p + "\n" for p in new_prints))
        current_tokens = current.meta.get("token_count")
        if not isinstance(current_tokens, int):
            current_tokens = refresh_token_count(current)
        entries = sum(1 for _ in current.entries())

    # with extraction, the input's turns are what was consumed, the facts what was added
    total = len(turns) if input_turns is None else input_turns
    skipped = len(turns) - added if input_turns is None else input_turns - len(consumed)
    return IngestResult(
        source=source, format=fmt, turns=total, added=added,
        skipped=skipped, ignored=ignored,
        first_seq=seqs.first, last_seq=seqs.last,
        tokens_added=tokens_added, current_tokens=current_tokens,
        current_entries=entries, store=str(store.root), redacted=redacted, private=private,
    )


def forget_entries(store: Store, *, conv: str, texts: list[str]) -> int:
    """Remove from CURRENT the newest entry of ``conv`` with each of ``texts`` (a user's explicit /forget).

    Only entries still in CURRENT can be forgotten this way; consolidated
    ones are left alone. One transaction; returns how many were removed.
    """
    if not texts or not store.current_path.exists():
        return 0
    with store.writing() as txn:
        current = store.load(CURRENT_ID, strict=True).doc
        wanted = list(texts)
        drop: set[int] = set()
        for lineno, entry in reversed(list(current.entries())):
            if entry.meta.get("conv") == conv and entry.text in wanted:
                wanted.remove(entry.text)
                drop.add(lineno - current.body_start)
            if not wanted:
                break
        if not drop:
            return 0
        current.body = [line for i, line in enumerate(current.body) if i not in drop]
        stamp = now_iso()
        current.meta["updated_time"] = stamp
        if not isinstance(current.meta.get("update_log"), list):
            current.meta["update_log"] = []
        current.meta["update_log"].append({"time": stamp, "op": "forget", "count": len(drop), "note": conv})
        refresh_token_count(current)
        txn.write("CURRENT.md", current.render())
    return len(drop)


MAX_INPUT_BYTES = 64 * 1024 * 1024  # the default of ingest.max_bytes
JSON_LINES = ("claude-code", "codex", "jsonl")  # formats of one record a line, read record by record when large


@dataclass
class Source:
    data: bytes
    name: str
    dropped: int = 0  # records of a large JSON-lines file left out for their size (tool output)
    record_limit: int = 0


def read_input(source: str | Path | IO[bytes] | IO[str], name: str | None = None,
               max_bytes: int = MAX_INPUT_BYTES, *, json_lines: bool = False,
               record_limit: int = 256 * 1024) -> Source:
    """The bytes of an input and its name for messages: a path to a regular file, or an open file (named
    ``name``, else its own name); at most ``max_bytes``. A FIFO, device or socket path is refused, never
    waited on. With ``json_lines`` (an agent session: one record a line) a file over
    ``max_bytes`` is read record by record: a record over ``record_limit`` bytes (a tool's output;
    no message memcli keeps is that long) is left out and counted, and the rest must fit."""
    too_big = f"larger than {max_bytes:,} bytes (ingest.max_bytes)"
    if hasattr(source, "read"):
        name = name or str(getattr(source, "name", "<input>"))
        data = source.read(max_bytes + 1)
        data = data.encode("utf-8") if isinstance(data, str) else data
        if len(data) > max_bytes:
            raise InputError(name, too_big)
        return Source(data, name)
    name = str(source)
    try:
        os.fsencode(source)
        info = os.stat(source)
    except UnicodeError:
        raise InputError(name.encode("utf-8", "replace").decode("utf-8"), "not a usable file name") from None
    except FileNotFoundError:
        raise InputError(name, "no such file") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(name, "is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(name, "not a regular file (a FIFO, device or socket); pass a file, or - for standard input")
    if info.st_size > max_bytes and not json_lines:
        raise InputError(name, too_big)
    try:
        with open(source, "rb") as handle:
            if info.st_size <= max_bytes:
                data = handle.read(max_bytes + 1)
                if len(data) > max_bytes:
                    raise InputError(name, too_big)
                return Source(data, name)
            kept, size, dropped = [], 0, 0
            for record in handle:  # lines; a record over the limit is skipped without being kept whole
                if len(record) > record_limit:
                    dropped += 1
                    continue
                size += len(record)
                if size > max_bytes:
                    raise InputError(name, f"{too_big}, even without its {dropped} records over "
                                           f"{record_limit:,} bytes")
                kept.append(record)
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror}") from None
    return Source(b"".join(kept), name, dropped, record_limit)
