"""Stable prompt prefixes of local model calls, kept as KV blocks (``memcli ask``).

A caller marks the parts of its prompt that other calls share as message
prefixes (``shared``): the agent's instructions and catalog, the answer's
instructions and evidence. Before the call, the longest chain of stored
blocks covering those prefixes is restored into the context; llama-cpp-python
then finds them by its own prefix matching (it compares token ids, so a
restored prefix it does not share is simply recomputed, never misused) and
prefills only the rest. After the call, missing blocks of the chain are
saved from the context.

The prompt is rendered exactly as llama-cpp-python renders it for a GGUF
chat template (the same Jinja2 formatter, tokenized with special tokens). A
prefix's boundary is where the rendering of its messages stops agreeing
with the rendering of the whole prompt, cut back to whole tokens. Blocks are
keyed by content (parent key and token ids), so a changed catalog or
evidence simply makes new blocks; the old ones age out by LRU eviction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memcli.kv.blocks import BlockRefused, block_key
from memcli.kv.engine import KVEngine, Unit
from memcli.llm.llamacpp import common_prefix


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

    def __init__(self, engine: KVEngine, label: str = "prompt"):
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llm = engine.llm
        self.engine = engine
        self.label = label
        template = (llm.metadata or {}).get("tokenizer.chat_template")
        self.formatter = None
        if template and llm.chat_format == "chat_template.default" and llm.chat_handler is None:
            eos, bos = llm.token_eos(), llm.token_bos()
            self.formatter = Jinja2ChatFormatter(
                template=template, eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llm._model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos])

    def _render(self, messages: list[dict]) -> tuple[str, bool]:
        result = self.formatter(messages=messages)
        return result.prompt, bool(result.added_special)

    def _tokens(self, text: str, added_special: bool) -> list[int]:
        return self.engine.llm.tokenize(text.encode("utf-8"), add_bos=not added_special, special=True)

    def chain(self, messages: list[dict], shared: list[list[dict]]) -> list[Link]:
        """The blocks covering the shared prefixes of ``messages``' prompt, shortest prefix first."""
        if self.formatter is None or not shared:
            return []
        full, special = self._render(messages)
        tokens = self._tokens(full, special)
        bounds = set()
        for prefix in shared:
            text = os.path.commonprefix([self._render(prefix)[0], full])
            same = common_prefix(self._tokens(text, special), tokens) if text else 0
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
                break  # not stored: leave the context as it is for llama-cpp-python's own prefix reuse
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
