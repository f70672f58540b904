"""The memory context of ``memcli chat`` as units: the system header, topic documents, then CURRENT.

Layout keeps prefixes valid as memory changes: documents in a stable order
(creation time, then id), so a new document lands at the end of the chain and
an untouched document keeps its block as long as nothing before it changed;
CURRENT, which changes most often, comes last.

Each unit's label carries a hash of its source file, which is how
consolidation finds the blocks a rewrite made stale without a model
(:func:`stale_labels`).
"""

from __future__ import annotations

import hashlib

from memcli.kv.units import stale_windows
from memcli.retrieve.evidence import render_entry
from memcli.store import CURRENT_ID, Store
from memcli.store.format import parse_entry
from memcli.tokens import count_tokens

CHAT_HEADER = """You are a helpful assistant with a long-term memory of earlier conversations.
Your memory follows: topic documents, then recent memories, one fact per line as [date time] who: text.
Use it when it helps; say so when you do not remember something. Answer briefly.
"""


def file_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def unit_label(doc_id: str, text: str) -> str:
    return f"{'CURRENT' if doc_id == CURRENT_ID else 'doc:' + doc_id}@{file_hash(text)}"


def _entries_text(raw: str) -> list[str]:
    return [render_entry(entry) for line in raw.split("\n")
            if (entry := parse_entry(line)) is not None and "superseded_by" not in entry.meta]


def document_text(store: Store, doc_id: str, loaded=None) -> tuple[str, str]:
    """(label, text) of one topic document as a memory unit: a heading line, then its live entries.

    ``loaded`` (the document as ``store.load`` returned it) saves parsing it again.
    """
    raw = store.read_text(doc_id)
    loaded = loaded or store.load(doc_id)
    summary = " ".join(str(loaded.doc.meta.get("summary") or "").split())
    return unit_label(doc_id, raw), f"## {doc_id}: {summary}\n" + "".join(f"{line}\n" for line in _entries_text(raw))


def memory_texts(store: Store, budget: int) -> list[tuple[str, str]]:
    """(label, text) of the memory units after the header, within ``budget`` tokens.

    Documents go in stable order while they fit (one that does not fit is
    left out); CURRENT contributes its newest entries that fit what is left.
    """
    out: list[tuple[str, str]] = []
    used = 0
    docs = []
    for doc_id in store.all_ids():
        if doc_id == CURRENT_ID:
            continue
        loaded = store.load(doc_id)
        if loaded.error:
            continue
        docs.append((str(loaded.doc.meta.get("created_time") or ""), doc_id, loaded))
    for _, doc_id, loaded in sorted(docs, key=lambda d: d[:2]):
        label, text = document_text(store, doc_id, loaded)
        cost = count_tokens(text)
        if used + cost > budget:
            continue
        out.append((label, text))
        used += cost
    if CURRENT_ID in store.all_ids():
        raw = store.read_text(CURRENT_ID)
        lines: list[str] = []
        left = budget - used - 8
        for line in reversed(_entries_text(raw)):
            left -= count_tokens(line) + 1
            if left < 0:
                break
            lines.append(line)
        if lines:
            out.append((unit_label(CURRENT_ID, raw), "## Recent memories\n" + "".join(f"{x}\n" for x in reversed(lines))))
    return out


def stale_labels(store: Store, labels: set[str]) -> set[str]:
    """Labels (of stored blocks) whose document no longer has the content the block was made from
    (memory units of chat, and ``window:`` units of ``ask --kv-compose``)."""
    current: dict[str, str] = {}
    ids = set(store.all_ids())
    stale = set()
    for label in labels:
        own = label.removeprefix("compose:")
        if "@" not in own or not (own.startswith("doc:") or own.startswith("CURRENT@")):
            continue
        name = own.split("@", 1)[0]
        doc_id = CURRENT_ID if name == "CURRENT" else name[4:]
        if doc_id not in ids:
            stale.add(label)
            continue
        if doc_id not in current:
            current[doc_id] = unit_label(doc_id, store.read_text(doc_id))
        if current[doc_id] != own:
            stale.add(label)
    return stale | stale_windows(store, labels)

