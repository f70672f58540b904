"""Transcripts that agents and chat apps write: Claude Code and Codex CLI sessions (JSONL), ChatGPT
and Claude.ai data exports (``conversations.json``).

What becomes a memory: the user's and the assistant's text. Tool calls, tool results, reasoning,
system and developer messages, and text blocks that are one whole ``<tag>...</tag>`` element (the
context a harness injects: environment, instructions, command output) are skipped and counted as
ignored. Every turn keeps its time and a ``ref`` back to the file and the message id (or line), so
re-ingesting a session file that has grown adds only the new turns. A last line still being written
(no newline yet, not JSON yet) is left for the next ingest.
"""

from __future__ import annotations

import json
import re

from memcli.errors import InputError
from memcli.transcripts import Parsed, Turn, json_lines, parse_time

_INJECTED = re.compile(r"^\s*<([A-Za-z][\w-]*)(?:\s[^>]*)?>.*</\1>\s*$", re.S)
_SNIFF_LINES = 20


def _text_parts(content, kinds: tuple[str, ...]) -> str:
    """The text of a message's content: a string, or the parts of the given types."""
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [p["text"] for p in content
                 if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)]
    else:
        parts = []
    kept = [p.strip() for p in parts if p.strip() and not _INJECTED.match(p)]
    return "\n".join(kept)


def _lines(text: str, source: str):
    """(line number, record) for each line of a session log; a last line still being written is left out."""
    for lineno, obj in json_lines(text, source, unfinished_last=True):
        if not isinstance(obj, dict):
            raise InputError(source, f"a JSON {type(obj).__name__} is not a session record", where=f"line {lineno}")
        yield lineno, obj


def _first_records(text: str) -> list[dict]:
    out = []
    for line in text.lstrip().split("\n", _SNIFF_LINES)[:_SNIFF_LINES]:
        if len(line) > 1_000_000:  # one huge JSON document, not a session log
            break
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _time(value, source: str, where: str, default: str) -> tuple[str, bool]:
    if value is None or value == "":
        return default, False
    return parse_time(value, source, where), True


# ---------------------------------------------------------------- Claude Code

def sniff_claude_code(text: str, data) -> bool:
    return data is None and any(r.get("type") in ("user", "assistant") and isinstance(r.get("message"), dict)
                                and ("sessionId" in r or "uuid" in r) for r in _first_records(text))


def parse_claude_code(text, data, source, *, default_time, conv=None, **_) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    turns, ignored = [], 0
    for lineno, rec in _lines(text, source):
        kind = rec.get("type")
        message = rec.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict) or rec.get("isSidechain") \
                or rec.get("isMeta"):
            ignored += 1
            continue
        body = _text_parts(message.get("content"), ("text",))
        if not body:  # tool calls, tool results, thinking
            ignored += 1
            continue
        where = f"line {lineno}"
        when, given = _time(rec.get("timestamp"), source, f"{where}.timestamp", default_time)
        session = rec.get("sessionId") if isinstance(rec.get("sessionId"), str) else None
        turns.append(Turn(text=body, time=when, speaker="assistant" if kind == "assistant" else "user",
                          source="AI" if kind == "assistant" else None,
                          ref=f"{base}#{rec['uuid']}" if isinstance(rec.get("uuid"), str) else f"{base}:{lineno}",
                          conv=conv or session or base, time_given=given))
    return Parsed("claude-code", turns, ignored)


# ---------------------------------------------------------------- Codex CLI

_CODEX_KINDS = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")


def sniff_codex(text: str, data) -> bool:
    return data is None and any(r.get("type") in _CODEX_KINDS and isinstance(r.get("payload"), dict)
                                for r in _first_records(text))


def parse_codex(text, data, source, *, default_time, conv=None, **_) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    turns, ignored = [], 0
    session = None
    for lineno, rec in _lines(text, source):
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            ignored += 1
            continue
        if rec.get("type") == "session_meta" and isinstance(payload.get("id"), str):
            session = payload["id"]
        role = payload.get("role")
        if rec.get("type") != "response_item" or payload.get("type") != "message" or role not in ("user", "assistant"):
            ignored += 1  # reasoning, tool calls and outputs, events (which repeat the messages), metadata
            continue
        body = _text_parts(payload.get("content"), ("input_text", "output_text", "text"))
        if not body:
            ignored += 1
            continue
        where = f"line {lineno}"
        when, given = _time(rec.get("timestamp"), source, f"{where}.timestamp", default_time)
        turns.append(Turn(text=body, time=when, speaker=role, source="AI" if role == "assistant" else None,
                          ref=f"{base}:{lineno}", conv=conv or session or base, time_given=given))
    return Parsed("codex", turns, ignored)


# ---------------------------------------------------------------- ChatGPT export

def _conversations(data, key: str) -> list | None:
    if isinstance(data, dict) and key in data:
        data = [data]
    if isinstance(data, list) and data and all(isinstance(c, dict) and key in c for c in data):
        return data
    return None


def sniff_chatgpt(text: str, data) -> bool:
    return _conversations(data, "mapping") is not None


def _branch(conversation: dict, source: str, where: str) -> list[dict]:
    """The nodes from the root to the conversation's current node (the branch the user last saw)."""
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise InputError(source, "mapping is not an object", where=where)
    node_id = conversation.get("current_node")
    if node_id is None:  # no current node: follow the first child from the root
        roots = [k for k, n in mapping.items() if isinstance(n, dict) and not n.get("parent")]
        path, node_id = [], roots[0] if roots else None
        while node_id is not None:
            node = mapping.get(node_id)
            if not isinstance(node, dict) or len(path) > len(mapping):
                raise InputError(source, f"node {str(node_id)[:60]!r} is broken", where=where)
            path.append(node)
            children = node.get("children") or []
            node_id = children[0] if isinstance(children, list) and children else None
        return path
    path, seen = [], set()
    while node_id is not None:
        if node_id in seen:
            raise InputError(source, "the message tree has a cycle", where=where)
        seen.add(node_id)
        node = mapping.get(node_id) if isinstance(node_id, str) else None
        if not isinstance(node, dict):
            raise InputError(source, f"node {str(node_id)[:60]!r} is missing from the mapping", where=where)
        path.append(node)
        node_id = node.get("parent")
    return path[::-1]


def parse_chatgpt(text, data, source, *, default_time, conv=None, **_) -> Parsed:
    turns, ignored = [], 0
    for number, conversation in enumerate(_conversations(data, "mapping") or [], 1):
        where = f"conversation {number}"
        cid = conversation.get("conversation_id") or conversation.get("id") or f"conversation-{number}"
        start, _given = _time(conversation.get("create_time"), source, f"{where}.create_time", default_time)
        for node in _branch(conversation, source, where):
            message = node.get("message")
            if message is None:
                continue
            if not isinstance(message, dict):
                raise InputError(source, "message is not an object", where=f"{where}, node {node.get('id')}")
            author = message.get("author") if isinstance(message.get("author"), dict) else {}
            role = author.get("role")
            content = message.get("content") if isinstance(message.get("content"), dict) else {}
            hidden = (message.get("metadata") or {}).get("is_visually_hidden_from_conversation") \
                if isinstance(message.get("metadata"), dict) else False
            parts = content.get("parts") if content.get("content_type") in ("text", "multimodal_text") else None
            body = "\n".join(p.strip() for p in parts or [] if isinstance(p, str) and p.strip())
            if role not in ("user", "assistant") or hidden or not body or _INJECTED.match(body):
                ignored += 1
                continue
            when, given = _time(message.get("create_time"), source, f"{where}.create_time", start)
            turns.append(Turn(text=body, time=when, speaker=role, source="AI" if role == "assistant" else None,
                              ref=f"{cid}#{message.get('id') or node.get('id')}", conv=conv or str(cid),
                              time_given=given or _given))
    return Parsed("chatgpt", turns, ignored)


# ---------------------------------------------------------------- Claude.ai export

def sniff_claude_ai(text: str, data) -> bool:
    return _conversations(data, "chat_messages") is not None


def parse_claude_ai(text, data, source, *, default_time, conv=None, **_) -> Parsed:
    turns, ignored = [], 0
    for number, conversation in enumerate(_conversations(data, "chat_messages") or [], 1):
        where = f"conversation {number}"
        cid = conversation.get("uuid") or f"conversation-{number}"
        messages = conversation.get("chat_messages")
        if not isinstance(messages, list):
            raise InputError(source, "chat_messages is not a list", where=where)
        for index, message in enumerate(messages, 1):
            if not isinstance(message, dict):
                raise InputError(source, "a message is not an object", where=f"{where}, message {index}")
            sender = message.get("sender")
            body = _text_parts(message.get("content"), ("text",)) or _text_parts(message.get("text"), ())
            if sender not in ("human", "assistant") or not body:
                ignored += 1
                continue
            when, given = _time(message.get("created_at"), source, f"{where}, message {index}.created_at",
                                default_time)
            role = "user" if sender == "human" else "assistant"
            turns.append(Turn(text=body, time=when, speaker=role, source="AI" if role == "assistant" else None,
                              ref=f"{cid}#{message.get('uuid') or index}", conv=conv or str(cid), time_given=given))
    return Parsed("claude-ai", turns, ignored)


def identity(fmt: str):
    """A turn of a session or export is the same turn again when its ref (file and message id or line)
    and text are: a grown file adds only its new turns."""
    return lambda turn, base: [fmt, turn.conv, turn.ref, turn.speaker, turn.text]
