"""Stable prompt prefixes of local model calls, kept as KV blocks (``memcli ask``).

A caller marks the parts of its prompt that other calls share as message
prefixes (``shared``): the agent's instructions and catalog, the answer's
instructions and evidence. Before the call, the longest chain of stored
blocks covering those prefixes is restored into the context; the runtime
then finds them by its prefix matching (it compares token ids, so a
restored prefix it does not share is simply recomputed, never misused) and
prefills only the rest. After the call, missing blocks of the chain are
saved from the context.

The prompt is rendered exactly as the model backend renders it (the
runtime's GGUF chat template, tokenized with special tokens). A
prefix's boundary is where the rendering of its messages stops agreeing
with the rendering of the whole prompt, cut back to whole tokens. Blocks are
keyed by content (parent key and token ids), so a changed catalog or
evidence simply makes new blocks; the old ones age out by LRU eviction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memcli.errors import ConfigError
from memcli.kv.blocks import PROMPT_UNIT, BlockRefused, block_key
from memcli.kv.engine import KVEngine, Unit
from memcli.llm.runtime import common_prefix


@dataclass
class Link:
    key: str
    parent: str | None
    start: int
    tokens: list[int]

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)


class PromptBlocks:
    """Restores and saves the shared prefixes of one model's prompts (attach as ``model.prefix_cache``)."""

    def __init__(self, engine: KVEngine, label: str = PROMPT_UNIT):
        self.engine = engine
        self.label = label

    def _render(self, messages: list[dict]) -> str:
        return self.engine.rt.render_chat(messages)[0]

    def _tokens(self, text: str) -> list[int]:
        return self.engine.rt.chat_tokens(text)

    def chain(self, messages: list[dict], shared: list[list[dict]]) -> list[Link]:
        """The blocks covering the shared prefixes of ``messages``' prompt, shortest prefix first."""
        if not shared:
            return []
        try:
            full = self._render(messages)
        except ConfigError:  # no chat template: the call itself will say so
            return []
        tokens = self._tokens(full)
        bounds = set()
        for prefix in shared:
            text = os.path.commonprefix([self._render(prefix), full])
            same = common_prefix(self._tokens(text), tokens) if text else 0
            if 0 < same < len(tokens):  # the last prompt token is always computed for its logits
                bounds.add(same)
        links: list[Link] = []
        start, parent = 0, None
        for end in sorted(bounds):
            piece = tokens[start:end]
            key = block_key(parent, piece)
            links.append(Link(key, parent, start, piece))
            start, parent = end, key
        return links

    def restore(self, links: list[Link]) -> int:
        """Put the longest available part of the chain into the context; tokens restored from blocks."""
        engine = self.engine
        held = engine.context_tokens()
        restored = 0
        for link in links:
            if held[link.start:link.end] == link.tokens:
                continue  # already in the context (an earlier call of this process)
            if not engine.blocks.path(link.key).exists():
                break  # not stored: leave the context as it is for the runtime's own prefix reuse
            try:
                if not engine.restore(link.key, Unit(self.label, link.tokens), link.start):
                    break
            except OSError as exc:  # an unreadable block file: the prompt is prefilled as usual
                engine.stats.refused.append(f"{link.key[:12]}: not read: {exc}")
                break
            restored += len(link.tokens)
            held = engine.context_tokens()
        return restored

    def save(self, links: list[Link]) -> int:
        """Save the chain's blocks that are not stored yet, from the context the call left; blocks saved."""
        engine = self.engine
        held = engine.context_tokens()
        saved = 0
        for link in links:
            if held[link.start:link.end] != link.tokens:
                break  # the call's prompt was not this one (should not happen): save nothing after it
            try:
                stored = engine.blocks.header(link.key) is not None
            except BlockRefused:
                engine.blocks.remove(link.key)
                stored = False
            if not stored:
                try:
                    engine.save(link.key, link.parent, self.label, link.start, link.end)
                except (OSError, BlockRefused) as exc:  # blocks only save time: the answer stands
                    engine.stats.refused.append(f"{link.key[:12]}: not saved: {exc}")
                    break
                saved += 1
        return saved
