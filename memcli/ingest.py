"""Ingest: turns -> new CURRENT entries, all or nothing, duplicates skipped."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Callable

from memcli.store import CURRENT_ID, Store
from memcli.store.format import Entry
from memcli.store.store import new_current, now_iso, refresh_token_count
from memcli.tokens import count_tokens
from memcli.transcripts import Turn


@dataclass
class IngestResult:
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

    def to_dict(self) -> dict:
        return asdict(self)


def ingest_turns(store: Store, turns: list[Turn], *, source: str, fmt: str, ignored: int = 0,
                 progress: Callable[[int], None] | None = None) -> IngestResult:
    """Append every turn not ingested before to CURRENT, in one transaction."""
    with store.writing() as txn:
        loaded = store.load(CURRENT_ID, strict=True) if store.current_path.exists() else None
        current = loaded.doc if loaded else new_current()
        known = store.read_fingerprints()
        state = store.read_state()
        max_current = max((e.seq or 0 for _, e in current.entries()), default=0)
        next_seq = max(int(state.get("next_seq", 1)), max_current + 1)

        new_lines: list[str] = []
        new_prints: list[str] = []
        tokens_added = 0
        first_seq = next_seq
        for done, turn in enumerate(turns, 1):
            if turn.fingerprint in known:
                if progress:
                    progress(done)
                continue
            known.add(turn.fingerprint)
            entry = Entry({"seq": str(next_seq), **turn.meta()}, turn.text)
            line = entry.render()
            new_lines.append(line)
            new_prints.append(turn.fingerprint)
            tokens_added += count_tokens(line)
            next_seq += 1
            if progress:
                progress(done)

        added = len(new_lines)
        if added:
            stamp = now_iso()
            current.append_lines(new_lines)
            current.meta["updated_time"] = stamp
            current.meta.setdefault("update_log", [])
            if not isinstance(current.meta["update_log"], list):
                current.meta["update_log"] = []
            current.meta["update_log"].append({
                "time": stamp, "op": "ingest", "seq_range": [first_seq, next_seq - 1],
                "count": added, "note": source,
            })
            current_tokens = refresh_token_count(current)
            txn.write("CURRENT.md", current.render())
            state["next_seq"] = next_seq
            txn.write("state.json", json.dumps(state) + "\n")
            previous = store.ingested_path.read_text("utf-8") if store.ingested_path.exists() else ""
            txn.write("ingested.txt", previous + "".join(p + "\n" for p in new_prints))
        else:
            current_tokens = int(current.meta.get("token_count") or refresh_token_count(current))
        entries = sum(1 for _ in current.entries())

    return IngestResult(
        source=source, format=fmt, turns=len(turns), added=added,
        skipped=len(turns) - added, ignored=ignored,
        first_seq=first_seq if added else None, last_seq=next_seq - 1 if added else None,
        tokens_added=tokens_added, current_tokens=current_tokens,
        current_entries=entries, store=str(store.root),
    )
