"""A chat session with memory in context (``memcli chat``, :meth:`memcli.Memory.chat`).

The memory context and the conversation live in llama.cpp's KV cache and
are restored from KV blocks (:mod:`memcli.kv.chat_session`). The user's messages are
remembered as CURRENT entries unless ``remember=False`` (a message of one or two words, "hi",
"thanks", holds nothing to recall out of its moment and is not: in the two development LoCoMo
conversations 4 of 788 turns are that short, none of them evidence); the model's replies
only when ``remember_replies`` (default: a capable model's), so a small
model's noise never comes back as evidence. ``forget`` takes the last
exchange back out of the conversation and of memory.
"""

from __future__ import annotations

import re

from memcli.errors import UsageError
from memcli.forget import forget_chat_turns
from memcli.ingest.entries import ingest_turns
from memcli.ingest.formats import fingerprint_turns
from memcli.ingest.turns import Turn
from memcli.kv import kv_root
from memcli.kv.chat_session import ChatSession
from memcli.store.folder import now_iso

MIN_WORDS = 3  # a user message shorter than this is not remembered
_WORD = re.compile(r"\w+")


class Chat:
    """One named session over one :class:`~memcli.Memory`; started (memory restored) on creation."""

    def __init__(self, memory, name: str = "default", *, remember: bool = True, max_tokens: int = 256,
                 verify: bool = False, compose: bool = False, progress=None, remember_replies: bool | None = None):
        if max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1")
        self.memory = memory
        self.store = memory.store
        self.remember = remember
        self.remember_replies = remember and (memory.profile.name == "capable" if remember_replies is None
                                              else remember_replies)
        self.engine = memory.kv_engine(verify=verify)
        cfg = memory.settings
        self.budget = cfg.kv_budget_mb * 1024 * 1024
        root = kv_root(self.store, cfg)
        self.session = ChatSession(self.engine, self.store, root / "sessions", name, cfg.chat_memory_tokens,
                                   max_tokens=max_tokens, compose=compose, units_dir=root / "units",
                                   recompute=max(0, cfg.kv_compose_recompute))
        with self.store.reading():
            self.session.start(progress)
        self.last = None  # the last turn's stats

    @property
    def name(self) -> str:
        return self.session.name

    @property
    def start_stats(self) -> dict:
        return self.session.start_stats

    @property
    def warnings(self) -> list[str]:
        """KV blocks refused (and rebuilt) so far."""
        return list(self.engine.stats.refused)

    def say(self, message: str, on_text=None):
        """The reply to ``message`` and the turn's stats; ``on_text`` sees the reply as it grows."""
        reply, stats = self.session.turn(message, on_text=on_text)
        self.last = stats
        self.engine.blocks.evict(self.budget, keep={*self.session.memory_keys, self.session.session_key or ""})
        if self.remember and len(_WORD.findall(message)) >= MIN_WORDS:
            when = now_iso("minutes")
            conv = f"chat:{self.name}"
            turns = [Turn(text=message.strip(), time=when, speaker="user", conv=conv)]
            if self.remember_replies and reply.strip():
                turns.append(Turn(text=reply, time=when, speaker="assistant", source="AI", conv=conv))
            fingerprint_turns(turns, conv, "chat")
            ingest_turns(self.store, turns, source=conv, fmt="chat")
        return reply, stats

    def forget(self) -> int | None:
        """Drop the last exchange (and its memory entries, if still in CURRENT); None when there is none."""
        dropped = self.session.messages[-2:] if len(self.session.messages) >= 2 else []
        if not self.session.forget_last():
            return None
        return forget_chat_turns(self.store, conv=f"chat:{self.name}", texts=[m["content"] for m in dropped])

    def units(self) -> list[tuple[str, int]]:
        """(label, tokens) of the memory in the context."""
        return [(u.label, len(u.tokens)) for u in self.session.memory_units if u.label != "turn-open"]

    def stats(self) -> dict:
        return {"start": self.start_stats, "last_turn": self.last.to_dict() if self.last else None,
                "engine": self.engine.stats.to_dict()}
