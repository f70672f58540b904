"""The agent sessions memory holds, kept in the search index (:class:`memcli.index.LibraryIndex`) so a session
start lists them without reading the library: for each document and each session (``conv``) of an agent's
(one with a line of the assistant's, ``source=AI``), when its lines were said, how many, the line of its first
request (the user's first line that is not a bare slash command: ``/clear``, ``/init``) and of its last
assistant message. A session whose lines consolidation spread over several documents is summed over them."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from memcli.store.format import Entry

SCHEMA = """
CREATE TABLE IF NOT EXISTS doc_sessions(doc TEXT, conv TEXT, project TEXT, first TEXT, last TEXT, turns INTEGER,
    request_time TEXT, request_seq INTEGER, request_line INTEGER, outcome_time TEXT, outcome_seq INTEGER,
    outcome_line INTEGER);
CREATE INDEX IF NOT EXISTS doc_sessions_doc ON doc_sessions(doc);
CREATE INDEX IF NOT EXISTS doc_sessions_project ON doc_sessions(project, last);
"""
TABLE = "doc_sessions"
COMMAND = re.compile(r"/[\w:.-]+(?:\s+\S+){0,3}")  # a bare slash command and its arguments, not a request


@dataclass(frozen=True)
class SessionRow:
    conv: str
    first: str  # when its first line was said
    last: str  # and its last
    turns: int
    request: tuple[str, int] | None  # (document, line) of the first request
    outcome: tuple[str, int] | None  # of the last assistant message


def _assistant(entry: Entry) -> bool:
    return entry.meta.get("source") == "AI"


def _request(entry: Entry) -> bool:
    return not _assistant(entry) and not COMMAND.fullmatch(" ".join(entry.text.split()))


def _at(pick: tuple[int, Entry] | None) -> tuple:
    """(time, seq, line) of a picked line, or three nulls."""
    return (pick[1].time, pick[1].seq or 0, pick[0]) if pick else (None, None, None)


def rows(doc_id: str, entries: Iterable[tuple[int, Entry]]) -> list[tuple]:
    """The table's rows for one document's ``(line, entry)`` pairs."""
    by_conv: dict[str, list[tuple[int, Entry]]] = {}
    for line, entry in entries:
        if entry.meta.get("conv") and entry.time and not entry.meta.get("superseded_by"):  # lines the readers read
            by_conv.setdefault(entry.meta["conv"], []).append((line, entry))
    out = []
    for conv, said in by_conv.items():
        if not any(_assistant(e) for _, e in said):
            continue  # a conversation between people, not an agent's session
        said.sort(key=lambda pair: (pair[1].time, pair[1].seq or 0))
        request = next(((n, e) for n, e in said if _request(e)), None)
        outcome = next(((n, e) for n, e in reversed(said) if _assistant(e)), None)
        project = next((e.meta["project"] for _, e in said if e.meta.get("project")), "")
        out.append((doc_id, conv, project, said[0][1].time, said[-1][1].time, len(said), *_at(request), *_at(outcome)))
    return out


def add(db: sqlite3.Connection, doc_id: str, entries: Iterable[tuple[int, Entry]]) -> None:
    db.executemany(f"INSERT INTO {TABLE} VALUES(?,?,?,?,?,?,?,?,?,?,?,?)", rows(doc_id, entries))


def newest(db: sqlite3.Connection, project: str | None, limit: int) -> list[SessionRow]:
    """The ``limit`` sessions last said, newest first (``project``: only its sessions; None: every one)."""
    where, args = ("WHERE project = ?", (project,)) if project else ("", ())
    found = db.execute(f"SELECT conv, MIN(first), MAX(last), SUM(turns) FROM {TABLE} {where} GROUP BY conv "
                       "ORDER BY MAX(last) DESC, conv LIMIT ?", (*args, limit)).fetchall()
    out = []
    for conv, first, last, turns in found:
        request = db.execute(f"SELECT doc, request_line FROM {TABLE} WHERE conv = ? AND request_line IS NOT NULL "
                             "ORDER BY request_time, request_seq LIMIT 1", (conv,)).fetchone()
        outcome = db.execute(f"SELECT doc, outcome_line FROM {TABLE} WHERE conv = ? AND outcome_line IS NOT NULL "
                             "ORDER BY outcome_time DESC, outcome_seq DESC LIMIT 1", (conv,)).fetchone()
        out.append(SessionRow(conv, first, last, turns, tuple(request) if request else None,
                              tuple(outcome) if outcome else None))
    return out


def count(db: sqlite3.Connection, project: str | None) -> int:
    where, args = ("WHERE project = ?", (project,)) if project else ("", ())
    return db.execute(f"SELECT COUNT(DISTINCT conv) FROM {TABLE} {where}", args).fetchone()[0]
