"""A memory-augmented chat whose memory and history are restored from KV blocks, not re-read.

Prompt layout (token level): the chat template's text before the system
message + the header, each memory unit, the template's opening of the first
user turn (the chain's last unit), then the template's rendering of the
conversation. Text from memory and from the user is tokenized with
``special=False`` (it can never spell the template's control tokens); only
the template's own text is tokenized with special tokens. A turn's prompt
shares every token before the new message with the context, so only the new
message (and the template's few tokens closing it) is prefilled: after each
reply, the reply as the template renders it and the opening of the next user
turn are prefilled before the session is saved.

After each turn the conversation's cells (everything after the memory
chain) are saved as one session block chained to the memory's last block,
and ``sessions/NAME.json`` records the messages and chain. Resuming in a new
process restores the memory chain and the session block; if the memory
changed since, the old history is prefilled once over the new memory.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from memcli import parsing
from memcli.errors import StoreError, UsageError
from memcli.kv.blocks import block_key
from memcli.kv.context import CHAT_HEADER, memory_texts
from memcli.kv.engine import KVEngine, Unit
from memcli.kv.unit_cache import cached_units, units_key
from memcli.llm.repetition import loop_start
from memcli.paths import ensure_private_dir
from memcli.results import Result
from memcli.store import Store
from memcli.store.atomic import atomic_write
from memcli.store.folder import read_regular

_SENTINEL = re.compile(r"\x1e(SYS|\d+)\x1e")
SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass
class TurnStats(Result):
    prompt_tokens: int = 0
    prefilled_tokens: int = 0
    restored_tokens: int = 0  # prompt tokens not prefilled: restored from blocks, or kept from earlier turns
    generated_tokens: int = 0
    ttft_s: float = 0.0
    tokens_per_s: float = 0.0
    prepared_tokens: int = 0  # prefilled after the reply: its rendering and the next turn's opening
    cut: str | None = None  # "repetition": the reply was stopped where it began to loop

    def extra(self) -> dict:
        return {"ttft_s": round(self.ttft_s, 4), "tokens_per_s": round(self.tokens_per_s, 2)}


@dataclass
class ChatSession:
    engine: KVEngine
    store: Store
    sessions_dir: Path
    name: str
    memory_tokens: int
    max_tokens: int = 256
    messages: list[dict] = field(default_factory=list)
    memory_keys: list[str] = field(default_factory=list)
    memory_units: list[Unit] = field(default_factory=list)
    session_key: str | None = None
    resumed: str = "new"  # new | restored | re-prefilled (memory changed)
    start_stats: dict = field(default_factory=dict)
    compose: bool = False  # place independently saved document blocks (approximate) instead of a chain
    recompute: int = 0  # composed: tokens at the start of each later block prefilled in place
    units_dir: Path | None = None  # where the memory units are kept as tokens (kv/units; None: built each start)

    def __post_init__(self):
        if not SESSION_NAME.fullmatch(self.name):
            raise UsageError(f"bad session name {self.name!r} (letters, digits, '_', '.', '-'; 64 at most)")
        if not self.engine.rt.metadata.get("tokenizer.chat_template"):
            raise UsageError("this model has no chat template in its GGUF metadata")

    # ------------------------------------------------------------ prompt

    def _render(self, messages: list[dict], *, open_last: bool = False) -> tuple[list[int], list[int]]:
        """(tokens before the system text, tokens after it) for ``messages`` with a generation prompt;
        ``open_last``: stop where the last message's text would start."""
        shown = [{"role": "system", "content": "\x1eSYS\x1e"}] + [
            {"role": m["role"], "content": f"\x1e{i}\x1e"} for i, m in enumerate(messages)]
        text = self.engine.rt.render_chat(shown)[0]
        pieces = _SENTINEL.split(text)  # template, name, template, name, ...
        before: list[int] = []
        after: list[int] = []
        target = before
        for index, piece in enumerate(pieces):
            if index % 2 == 0:
                if piece:
                    target.extend(self.engine.tokenize(piece, special=True, bos=target is before and not before))
            elif piece == "SYS":
                target = after
            elif open_last and int(piece) == len(messages) - 1:
                break
            else:
                target.extend(self.engine.tokenize(messages[int(piece)]["content"]))
        return before, after

    def _opening(self, messages: list[dict]) -> list[int]:
        """The tokens after the system text up to where the next user message's text goes."""
        return self._render([*messages, {"role": "user", "content": ""}], open_last=True)[1]

    def memory(self) -> list[Unit]:
        """The memory context as units, from the store as it is now: the header, the memory, and
        last the template's opening of the first user turn (``turn-open``), so a turn prefills only
        its message and the few tokens that close it. Kept by the store's file signatures
        (:mod:`memcli.kv.unit_cache`), so an unchanged store is not read again."""
        def build() -> list[Unit]:
            before, _ = self._render([])
            units = [Unit("header", before + self.engine.tokenize(CHAT_HEADER))]
            units += [Unit(label, self.engine.tokenize(text))
                      for label, text in memory_texts(self.store, self.memory_tokens)]
            units.append(Unit("turn-open", self._opening([])))
            return units

        key = units_key(self.store, {"fingerprint": self.engine.fp_id, "memory_tokens": self.memory_tokens,
                                     "header": CHAT_HEADER})
        return cached_units(self.units_dir, key, build)

    # ------------------------------------------------------------ session life

    def start(self, progress=None) -> None:
        """Restore the memory context, and the saved session when there is one; ``progress(done,
        total)`` follows the memory's tokens as they are restored or prefilled."""
        begin = self.engine.stats.restored, self.engine.stats.prefilled, time.perf_counter()
        self.memory_units = self.memory()
        if progress is not None:
            total = self.memory_end
            stats = self.engine.stats

            def told(done: int) -> None:
                progress(min(total, stats.restored - begin[0] + stats.prefilled - begin[1] + done), total)

            self.engine.on_prefill = told
            told(0)
        if self.compose:
            self.memory_keys = self.engine.compose(self.memory_units[0], self.memory_units[1:-1],
                                                   recompute=self.recompute)
            self.engine.extend([t for u in self.memory_units for t in u.tokens])  # the opening, prefilled
        else:
            self.memory_keys = self.engine.load_chain(self.memory_units)
        saved = self._read_session()
        if saved:
            self.messages = saved["messages"]
            if saved.get("memory_keys") == self.memory_keys and saved.get("session_key"):
                tokens = saved["tokens"]
                unit = Unit(f"session:{self.name}", tokens)
                key = block_key(self.memory_keys[-1], tokens)
                if key == saved["session_key"] and self.engine.restore(key, unit, self.memory_end):
                    self.session_key = key
                    self.resumed = "restored"
            if self.resumed != "restored":
                self.resumed = "re-prefilled"  # history is prefilled with the next turn
        self.engine.on_prefill = None
        if progress is not None:
            progress(self.memory_end, self.memory_end)
        self.start_stats = {"restored_tokens": self.engine.stats.restored - begin[0],
                            "prefilled_tokens": self.engine.stats.prefilled - begin[1],
                            "seconds": round(time.perf_counter() - begin[2], 4), "resumed": self.resumed,
                            "memory_tokens": self.memory_end, "memory_units": len(self.memory_units)}

    @property
    def memory_end(self) -> int:
        """Where the conversation starts: after the memory and the opening of the first user turn."""
        return sum(len(u.tokens) for u in self.memory_units)

    def _memory_tokens(self) -> list[int]:
        """The memory's tokens, without the turn opening (the rendered conversation starts with it)."""
        return [t for u in self.memory_units if u.label != "turn-open" for t in u.tokens]

    def turn(self, text: str, on_text=None) -> tuple[str, TurnStats]:
        """One user message in, the assistant's reply out; the session is saved before returning.

        ``on_text`` receives the reply's text as it grows (streaming)."""
        text = text.strip()
        if not text:
            raise UsageError("empty message")
        messages = [*self.messages, {"role": "user", "content": text}]
        _, after = self._render(messages)
        prompt = self._memory_tokens() + after
        stats = TurnStats(prompt_tokens=len(prompt))
        before = self.engine.stats.prefilled
        done = self.engine.generate(prompt, max_tokens=self.max_tokens, on_text=on_text, halt=loop_start)
        stats.prefilled_tokens = self.engine.stats.prefilled - before
        stats.restored_tokens = stats.prompt_tokens - stats.prefilled_tokens
        stats.generated_tokens = len(done.tokens)
        stats.ttft_s = done.ttft_s
        stats.tokens_per_s = done.tokens_per_s or 0.0
        stats.cut = "repetition" if done.finish_reason == "repeat" else None
        reply = done.text.strip()
        self.messages = [*messages, {"role": "assistant", "content": reply}]
        # after the reply, not before the next first token: the reply as the template renders it and
        # the opening of the next user turn go into the context (and the session block)
        before = self.engine.stats.prefilled
        self.engine.extend(self._memory_tokens() + self._opening(self.messages))
        stats.prepared_tokens = self.engine.stats.prefilled - before
        self._save()
        return reply, stats

    def forget_last(self) -> bool:
        """Drop the last exchange from the conversation (the context rewinds with the next turn)."""
        if len(self.messages) < 2:
            return False
        self.messages = self.messages[:-2]
        self.engine.truncate(self.memory_end)
        self._save()
        return True

    def remembered(self, seqs: list[int]) -> None:
        """Note on the last exchange's user message the seqs of the memory entries it became, so a
        later ``/forget`` (in this process or after a resume) takes out exactly those. The template
        reads only a message's role and content."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                message["seqs"] = list(seqs)
                break
        self._save()

    # ------------------------------------------------------------ persistence

    def _session_path(self) -> Path:
        return self.sessions_dir / f"{self.name}.json"

    def _read_session(self) -> dict | None:
        try:
            data = parsing.loads(read_regular(self._session_path()).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, StoreError):
            return None  # an unreadable session (or a link where it would be) starts over; memory is untouched
        return data if isinstance(data, dict) and isinstance(data.get("messages"), list) else None

    def _save(self) -> None:
        end = self.engine.n_tokens
        tokens = self.engine.context_tokens()[self.memory_end:end]
        old = self.session_key
        key = None
        if tokens:
            key = block_key(self.memory_keys[-1] if self.memory_keys else None, tokens)
            if key != old:
                self.engine.save(key, self.memory_keys[-1] if self.memory_keys else None,
                                 f"session:{self.name}", self.memory_end, end)
        ensure_private_dir(self.sessions_dir)
        atomic_write(self._session_path(), json.dumps({
            "name": self.name, "messages": self.messages, "memory_keys": self.memory_keys,
            "session_key": key, "tokens": tokens, "fingerprint_id": self.engine.fp_id}))
        if old and old != key:
            self.engine.blocks.remove(old)
        self.session_key = key
