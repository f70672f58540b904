"""Former document ids: where a citation of a renamed or merged document now reads.

A document's file name follows its title (``memcli consolidate`` renames a document whose first
phrase changed, keeping the id's six-character suffix), and a small document merged into another
is gone. Whatever cited it before (an answer's ``doc:line``, a note, a teammate's message) still
resolves: ``aliases.txt`` in the store lists each former id and the id it went to, one
``old>new`` a line, written in the same transaction as the rename or merge. It only grows; a
shared store merges it as a set of lines (git's merge driver, like ``ingested.txt``). A document
that exists is always read by its own id first; the chain of a former id is followed to the first
id that exists (a document renamed twice, then merged).
"""

from __future__ import annotations

import re

from memcli.store.atomic import DOC_ID, Transaction

ALIASES = "aliases.txt"
_LINE = re.compile(rf"({DOC_ID})>({DOC_ID})")
MOST_HOPS = 64  # a chain followed at most this far (the file is a person's to edit: it may loop)


def read(store) -> dict[str, str]:
    """Every former id and the id it went to (the last line wins for an id named twice)."""
    try:
        text = store.read_file(store.root / ALIASES).decode("utf-8", "replace")
    except FileNotFoundError:
        return {}
    out: dict[str, str] = {}
    for line in text.split():
        found = _LINE.fullmatch(line)
        if found and found[1] != found[2]:
            out[found[1]] = found[2]
    return out


def resolve(store, doc_id: str, exists) -> str | None:
    """The id that ``doc_id`` reads now: itself when ``exists(doc_id)``, else the first existing id its
    chain of aliases reaches; None when it reaches none."""
    if exists(doc_id):
        return doc_id
    known = read(store)
    seen = {doc_id}
    at = doc_id
    for _ in range(MOST_HOPS):
        at = known.get(at)
        if at is None or at in seen:
            return None
        if exists(at):
            return at
        seen.add(at)
    return None


def record(store, txn: Transaction, moved: dict[str, str]) -> None:
    """Add ``moved`` (former id: the id it went to) to the store's aliases, in ``txn``."""
    if not moved:
        return
    try:
        previous = store.read_file(store.root / ALIASES).decode("utf-8", "replace")
    except FileNotFoundError:
        previous = ""
    if previous and not previous.endswith("\n"):
        previous += "\n"
    txn.write(ALIASES, previous + "".join(f"{old}>{new}\n" for old, new in sorted(moved.items())))
