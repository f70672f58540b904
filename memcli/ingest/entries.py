"""Turns -> new CURRENT entries, all or nothing, duplicates skipped, private spans and secrets out first."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from memcli.dates import event_time
from memcli.ingest.corrections import mark_in_place
from memcli.ingest.privacy import scrub_fields, scrub_many
from memcli.ingest.turns import Turn
from memcli.results import Result
from memcli.store import CURRENT_ID, Store
from memcli.store.folder import new_current, now_iso, read_regular, refresh_token_count
from memcli.store.format import Entry
from memcli.store.identity import Seqs
from memcli.tokens import count_tokens

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
    superseded: int = 0  # entries of CURRENT a new entry corrects, marked superseded_by it (ingest/corrections.py)
    consolidation: dict | None = None  # the automatic consolidation this ingest triggered
    extraction: dict | None = None  # model calls of --extract


def signature(seq: int, turn: Turn, text: str) -> dict[str, str]:
    """A new entry's signature: its seq, the turn's fields, and after its time the day it speaks of
    (``when=``, :func:`memcli.dates.event_time`) when its text dates it relatively ("yesterday")."""
    meta = {"seq": str(seq)}
    for key, value in turn.meta().items():
        meta[key] = value
        event = event_time(text, value) if key == "time" else None
        if event is not None and event.when is not None:
            meta["when"] = event.when
    return meta


def ingest_turns(store: Store, turns: list[Turn], *, source: str, fmt: str, ignored: int = 0,
                 consumed: list[str] = (), input_turns: int | None = None,
                 progress: Callable[[int], None] | None = None) -> IngestResult:
    """Append every turn not ingested before to CURRENT, in one transaction.

    ``consumed`` are fingerprints of input turns that ``turns`` (extracted
    facts) stand for: recorded as ingested so the same input is skipped next time.
    Private spans and secrets are taken out of every text first (:mod:`memcli.ingest.privacy`; a span
    opened in one message of a session runs on into its next ones), and out of every other field
    that is stored (speaker, source, conversation, reference, project) and of ``source``; a turn that
    was all private is recorded as ingested and not stored.
    """
    scrubbed = scrub_many([t.text for t in turns], sessions=[t.conv for t in turns])
    source = _scrub_fields(turns, source)
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
            entry = Entry(signature(seqs.take(), turn, kept.text), kept.text)
            line = entry.render()
            new_lines.append(line)
            new_prints.append(turn.fingerprint)
            tokens_added += count_tokens(line)
            if progress:
                progress(done)

        added, corrected = len(new_lines), 0
        if added:
            corrected = mark_in_place(current.body, new_lines)
            stamp = now_iso()
            current.append_lines(new_lines)
            current.meta["updated_time"] = stamp
            if not isinstance(current.meta.get("update_log"), list):
                current.meta["update_log"] = []
            current.meta["update_log"].append({
                "time": stamp, "op": "ingest", "seq_range": [seqs.first, seqs.last],
                "count": added, "note": source, **({"superseded": corrected} if corrected else {}),
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
        superseded=corrected,
    )


def _scrub_fields(turns: list[Turn], source: str) -> str:
    """Every stored field of the turns (and the source's name, returned) without secrets or private spans."""
    clean = scrub_fields([source, *(getattr(t, key) or "" for t in turns for key in FIELDS)])
    for turn in turns:
        for key in FIELDS:
            if getattr(turn, key):
                setattr(turn, key, clean[getattr(turn, key)] or None)
    return clean.get(source, source) or "input"
