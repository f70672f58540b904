"""After a merge: each entry once in the whole store, and nothing a clone forgot.

git merges file by file, so when both clones consolidated the same CURRENT entries into
different documents, or one filed an entry the other forgot, every file merges cleanly and the
store still holds the entry twice, or holds it again. :func:`reconcile` finds those across the
whole store and keeps one copy: a document's over CURRENT's, a superseded copy over a live one
(the supersession is the newer fact), then the document that sorts first. Copies whose texts
differ are not duplicates but an edit conflict and are all kept. Entries whose seq is in
``forgotten.txt`` (forget's tombstones, seqs only, merged as a set) go, wherever they are. A
document left with no entry is removed. The result is the same whichever clone runs it, so two
clones that sync converge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.forget_caches import tombstones
from memcli.share.merge import CONFLICT_KEY
from memcli.store import CURRENT_ID, Store
from memcli.store.atomic import Transaction
from memcli.store.folder import refresh_token_count
from memcli.store.format import parse_entry


@dataclass
class Reconciled:
    duplicates: int = 0  # copies removed
    forgotten: int = 0  # entries removed because a clone forgot them
    removed_docs: list[str] = field(default_factory=list)
    changed_docs: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.duplicates or self.forgotten or self.removed_docs)


def held_twice(store: Store) -> tuple[int, int]:
    """(entries the store holds more than once with the same text, entries marked ``merge=conflict``):
    what ``memcli doctor`` reports."""
    with store.reading():
        loaded = {doc_id: store.load(doc_id) for doc_id in store.all_ids()}
    copies, conflicts = _copies(loaded)
    return sum(1 for found in copies.values() if len(found) > 1 and len(_texts(loaded, found)) == 1), conflicts


def _copies(loaded: dict) -> tuple[dict[int, list[tuple[tuple, str, int]]], int]:
    """Every copy of every entry, by seq, as (rank, document, body index), best kept first; and how many
    entries are marked ``merge=conflict`` (never counted as copies)."""
    copies: dict[int, list[tuple[tuple, str, int]]] = {}
    conflicts = 0
    for doc_id, item in loaded.items():
        for index, line in enumerate(item.doc.body):
            entry = parse_entry(line)
            if entry is None or entry.seq is None:
                continue
            if entry.meta.get(CONFLICT_KEY) == "conflict":
                conflicts += 1
                continue
            rank = (doc_id == CURRENT_ID, "superseded_by" not in entry.meta, doc_id, index)
            copies.setdefault(entry.seq, []).append((rank, doc_id, index))
    return copies, conflicts


def _texts(loaded: dict, found: list[tuple[tuple, str, int]]) -> set[str]:
    return {parse_entry(loaded[doc_id].doc.body[index]).text for _, doc_id, index in found}


def reconcile(store: Store, txn: Transaction | None = None) -> Reconciled:
    """Remove duplicate and forgotten entries from the whole store, in one transaction (``txn``, when
    the caller already holds the store's lock, else one of its own)."""
    if txn is None:
        with store.writing() as own:
            return reconcile(store, own)
    result = Reconciled()
    gone = tombstones(store)
    loaded = {doc_id: store.load(doc_id) for doc_id in store.all_ids()}
    copies, _ = _copies(loaded)
    drop: dict[str, set[int]] = {}
    for seq, found in copies.items():
        if seq in gone:
            for _, doc_id, index in found:
                drop.setdefault(doc_id, set()).add(index)
                result.forgotten += 1
            continue
        if len(found) < 2:
            continue
        if len(_texts(loaded, found)) > 1:
            continue  # an edit conflict, for a person
        for _, doc_id, index in sorted(found)[1:]:
            drop.setdefault(doc_id, set()).add(index)
            result.duplicates += 1
    for doc_id, indexes in sorted(drop.items()):
        doc = loaded[doc_id].doc
        doc.body = [line for i, line in enumerate(doc.body) if i not in indexes]
        path = store.relpath(doc_id)
        if doc_id != CURRENT_ID and not any(True for _ in doc.entries()):
            txn.delete(path)
            result.removed_docs.append(doc_id)
            continue
        if "token_count" in doc.meta:
            refresh_token_count(doc)
        txn.write(path, doc.render())
        result.changed_docs.append(doc_id)
    return result
