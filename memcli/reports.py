"""The results of Memory's store-level calls (init, status, embed, trust) and the status report."""

from __future__ import annotations

from dataclasses import dataclass

from memcli.paths import resolve_config_file
from memcli.results import Result, omit_empty
from memcli.store import CURRENT_ID
from memcli.store.identity import drawn_origin, is_shared


@dataclass
class InitResult(Result):
    store: str
    created: bool


@dataclass
class TrustResult(Result):
    store: str
    settings: dict  # the guarded settings the store's config.toml sets
    approved: bool  # whether they are honoured now


@dataclass
class StatusResult(Result):
    store: str
    store_source: str
    documents: int
    entries: int
    library_tokens: int
    current_entries: int
    current_tokens: int
    current_oldest: str | None
    next_seq: int
    consolidation_due: str | None  # why CURRENT is due for consolidation, or None
    consolidation: dict | None  # the running consolidation, or how the last one ended (None: none ran)
    profile: dict  # the model profile: name (small | capable), reason
    reader: str  # ask's reader under these settings and this profile
    consolidate_llm: bool  # whether consolidation uses the model
    settings: dict
    config_file: str
    index_cache: str
    vectors: dict | None = None  # entries without a vector (missing) and the vectors job (None: no semantic signal)
    shared: dict | None = None  # a store shared through git: {"origin": this clone's (None: not drawn yet)}
    approvals: dict | None = None  # {"file", "damaged": why}: the approvals file cannot be read (memcli trust)


@dataclass
class EmbedResult(Result):
    state: str  # done | off (no semantic signal)
    entries: int | None = omit_empty()  # entries with a vector
    seconds: float | None = omit_empty()
    why: str | None = omit_empty()  # why there are no vectors (state off)
    pid: int | None = omit_empty()  # the job's process (--worker)
    started: str | None = omit_empty()
    finished: str | None = omit_empty()
    embedded: int | None = omit_empty()  # texts embedded by this run


def status_report(memory) -> StatusResult:
    """``memcli status``: the store, how it was chosen, its size, CURRENT and the thresholds in force."""
    from memcli.consolidate.run import due
    with memory.store.reading():
        rows = memory.index.catalog()
        current = memory.store.load(CURRENT_ID).doc
        times = [e.time for _, e in current.entries() if e.time]
        state = memory.store.read_state()
    cur = next((r for r in rows if r.id == CURRENT_ID), None)
    return StatusResult(
        store=str(memory.root), store_source=memory.where.source,
        documents=sum(1 for r in rows if r.id != CURRENT_ID),
        entries=sum(r.entries for r in rows),
        library_tokens=sum(r.token_count for r in rows if r.id != CURRENT_ID),
        current_entries=cur.entries if cur else 0, current_tokens=cur.token_count if cur else 0,
        current_oldest=min(times) if times else None, next_seq=int(state.get("next_seq", 1)),
        consolidation_due=due(memory.store, memory.settings), consolidation=memory.consolidation_status(),
        profile=memory.profile.to_dict(), reader=memory.default_reader(),
        consolidate_llm=memory.consolidates_with_model(), settings=memory.settings.to_dict(),
        config_file=str(resolve_config_file().path),
        index_cache=str(memory.store.cache_folder),
        vectors=memory.vectors_status() if memory.settings.search_semantic else None,
        shared={"origin": drawn_origin(memory.root)} if is_shared(state) else None,
        approvals=_approvals())


def _approvals() -> dict | None:
    from memcli.trust import read_approvals, trust_file

    why = read_approvals()[1]
    return {"file": str(trust_file()), "damaged": why} if why else None
