"""The KV store's part of a forget: blocks made from documents that changed and the prompt prefixes of
model calls (which may hold any evidence), chat sessions that hold a forgotten text or were computed over
blocks that went, and chat's token caches; and the folder's own
note of the tombstones it is clean of (:func:`seen`), which every cache folder of the store reads."""

from __future__ import annotations

import json
from pathlib import Path

from memcli import parsing
from memcli.errors import StoreError
from memcli.kv import block_store, kv_root
from memcli.kv.blocks import PROMPT_UNIT
from memcli.kv.context import stale_labels
from memcli.paths import ensure_private_dir, store_key
from memcli.store.atomic import atomic_write
from memcli.store.folder import read_regular

SEEN = "forget-seen.json"  # in a KV folder: for each store, the digest of its tombstones the folder is clean of


def seen(root: Path, store) -> str | None:
    """The digest of ``store``'s tombstones the KV folder ``root`` was last made clean of (None: no note, as in
    a folder made before the note existed or one that never saw a forget). The note is the folder's own, not a
    cache folder's: a store used through two cache folders has one KV folder, cleaned once; it is kept per
    store, for a ``kv.dir`` that several stores name."""
    value = _notes(root).get(_key(store))
    return value if isinstance(value, str) else None


def note_seen(root: Path, store, digest: str) -> None:
    """Note that the KV folder ``root`` (made when missing) is clean of ``store``'s tombstones with ``digest``."""
    note = _notes(root)
    note[_key(store)] = digest
    atomic_write(ensure_private_dir(root) / SEEN, json.dumps({"stores": note}))


def _key(store) -> str:
    return store_key(str(store.root.resolve()))


def _notes(root: Path) -> dict:
    try:
        note = parsing.loads(read_regular(root / SEEN))
    except (OSError, ValueError, StoreError):
        return {}
    stores = note.get("stores") if isinstance(note, dict) else None
    return dict(stores) if isinstance(stores, dict) else {}


def forget_texts(store, settings, texts: list[str] | None) -> dict:
    """KV blocks of changed documents, chat sessions holding one of ``texts`` (None: every session,
    when the texts are no longer known) or built on blocks that went, and chat's token caches."""
    root = kv_root(store, settings)
    if not root.exists():
        return {}
    blocks = block_store(store, settings)
    labels = {b.header.unit for b in blocks.blocks()}
    with store.reading():
        stale = stale_labels(store, labels)
    stale |= {PROMPT_UNIT} & labels  # a model call's prompt prefixes: evidence, a catalog, not tied to one document
    dropped, _ = blocks.invalidate(stale)
    kept = {b.header.key for b in blocks.blocks()}
    sessions = 0
    for path in sorted((root / "sessions").glob("*.json")) if (root / "sessions").is_dir() else ():
        saved = _session(path)
        # a session said a forgotten text, or its state was computed over memory blocks that went
        if saved is None or texts is None or _holds_any(saved, texts) or not set(saved.get("memory_keys") or []) <= kept:
            path.unlink(missing_ok=True)
            if saved is not None and isinstance(saved.get("session_key"), str):
                blocks.remove(saved["session_key"])
            sessions += 1
    units = 0
    for path in (root / "units").glob("*.json") if (root / "units").is_dir() else ():
        path.unlink(missing_ok=True)  # chat's token caches: rebuilt in milliseconds
        units += 1
    return {"kv_blocks": dropped, "chat_sessions": sessions, "unit_caches": units,
            "orphan_summaries": blocks.orphans()}


def _session(path: Path) -> dict | None:
    """A chat session's saved state (None: unreadable, dropped to be safe: a session only restarts)."""
    try:
        data = parsing.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _holds_any(saved: dict, texts: list[str]) -> bool:
    said = " ".join(str(m.get("content", "")) for m in saved.get("messages") or [] if isinstance(m, dict))
    return any(text and text in said for text in texts)
