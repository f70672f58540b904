"""Sessions of the agents beside Claude Code and Codex: Gemini CLI (its saved chats, JSON or JSON lines,
and its ``--output-format stream-json``), pi (session files of every version and ``--mode json``),
Claude Managed Agents (a session's events: the list endpoint's JSON, JSON lines or server-sent
events) and OpenCode (``opencode export``).

As for the other sessions (:mod:`memcli.ingest.sessions`): the user's and the assistant's text become
memories; tool calls and results, thinking, summaries the harness wrote (compaction and branch
summaries), model and status changes are counted as ignored; what the harness wrote into a message is
taken out (:mod:`memcli.ingest.harness`). Where a format keeps a tree or rewinds (pi's branches,
Gemini's ``$rewindTo``), the branch the user last saw is the one kept. A turn with its own message id
is identified by it, so a resumed or migrated session adds nothing.
"""

from __future__ import annotations

from memcli import parsing
from memcli.errors import InputError
from memcli.ingest.sessions import _first_records, _joined, _lines, _record_turn, _time
from memcli.ingest.turns import Parsed, Turn

_GEMINI_KINDS = ("user", "gemini", "info", "error", "warning")


def _parts_text(content, keep_harness: bool) -> str:
    """The text of a content that is a string, one part or a list of parts; parts that are thoughts,
    tool calls or tool results hold no text of the conversation."""
    if isinstance(content, str):
        return _joined([content], keep_harness)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts = [p.get("text") for p in content if isinstance(p, dict) and not p.get("thought")
             and p.get("type", "text") == "text" and not p.get("synthetic") and not p.get("ignored")]
    return _joined(texts, keep_harness)


def _seconds(stamp):
    """A time as given, epoch milliseconds (what pi and OpenCode write) made seconds."""
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and abs(stamp) > 1e11:
        return stamp / 1000
    return stamp


def _said(role: str) -> dict:
    """The speaker fields of a user's or an assistant's message."""
    return {"speaker": "assistant", "source": "AI"} if role == "assistant" else {"speaker": "user"}


# ---------------------------------------------------------------- Gemini CLI chats

def _is_gemini_record(rec: dict) -> bool:
    return ("sessionId" in rec and "projectHash" in rec) or "$rewindTo" in rec or (
        isinstance(rec.get("$set"), dict)) or (isinstance(rec.get("id"), str) and rec.get("type") in _GEMINI_KINDS
                                               and "content" in rec and "message" not in rec)


def sniff_gemini(text: str, data) -> bool:
    if isinstance(data, dict):
        return "sessionId" in data and isinstance(data.get("messages"), list) and all(
            isinstance(m, dict) and m.get("type") in _GEMINI_KINDS for m in data["messages"])
    return data is None and any(_is_gemini_record(r) for r in _first_records(text))


def _gemini_messages(text: str, data, rejected: list) -> tuple[dict, list[tuple[str, dict]]]:
    """The session's metadata and its messages as the Gemini CLI would load them: (where, message).
    JSON lines replay: a message again under its id replaces it (the last copy wins), ``$rewindTo``
    drops that message and every later one, ``$set`` updates the metadata (its ``messages``, when
    given, are the whole list)."""
    if isinstance(data, dict):
        return data, [(f"message {i}", m) for i, m in enumerate(data.get("messages") or [], 1)]
    meta: dict = {}
    messages: dict[str, tuple[str, dict]] = {}
    for lineno, rec in _lines(text, rejected):
        if isinstance(rec.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(rec["$rewindTo"]) if rec["$rewindTo"] in messages else 0
            for gone in ids[cut:]:
                del messages[gone]
        elif isinstance(rec.get("$set"), dict):
            meta.update(rec["$set"])
        elif isinstance(rec.get("id"), str) and "type" in rec:
            messages[rec["id"]] = (f"line {lineno}", rec)
        elif "sessionId" in rec:
            meta.update(rec)
    if isinstance(meta.get("messages"), list) and meta["messages"]:
        return meta, [(f"$set message {i}", m) for i, m in enumerate(meta["messages"], 1) if isinstance(m, dict)]
    return meta, list(messages.values())


def parse_gemini(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    rejected: list = []
    meta, messages = _gemini_messages(text, data, rejected)
    session = meta.get("sessionId") if isinstance(meta.get("sessionId"), str) else None
    start = default_time  # a message without its time: the session's start, else the ingest's time
    try:
        start = _time(meta.get("startTime"), source, "startTime", default_time)[0]
    except InputError:
        pass
    turns, ignored = [], 0
    for where, message in messages:
        kind = message.get("type")
        body = _parts_text(message.get("content"), keep_harness) if kind in ("user", "gemini") else ""
        if not body:  # info, errors, warnings, tool responses, a reply that only called tools
            ignored += 1
            continue
        mid = message.get("id") if isinstance(message.get("id"), str) else None
        _record_turn(turns, rejected, message.get("timestamp"), where, "timestamp", source, start, text=body,
                     **_said("assistant" if kind == "gemini" else "user"), conv=conv or session or base,
                     ref=f"{base}#{mid}" if mid else f"{base}:{where}", uid=mid and f"gemini:{session or base}#{mid}")
    return Parsed("gemini", turns, ignored, rejected)


# ---------------------------------------------------------------- Gemini CLI --output-format stream-json

def sniff_gemini_stream(text: str, data) -> bool:
    return data is None and any(r.get("type") == "init" and "session_id" in r for r in _first_records(text))


def parse_gemini_stream(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    """``message`` events, an assistant's ``delta`` chunks joined into one reply (a tool call ends it)."""
    base = source.rsplit("/", 1)[-1]
    turns, ignored, rejected = [], 0, []
    session, reply = None, None  # reply: (its first line, that record, the chunks so far)

    def close():
        nonlocal reply, ignored
        if reply is None:
            return
        lineno, rec, chunks = reply
        reply = None
        body = _joined(["".join(chunks)], keep_harness)
        if not body:
            ignored += 1
            return
        _record_turn(turns, rejected, rec.get("timestamp"), f"line {lineno}", "timestamp", source, default_time,
                     text=body, **_said("assistant"), ref=f"{base}:{lineno}", conv=conv or session or base)

    for lineno, rec in _lines(text, rejected):
        kind = rec.get("type")
        if kind == "init" and isinstance(rec.get("session_id"), str):
            session = rec["session_id"]
        if kind == "message" and rec.get("role") == "assistant" and isinstance(rec.get("content"), str):
            if reply is None or not rec.get("delta"):
                close()
                reply = (lineno, rec, [])
            reply[2].append(rec["content"])
            continue
        close()
        body = _joined([rec["content"]], keep_harness) \
            if kind == "message" and rec.get("role") == "user" and isinstance(rec.get("content"), str) else ""
        if not body:
            ignored += 1
            continue
        _record_turn(turns, rejected, rec.get("timestamp"), f"line {lineno}", "timestamp", source, default_time,
                     text=body, **_said("user"), ref=f"{base}:{lineno}", conv=conv or session or base)
    close()
    return Parsed("gemini-stream", turns, ignored, rejected)


# ---------------------------------------------------------------- pi

def sniff_pi(text: str, data) -> bool:
    records = _first_records(text)
    return data is None and bool(records) and records[0].get("type") == "session" and (
        "cwd" in records[0] or "version" in records[0]) and "message" not in records[0]


def _pi_branch(records: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """The entries on the path from the session's last entry to its root (pi's current branch), in
    order; a version 1 session (no ids) is one line of entries. An entry whose parent is not among
    the records that parsed (a damaged line) continues the path at the entry written just before it
    in the file, which is where pi appends a branch's next entry: one bad record costs itself, not
    everything before it."""
    by_id = {r["id"]: (n, r) for n, r in records if isinstance(r.get("id"), str)}
    if not by_id:
        return records
    order = [r for _, r in records if isinstance(r.get("id"), str)]
    place = {id(r): at for at, r in enumerate(order)}
    leaf = order[-1]
    path, seen = [], set()
    while leaf is not None and leaf["id"] not in seen:
        seen.add(leaf["id"])
        path.append(by_id[leaf["id"]])
        parent = leaf.get("parentId")
        if isinstance(parent, str) and parent in by_id:
            leaf = by_id[parent][1]
        elif isinstance(parent, str) and parent and place[id(leaf)] > 0:
            leaf = order[place[id(leaf)] - 1]  # its parent's line did not parse
        else:
            leaf = None
    kept = {id(r) for _, r in path}
    return [(n, r) for n, r in records if id(r) in kept or not isinstance(r.get("id"), str)]


def parse_pi(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    rejected: list = []
    records = list(_lines(text, rejected))
    session = next((r["id"] for _, r in records if r.get("type") == "session" and isinstance(r.get("id"), str)), None)
    conv = conv or session or base
    turns: list[Turn] = []
    branch = _pi_branch([(n, r) for n, r in records if r.get("type") != "session"])
    for lineno, rec in branch:
        message = rec.get("message")
        if rec.get("type") not in ("message", "message_end") or not isinstance(message, dict) \
                or message.get("role") not in ("user", "assistant"):
            continue  # tool results, shell runs, summaries, model changes, stream events
        body = _parts_text(message.get("content"), keep_harness)
        if not body:
            continue
        entry = rec.get("id") if isinstance(rec.get("id"), str) else None
        stamp = rec["timestamp"] if "timestamp" in rec else _seconds(message.get("timestamp"))
        _record_turn(turns, rejected, stamp, f"line {lineno}", "timestamp", source, default_time, text=body,
                     **_said(message["role"]), ref=f"{base}#{entry}" if entry else f"{base}:{lineno}", conv=conv,
                     uid=entry and f"pi:{session or base}#{entry}")
    entries = sum(1 for _, r in records if r.get("type") != "session")
    return Parsed("pi", turns, entries - len(turns), rejected)


# ---------------------------------------------------------------- Claude Managed Agents events

_MANAGED_PREFIXES = ("user.", "agent.", "session.", "span.")


def _managed_events(text: str, data, rejected: list) -> list[tuple[str, dict]]:
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if isinstance(data, list):
        return [(f"event {i}", e) for i, e in enumerate(data, 1) if isinstance(e, dict)]
    if text.lstrip().startswith(("event:", "data:", "id:", ":")):  # server-sent events
        events = []
        for lineno, line in enumerate(text.split("\n"), 1):
            if line.startswith("data:"):
                try:
                    event = parsing.loads(line[5:])
                except (ValueError, RecursionError):
                    rejected.append((f"line {lineno}", "the data of an event is not JSON"))
                    continue
                if isinstance(event, dict):
                    events.append((f"line {lineno}", event))
        return events
    return [(f"line {n}", r) for n, r in _lines(text, rejected)]


def _is_managed_event(event) -> bool:
    return isinstance(event, dict) and isinstance(event.get("type"), str) and event["type"].startswith(
        _MANAGED_PREFIXES) and ("processed_at" in event or str(event.get("id", "")).startswith("sevt_"))


def sniff_managed_agents(text: str, data) -> bool:
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if isinstance(data, list):
        return bool(data) and any(_is_managed_event(e) for e in data[:20])
    if data is None and text.lstrip().startswith(("event:", "data:")):
        return _is_managed_event(next((e for _, e in _managed_events(text[:200_000], None, [])), None))
    return data is None and any(_is_managed_event(r) for r in _first_records(text))


def parse_managed_agents(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    """``user.message`` and ``agent.message`` events (the whole message; streamed deltas, thinking,
    tool use, threads between agents and status events are ignored)."""
    base = source.rsplit("/", 1)[-1]
    rejected: list = []
    turns, ignored, seen = [], 0, set()
    for where, event in _managed_events(text, data, rejected):
        kind = event.get("type")
        body = _parts_text(event.get("content"), keep_harness) if kind in ("user.message", "agent.message") else ""
        eid = event.get("id") if isinstance(event.get("id"), str) else None
        if not body or (eid and eid in seen):  # a stream replayed after a reconnect repeats events
            ignored += 1
            continue
        seen.add(eid)
        _record_turn(turns, rejected, event.get("processed_at"), where, "processed_at", source, default_time,
                     text=body, **_said("assistant" if kind == "agent.message" else "user"), conv=conv or base,
                     ref=f"{base}#{eid}" if eid else f"{base}:{where}", uid=eid and f"managed-agents:{eid}")
    return Parsed("managed-agents", turns, ignored, rejected)


# ---------------------------------------------------------------- OpenCode export

def sniff_opencode(text: str, data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("info"), dict) and isinstance(data.get("messages"), list) \
        and all(isinstance(m, dict) and isinstance(m.get("info"), dict) and "parts" in m for m in data["messages"])


def parse_opencode(text, data, source, *, default_time, conv=None, keep_harness=False, **_) -> Parsed:
    """Each message's text parts (parts the harness added, ``synthetic``, and tool, reasoning, file,
    step and patch parts are left out)."""
    if not isinstance(data, dict) or not isinstance(data.get("info"), dict) or not isinstance(data.get("messages"), list):
        raise InputError(source, 'not an OpenCode export (a JSON object with "info" and a "messages" list)',
                         where="top level")
    base = source.rsplit("/", 1)[-1]
    session = data["info"].get("id") if isinstance(data["info"].get("id"), str) else None
    turns, ignored, rejected = [], 0, []
    for number, message in enumerate(data["messages"], 1):
        info = message.get("info") if isinstance(message, dict) else None
        if not isinstance(info, dict):
            rejected.append((f"message {number}", 'not an OpenCode message (no "info" object)'))
            continue
        role = info.get("role")
        body = _parts_text(message.get("parts"), keep_harness) if role in ("user", "assistant") else ""
        if not body:
            ignored += 1
            continue
        mid = info.get("id") if isinstance(info.get("id"), str) else None
        created = info.get("time", {}).get("created") if isinstance(info.get("time"), dict) else None
        where = f"message {number}"
        _record_turn(turns, rejected, _seconds(created), where, "time.created", source, default_time, text=body,
                     **_said(role), ref=f"{base}#{mid}" if mid else f"{base}:{where}", conv=conv or session or base,
                     uid=mid and f"opencode:{mid}")
    return Parsed("opencode", turns, ignored, rejected)
