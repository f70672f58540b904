"""Transcripts that agents and chat apps write: Claude Code and Codex CLI sessions (JSONL), ChatGPT
and Claude.ai data exports (``conversations.json``); the other agents' are in :mod:`memcli.ingest.agents`.

What becomes a memory: the user's and the assistant's text. Tool calls, tool results, reasoning,
system and developer messages and ChatGPT messages addressed to a tool are skipped and counted as
ignored; what the harness wrote into a message (instruction files, context blocks, slash-command
wrappers, citation markers: :mod:`memcli.ingest.harness`) is taken out of it, and a message that held
nothing else is ignored too (``keep_harness`` keeps it all). Every turn keeps its time and a ``ref`` back to the file and the message id (or line), so
re-ingesting a session file that has grown adds only the new turns. A last line still being written
(no newline yet, not JSON yet) is left for the next ingest.
"""

from __future__ import annotations

import json

from memcli import parsing
from memcli.errors import InputError
from memcli.ingest.harness import clean
from memcli.ingest.turns import Parsed, Turn, parse_time

_SNIFF_LINES = 20


def _joined(parts, keep_harness: bool) -> str:
    """The text parts of one message, each cleaned of harness text (unless ``keep_harness``), joined."""
    texts = [p if keep_harness else clean(p) for p in parts if isinstance(p, str)]
    return "\n".join(t.strip() for t in texts if t.strip())


def _text_parts(content, kinds: tuple[str, ...], keep_harness: bool) -> str:
    """The text of a message's content: a string, or the parts of the given types."""
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, list):
        parts = [p["text"] for p in content
                 if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)]
    else:
        parts = []
    return _joined(parts, keep_harness)


def _lines(text: str, rejected: list[tuple[str, str]]):
    """(line number, record) for each line of a session log. A line that is not a JSON object is left
    out and noted in ``rejected``; a last line still being written (no newline yet) is left for the
    next ingest."""
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = parsing.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines) and not text.endswith("\n"):
                return
            rejected.append((f"line {lineno}", f"invalid JSON: {exc.msg}"))
            continue
        except RecursionError:
            rejected.append((f"line {lineno}", "nested too deeply"))
            continue
        if not isinstance(obj, dict):
            name = type(obj).__name__ if obj is not None else "null"
            rejected.append((f"line {lineno}", f"a JSON {name} is not a session record"))
            continue
        yield lineno, obj


def _kept(rejected: list[tuple[str, str]], where: str, work) -> bool:
    """Runs ``work()``; a record it finds bad (InputError) is noted in ``rejected`` instead of refusing
    the whole input. Whether it went through."""
    try:
        work()
    except InputError as exc:
        rejected.append((exc.where or where, exc.reason))
        return False
    return True


def _record_turn(turns: list[Turn], rejected: list[tuple[str, str]], stamp, where: str, field: str,
                 input_name: str, default_time: str, /, **fields) -> None:
    """Appends the turn of the record at ``where`` (``line 12``, ``event 3``), timed by ``stamp`` (its
    ``field``; none: ``default_time``); a record whose time is bad is noted in ``rejected`` instead."""
    def turn():
        when, given = _time(stamp, input_name, f"{where}.{field}", default_time)
        turns.append(Turn(time=when, time_given=given, **fields))

    _kept(rejected, where, turn)


def _first_records(text: str) -> list[dict]:
    out = []
    for line in text.lstrip().split("\n", _SNIFF_LINES)[:_SNIFF_LINES]:
        if len(line) > 1_000_000:  # one huge JSON document, not a session log
            break
        try:
            obj = parsing.loads(line)
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


def parse_claude_code(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    turns, ignored, rejected = [], 0, []
    for lineno, rec in _lines(text, rejected):
        kind = rec.get("type")
        message = rec.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict) or rec.get("isSidechain") \
                or rec.get("isMeta") or rec.get("isCompactSummary"):  # the summary a compaction wrote
            ignored += 1
            continue
        body = _text_parts(message.get("content"), ("text",), keep_harness)
        if not body:  # tool calls, tool results, thinking, harness text
            ignored += 1
            continue
        session = rec.get("sessionId") if isinstance(rec.get("sessionId"), str) else None
        uuid = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        _record_turn(turns, rejected, rec.get("timestamp"), f"line {lineno}", "timestamp", source, default_time,
                     text=body, speaker="assistant" if kind == "assistant" else "user",
                     source="AI" if kind == "assistant" else None,
                     ref=f"{base}#{uuid}" if uuid else f"{base}:{lineno}",
                     conv=conv or session or base, uid=uuid and f"claude-code:{uuid}")
    return Parsed("claude-code", turns, ignored, rejected)


# ---------------------------------------------------------------- Codex CLI

_CODEX_KINDS = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")


def sniff_codex(text: str, data) -> bool:
    return data is None and any(r.get("type") in _CODEX_KINDS and isinstance(r.get("payload"), dict)
                                for r in _first_records(text))


def parse_codex(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    turns, ignored, rejected = [], 0, []
    session = None
    for lineno, rec in _lines(text, rejected):
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
        body = _text_parts(payload.get("content"), ("input_text", "output_text", "text"), keep_harness)
        if not body:
            ignored += 1
            continue
        item = payload.get("id") if isinstance(payload.get("id"), str) else None
        _record_turn(turns, rejected, rec.get("timestamp"), f"line {lineno}", "timestamp", source, default_time,
                     text=body, speaker=role, source="AI" if role == "assistant" else None,
                     ref=f"{base}:{lineno}", conv=conv or session or base, uid=item and f"codex:{item}")
    return Parsed("codex", turns, ignored, rejected)


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
    if node_id is not None and not isinstance(node_id, str):
        raise InputError(source, f"current_node is a JSON {type(node_id).__name__}, not a node id", where=where)
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
            if node_id is not None and not isinstance(node_id, str):
                raise InputError(source, f"a child of node {str(path[-1].get('id'))[:60]!r} is not a node id",
                                 where=where)
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
        if node_id is not None and not isinstance(node_id, str):
            raise InputError(source, f"the parent of node {str(node.get('id'))[:60]!r} is not a node id", where=where)
    return path[::-1]


def parse_chatgpt(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    turns, ignored, rejected = [], 0, []
    for number, conversation in enumerate(_conversations(data, "mapping") or [], 1):
        found: list[Turn | None] = []
        if _kept(rejected, f"conversation {number}",
                 lambda: _chatgpt_conversation(conversation, number, source, default_time, conv, found,
                                               keep_harness)):
            turns += [t for t in found if t is not None]
            ignored += sum(1 for t in found if t is None)
    return Parsed("chatgpt", turns, ignored, rejected)


def _chatgpt_conversation(conversation: dict, number: int, source: str, default_time: str, conv,
                          out: list[Turn | None], keep_harness: bool) -> None:
    """The turns of one ChatGPT conversation along its current branch, appended to ``out`` (None for
    each message that is not a memory: not the user's or the assistant's, hidden, or an assistant
    message addressed to a tool, such as an image generator's prompt); a broken conversation raises
    InputError."""
    where = f"conversation {number}"
    cid = conversation.get("conversation_id") or conversation.get("id") or f"conversation-{number}"
    if not isinstance(cid, (str, int)):
        raise InputError(source, "the conversation id is not a string", where=where)
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
        body = _joined(parts if isinstance(parts, list) else [], keep_harness)
        to_tool = message.get("recipient") not in (None, "all") and not keep_harness
        if role not in ("user", "assistant") or hidden or not body or to_tool:
            out.append(None)
            continue
        when, given = _time(message.get("create_time"), source, f"{where}.create_time", start)
        node_id = message.get("id") or node.get("id")
        out.append(Turn(text=body, time=when, speaker=role, source="AI" if role == "assistant" else None,
                        ref=f"{cid}#{node_id}", conv=conv or str(cid), time_given=given or _given,
                        uid=f"chatgpt:{cid}#{node_id}" if isinstance(node_id, str) else None))


# ---------------------------------------------------------------- Claude.ai export

def sniff_claude_ai(text: str, data) -> bool:
    return _conversations(data, "chat_messages") is not None


def parse_claude_ai(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    turns, ignored, rejected = [], 0, []
    for number, conversation in enumerate(_conversations(data, "chat_messages") or [], 1):
        where = f"conversation {number}"
        cid = conversation.get("uuid") or f"conversation-{number}"
        messages = conversation.get("chat_messages")
        if not isinstance(messages, list):
            rejected.append((where, "chat_messages is not a list"))
            continue
        for index, message in enumerate(messages, 1):
            if not isinstance(message, dict):
                rejected.append((f"{where}, message {index}", "a message is not an object"))
                continue
            sender = message.get("sender")
            body = (_text_parts(message.get("content"), ("text",), keep_harness)
                    or _text_parts(message.get("text"), (), keep_harness))
            if sender not in ("human", "assistant") or not body:
                ignored += 1
                continue

            def turn():
                when, given = _time(message.get("created_at"), source, f"{where}, message {index}.created_at",
                                    default_time)
                role = "user" if sender == "human" else "assistant"
                uuid = message.get("uuid") if isinstance(message.get("uuid"), str) else None
                turns.append(Turn(text=body, time=when, speaker=role, source="AI" if role == "assistant" else None,
                                  ref=f"{cid}#{uuid or index}", conv=conv or str(cid), time_given=given,
                                  uid=uuid and f"claude-ai:{uuid}"))

            _kept(rejected, f"{where}, message {index}", turn)
    return Parsed("claude-ai", turns, ignored, rejected)


def identity(fmt: str):
    """A turn of a session or export is the same turn again when its message id is (Claude Code's uuid,
    Codex's item id, a ChatGPT node, a Claude.ai message: a resumed session that replays its history
    into a new file, or a record written twice, adds nothing), else when its ref (file and line) and
    text are: a grown file adds only its new turns."""
    by_file = by_ref(fmt)
    return lambda turn, base: [fmt, turn.uid, turn.speaker, turn.text] if turn.uid else by_file(turn, base)


def by_ref(fmt: str):
    """A turn's identity by its ref (file and message id or line), conversation and text: the only
    identity before message ids were used, and still the one of turns without an id."""
    return lambda turn, base: [fmt, turn.conv, turn.ref, turn.speaker, turn.text]
