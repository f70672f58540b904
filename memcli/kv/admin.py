"""``memcli kv``: build, list, measure, check and prune the KV-block store."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from memcli.errors import UsageError
from memcli.kv import block_store, kv_root
from memcli.kv.context import stale_labels
from memcli.kv.units import Units
from memcli.results import Result
from memcli.store.lines import Library


@dataclass
class KVReport(Result):
    action: str  # build | ls | stats | verify | prune
    data: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"action": self.action, **self.data, **({"blocks": self.rows} if self.action == "ls" else {})}

    @property
    def bad(self) -> bool:
        """``verify`` found a bad block."""
        return bool(self.data.get("bad"))


def build(memory, *, verify: bool = False, ask_units: bool = False, progress=None) -> KVReport:
    """Prefill and save the blocks of chat's memory context; valid stored blocks are restored instead.

    ``ask_units``: also make the composed block of every memory unit of the store (what ``ask
    --kv-compose`` places; :mod:`memcli.kv.units`), so that no composed ask waits for one;
    ``progress(done, total)`` follows those units. They are ordinary blocks of the store's LRU
    budget (the chat context's blocks are kept first)."""
    from memcli.kv.chat_session import ChatSession

    begin = time.perf_counter()
    memory.settle_caches()  # blocks are made for the store as it is now, after what was forgotten elsewhere
    engine = memory.kv_engine(verify=verify)
    cfg = memory.settings
    talk = ChatSession(engine, memory.store, kv_root(memory.store, cfg) / "sessions", "default",
                       cfg.chat_memory_tokens)
    made: dict = {}
    with memory.store.reading():
        units = talk.memory()
        keys = engine.load_chain(units)
        if ask_units:
            from memcli.kv.composed_ask import ComposedPrompt, unit_blocks
            every = [u for u in Units(Library(memory.store)).every() if u.lines]
            _, tokens = unit_blocks(engine, ComposedPrompt(engine), every, progress)
            made = {"ask_units": len(every), "ask_unit_tokens": tokens}
    evicted = engine.blocks.evict(cfg.kv_budget_mb * 1024 * 1024, keep=set(keys))
    return KVReport("build", {"units": [{"unit": u.label, "tokens": len(u.tokens)} for u in units],
                              "tokens": sum(len(u.tokens) for u in units), **made, **engine.stats.to_dict(),
                              "evicted_blocks": evicted[0], "seconds": round(time.perf_counter() - begin, 3)})


def listing(memory) -> KVReport:
    """Stored blocks, newest first."""
    blocks = sorted(block_store(memory.store, memory.settings).blocks(), key=lambda b: -b.last_used)
    return KVReport("ls", {"count": len(blocks)}, [b.to_dict() for b in blocks])


def stats(memory) -> KVReport:
    """Blocks, tokens and bytes stored, by kind of unit, against the budget."""
    cfg = memory.settings
    blocks = block_store(memory.store, cfg).blocks()
    kinds: dict[str, dict] = {}
    for b in blocks:
        kind = b.header.unit.split(":", 1)[0].split("@", 1)[0]
        row = kinds.setdefault(kind, {"blocks": 0, "tokens": 0, "bytes": 0})
        row["blocks"] += 1
        row["tokens"] += b.header.n_tokens
        row["bytes"] += b.file_size
    total_bytes = sum(b.file_size for b in blocks)
    tokens = sum(b.header.n_tokens for b in blocks)
    return KVReport("stats", {"dir": str(kv_root(memory.store, cfg)), "blocks": len(blocks), "tokens": tokens,
                              "bytes": total_bytes,
                              "bytes_per_token": round(total_bytes / tokens) if tokens else None,
                              "budget_bytes": cfg.kv_budget_mb * 1024 * 1024, "by_unit": kinds})


def verify(memory) -> KVReport:
    """Every block's header, checksum and parent (no model needed)."""
    blocks = block_store(memory.store, memory.settings)
    infos = blocks.blocks()
    bad = {info.header.key: reason for info in infos if (reason := blocks.verify(info.header.key))}
    return KVReport("verify", {"checked": len(infos), "bad": bad})


def prune(memory, budget_mb: int | None = None) -> KVReport:
    """Remove stale blocks (their document changed), broken ones, then least recently used ones over budget,
    and key summaries left without their block."""
    if budget_mb is not None and budget_mb < 0:
        raise UsageError("--budget must not be negative")
    cfg = memory.settings
    blocks = block_store(memory.store, cfg)
    with memory.store.reading():
        stale = stale_labels(memory.store, {b.header.unit for b in blocks.blocks()})
    stale_blocks, stale_tokens = blocks.invalidate(stale)
    broken = [b.header.key for b in blocks.blocks() if blocks.verify(b.header.key)]
    for key in broken:
        blocks.remove(key)
    evicted, freed = blocks.evict((cfg.kv_budget_mb if budget_mb is None else budget_mb) * 1024 * 1024)
    return KVReport("prune", {"stale_blocks": stale_blocks, "stale_tokens": stale_tokens, "broken": len(broken),
                              "evicted_blocks": evicted, "evicted_bytes": freed,
                              "orphan_summaries": blocks.orphans()})
