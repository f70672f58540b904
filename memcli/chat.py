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

from memcli.errors import StoreError, UsageError
from memcli.forget import newest_seqs
from memcli.forget_caches import tombstone_digest
from memcli.ingest.formats import fingerprint_turns
from memcli.ingest.privacy import scrub_many
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
        if remember and memory.read_only:
            raise UsageError("a memory opened read-only cannot remember the chat's messages",
                             hint="chat with remember=False (--no-remember), or open it without read_only")
        self.memory = memory
        self.store = memory.store
        memory.settle_caches()  # a session that holds a text forgotten since (a plain git pull) is not resumed
        self._clean_of = self._tombstones()
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
        self._said: set[int] = set()  # seqs of the entries this object remembered (not in its memory context)
        self.forget_warnings: list[str] = []  # what the last forget could not clean

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
        self._catch_up()
        reply, stats = self.session.turn(message, on_text=on_text)
        self.last = stats
        self.engine.blocks.evict(self.budget, keep={*self.session.memory_keys, self.session.session_key or ""})
        seqs: list[int] = []
        if self.remember and len(_WORD.findall(message)) >= MIN_WORDS:
            when = now_iso("minutes")
            conv = f"chat:{self.name}"
            turns = [Turn(text=message.strip(), time=when, speaker="user", conv=conv)]
            if self.remember_replies and reply.strip():
                turns.append(Turn(text=reply, time=when, speaker="assistant", source="AI", conv=conv))
            fingerprint_turns(turns, conv, "chat")
            added = self.memory.remember_turns(turns, source=conv, fmt="chat", origin=f"the session {self.name}")
            seqs = list(range(added.first_seq, added.last_seq + 1)) if added.added else []
        self._said.update(seqs)
        self.session.remembered(seqs)  # none too: a /forget then forgets nothing, not an older entry alike
        return reply, stats

    def forget(self) -> int | None:
        """Drop the last exchange and forget its memory entries the way ``memcli forget`` does (wherever
        they are now, with a tombstone, the caches cleaned); how many entries went, None when there was
        no exchange. When they may be in the memory context (remembered before this session started),
        the context is built again without them."""
        self._catch_up()  # a forget made elsewhere first: its entries leave the context too
        if len(self.session.messages) < 2:
            return None
        dropped = self.session.messages[-2:]
        conv = f"chat:{self.name}"
        seqs = _recorded(dropped)
        if seqs is None:  # a session saved before its messages noted their seqs: found by their text
            stored = [kept.text for kept in scrub_many([m["content"] for m in dropped], sessions=[conv] * len(dropped))]
            seqs = newest_seqs(self.store, conv=conv, texts=stored)
        count, self.forget_warnings = 0, []
        if seqs:  # memory first: should it fail, the exchange is still there to forget again
            result = self.memory.forget([str(seq) for seq in seqs], conv=conv, everything=True)
            count, self.forget_warnings = result.count, list(result.warnings)
        self.session.forget_last()  # saved again, after the cleaning dropped the session that said it
        if count and not set(seqs) <= self._said:
            with self.store.reading():
                self.session.start()
        self._clean_of = self._tombstones()  # this forget's own: its context is settled above
        return count

    def _tombstones(self) -> str | None:
        try:
            return tombstone_digest(self.store)
        except StoreError:  # forgotten.txt no regular file: settle_caches has warned
            return None

    def _catch_up(self) -> None:
        """Entries forgotten by another command while this chat runs (``memcli forget``, an MCP tool, a sync):
        the memory context held them and the conversation may have said them, and the next save would put
        them back on disk (the forget dropped the session file that held one). The caches are settled, then
        the context is built again from memory as it is now and the conversation from its file as the forget
        left it (none, when it went), with a warning."""
        now = self._tombstones()
        if now == self._clean_of:
            return
        self.memory.settle_caches()
        kept = self.session.messages
        self.session.messages, self.session.resumed = [], "new"  # session_key kept: the next save replaces it
        with self.store.reading():
            self.session.start()
        self._clean_of = now
        if len(self.session.messages) < len(kept):
            self.memory.warn("entries were forgotten while this chat ran; the conversation, which said one or "
                             "was computed over memory that held one, starts again, and the memory context was "
                             "built again without them")

    def units(self) -> list[tuple[str, int]]:
        """(label, tokens) of the memory in the context."""
        return [(u.label, len(u.tokens)) for u in self.session.memory_units if u.label != "turn-open"]

    def stats(self) -> dict:
        return {"start": self.start_stats, "last_turn": self.last.to_dict() if self.last else None,
                "engine": self.engine.stats.to_dict()}


def _recorded(messages: list[dict]) -> list[int] | None:
    """The seqs the user message of an exchange noted (:meth:`ChatSession.remembered`); None when it
    noted none (saved by an earlier version)."""
    user = [m for m in messages if m.get("role") == "user"]
    if not user or not isinstance(user[0].get("seqs"), list):
        return None
    return [seq for seq in user[0]["seqs"] if isinstance(seq, int) and not isinstance(seq, bool)]
