"""What a consolidation did: kept apart from the pipeline so commands can render it cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.results import Result


@dataclass
class FlushReport:
    first_seq: int
    last_seq: int
    entries: int
    blocks: int
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    split: dict[str, list[str]] = field(default_factory=dict)
    merged: list[list[str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # merged into another, or renamed (the former id)
    renamed: dict[str, str] = field(default_factory=dict)  # a former id: the id its document has now
    superseded: int = 0
    token_delta: dict[str, int] = field(default_factory=dict)
    deterministic_redo: bool = False
    guard_problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class ConsolidationResult(Result):
    store: str
    dry_run: bool
    llm: bool
    model: str | None
    flushes: list[FlushReport]
    calls: dict
    seconds: float
    entries_consolidated: int
    current_entries_left: int
    documents: list[dict]
    reason: str | None = None
    kv_invalidated_blocks: int = 0  # KV blocks made from documents this run rewrote, and blocks chained after them
    kv_invalidated_tokens: int = 0
