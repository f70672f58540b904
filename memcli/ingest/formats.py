"""Transcript formats -> turns.

Supported shapes (detected, or forced with ``--format``):

* ``locomo``: a LoCoMo conversation object (``speaker_a``, ``session_N``,
  ``session_N_date_time``), a sample (``{"sample_id", "conversation", ...}``)
  or the ``locomo10.json`` list of samples;
* ``chat``: a JSON list of ``{role, content}`` messages (optional ``name``,
  ``timestamp``) or ``{"messages": [...]}``, or of ``{speaker, text, time}`` messages;
* ``jsonl``: one chat message per line;
* ``text``: plain text or Markdown, one observation per paragraph.

Parsing never writes anything; every problem raises :class:`InputError`
naming the input and the place in it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from memcli import parsing
from memcli.errors import InputError
from memcli.ingest import agents, sessions
from memcli.ingest.turns import Parsed, Turn, json_lines, parse_time

MAX_ENTRY_CHARS = 20_000  # the default of ingest.max_entry_chars
SKIPPED_ROLES = ("system", "developer", "tool", "function")


# ---------------------------------------------------------------- detection helpers

def _json_error(source: str, exc: json.JSONDecodeError) -> InputError:
    return InputError(source, f"invalid JSON: {exc.msg}", where=f"line {exc.lineno}, column {exc.colno}")


def _is_locomo_conversation(obj) -> bool:
    return isinstance(obj, dict) and "speaker_a" in obj and any(
        re.fullmatch(r"session_\d+", k) for k in obj)


def _is_locomo_sample(obj) -> bool:
    return isinstance(obj, dict) and _is_locomo_conversation(obj.get("conversation"))


def _is_message(obj) -> bool:
    """A chat message: {role, content} (OpenAI's shape) or {speaker, text} (the one people write first)."""
    return isinstance(obj, dict) and (("role" in obj and "content" in obj) or ("speaker" in obj and "text" in obj))


# ---------------------------------------------------------------- LoCoMo

def locomo_samples(data, source: str) -> list[tuple[str, dict, list]]:
    """(sample id, conversation, questions) of each sample in a LoCoMo file (any of its shapes)."""
    if isinstance(data, list):
        samples = data
    elif _is_locomo_sample(data):
        samples = [data]
    else:
        default_id = re.sub(r"\.json$", "", source.rsplit("/", 1)[-1]) or "conversation"
        return [(str(data.get("sample_id") or default_id), data, _questions(data))]
    out = []
    for index, sample in enumerate(samples):
        if not _is_locomo_sample(sample):
            raise InputError(source, "not a LoCoMo sample (no 'conversation' with sessions)",
                             where=f"[{index}]")
        out.append((str(sample.get("sample_id") or f"sample-{index}"), sample["conversation"], _questions(sample)))
    return out


def _questions(obj: dict) -> list:
    qa = obj.get("qa")
    return qa if isinstance(qa, list) else []


def parse_locomo(data, source: str, sample: str | None = None) -> list[Turn]:
    samples = [(sid, conv) for sid, conv, _ in locomo_samples(data, source)]
    if sample is not None:
        chosen = [s for s in samples if s[0] == sample]
        if not chosen:
            ids = ", ".join(s[0] for s in samples)
            raise InputError(source, f"no sample {sample!r} (samples: {ids})")
        samples = chosen
    turns: list[Turn] = []
    for conv_id, conv in samples:
        prefix = f"[{conv_id}] " if len(samples) > 1 or isinstance(data, list) else ""
        sessions = sorted((int(k.split("_")[1]), k) for k in conv if re.fullmatch(r"session_\d{1,9}", k))
        for _, key in sessions:
            session = conv[key]
            if not isinstance(session, list):
                raise InputError(source, "session is not a list of turns", where=f"{prefix}{key}")
            if not session:
                continue
            if f"{key}_date_time" not in conv:
                raise InputError(source, "session has no date", where=f"{prefix}{key}_date_time")
            when = parse_time(conv[f"{key}_date_time"], source, f"{prefix}{key}_date_time")
            for index, turn in enumerate(session):
                where = f"{prefix}{key}[{index}]"
                if not isinstance(turn, dict):
                    raise InputError(source, "turn is not an object", where=where)
                text = turn.get("text")
                text = text.strip() if isinstance(text, str) else ""
                caption = turn.get("blip_caption")
                if isinstance(caption, str) and caption.strip():
                    text = f"{text} [shared an image: {caption.strip()}]".strip()
                if not text:
                    raise InputError(source, "turn has no text", where=where)
                speaker = turn.get("speaker")
                turns.append(Turn(
                    text=text, time=when,
                    speaker=str(speaker) if speaker else None,
                    ref=str(turn.get("dia_id") or f"{key}:{index + 1}"),
                    conv=conv_id,
                ))
    return turns


# ---------------------------------------------------------------- chat

def _content_text(content, source: str, where: str) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):  # OpenAI content parts
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(p.strip() for p in parts if p.strip())
    if content is None:
        return ""
    raise InputError(source, f"message content of type {type(content).__name__} is not text", where=where)


def _message_turn(message, source: str, where: str, default_time: str, conv: str | None) -> Turn | None:
    if not _is_message(message):
        raise InputError(source, "not a {role, content} or {speaker, text} message", where=where)
    if "role" not in message:
        return _spoken_turn(message, source, where, default_time, conv)
    if not isinstance(message["role"], str) or not message["role"].strip():
        raise InputError(source, f"role {str(message['role'])[:40]!r} is not a name", where=f"{where}.role")
    role = message["role"].strip().lower()
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise InputError(source, "name is not a string", where=f"{where}.name")
    if role in SKIPPED_ROLES:
        return None
    text = _content_text(message["content"], source, where)
    if not text:
        raise InputError(source, "message has no text", where=where)
    stamp = message.get("timestamp", message.get("time"))
    when = parse_time(stamp, source, f"{where}.timestamp") if stamp is not None else default_time
    return Turn(
        text=text, time=when,
        speaker=str(name) if name else role,
        source="AI" if role == "assistant" else None,
        ref=where, conv=conv, time_given=stamp is not None,
    )


def _spoken_turn(message: dict, source: str, where: str, default_time: str, conv: str | None) -> Turn:
    """A {speaker, text, time} message: the speaker is a person's name."""
    speaker = message["speaker"]
    if not isinstance(speaker, str) or not speaker.strip():
        raise InputError(source, f"speaker {str(speaker)[:40]!r} is not a name", where=f"{where}.speaker")
    text = _content_text(message["text"], source, where)
    if not text:
        raise InputError(source, "message has no text", where=where)
    stamp = message.get("time", message.get("timestamp"))
    when = parse_time(stamp, source, f"{where}.time") if stamp is not None else default_time
    return Turn(text=text, time=when, speaker=speaker.strip(), ref=where, conv=conv, time_given=stamp is not None)


def _messages(fmt: str, items, source: str, default_time: str, conv: str | None) -> Parsed:
    """Turns from (message, where) pairs; system and tool messages are counted, not kept."""
    turns, ignored = [], 0
    for message, where in items:
        turn = _message_turn(message, source, where, default_time, conv)
        if turn is None:
            ignored += 1
        else:
            turns.append(turn)
    return Parsed(fmt, turns, ignored)


def parse_chat(data, source: str, default_time: str, conv: str | None) -> Parsed:
    messages = data["messages"] if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise InputError(source, "expected a list of messages", where="top level")
    base = source.rsplit("/", 1)[-1]
    return _messages("chat", ((m, f"{base}#{i}") for i, m in enumerate(messages, 1)), source, default_time, conv)


def parse_jsonl(text: str, source: str, default_time: str, conv: str | None) -> Parsed:
    base = source.rsplit("/", 1)[-1]
    items = ((message, f"{base}:{lineno}") for lineno, message in json_lines(text, source))
    return _messages("jsonl", items, source, default_time, conv)


# ---------------------------------------------------------------- text

def parse_text(text: str, source: str, default_time: str, conv: str | None) -> Parsed:
    turns = []
    base = source.rsplit("/", 1)[-1]
    paragraph: list[str] = []
    start = 0
    lines = text.replace("\r\n", "\n").split("\n")
    for lineno, line in enumerate([*lines, ""], 1):
        if line.strip():
            if not paragraph:
                start = lineno
            paragraph.append(line.strip())
        elif paragraph:
            turns.append(Turn(text="\n".join(paragraph), time=default_time,
                              ref=f"{base}:{start}", conv=conv, time_given=False))
            paragraph = []
    return Parsed("text", turns)


# ---------------------------------------------------------------- the formats

@dataclass(frozen=True)
class TranscriptFormat:
    """One input format: how it is recognised, parsed, and how its turns are identified across ingests.

    ``extensions``: file names that settle the format; ``sniff(text, data)``: whether an input is
    this format (``data``: the decoded JSON, or None when the text is not one JSON document);
    ``parse(text, data, source, options)``: the turns; ``identity(turn, base)``: the parts of a turn
    that make it the same turn when the file is ingested again (``base``: the input's name).
    """

    name: str
    description: str
    extensions: tuple[str, ...]
    json_document: bool  # the whole input is one JSON document
    sniff: Callable[[str, object], bool]
    parse: Callable[..., Parsed]
    identity: Callable[[Turn, str], list]
    before_extensions: bool = False  # sniffed before file extensions decide (a session log named .jsonl)
    legacy_identity: Callable[[Turn, str], list] | None = None  # the identity of earlier releases, if it changed
    keeps_going: bool = False  # a bad record is left out and reported, the rest kept; a long turn is split


def _message_identity(fmt: str) -> Callable[[Turn, str], list]:
    return lambda turn, base: [fmt, turn.conv or base, turn.speaker, turn.source, turn.text,
                               turn.time if turn.time_given else None]


def _parse_locomo(text, data, source, *, sample=None, **_) -> Parsed:
    if not (_is_locomo_conversation(data) or _is_locomo_sample(data) or isinstance(data, list)):
        raise InputError(source, "not a LoCoMo conversation or sample list", where="top level")
    return Parsed("locomo", parse_locomo(data, source, sample))


def _parse_chat(text, data, source, *, default_time, conv=None, **_) -> Parsed:
    if not isinstance(data, (list, dict)) or (isinstance(data, dict) and "messages" not in data):
        raise InputError(source, "expected a list of messages or {\"messages\": [...]}", where="top level")
    return parse_chat(data, source, default_time, conv)


def _first_line_is_message(text: str, data) -> bool:
    try:
        return data is None and _is_message(parsing.loads(text.lstrip().split("\n", 1)[0]))
    except (ValueError, RecursionError):
        return False


REGISTRY: dict[str, TranscriptFormat] = {fmt.name: fmt for fmt in (
    TranscriptFormat(
        "claude-code", "a Claude Code session (~/.claude/projects/*/<session>.jsonl)", (), False,
        sessions.sniff_claude_code, sessions.parse_claude_code, sessions.identity("claude-code"),
        legacy_identity=sessions.by_ref("claude-code"), keeps_going=True,
        before_extensions=True),
    TranscriptFormat(
        "codex", "a Codex CLI session (~/.codex/sessions/.../rollout-*.jsonl)", (), False,
        sessions.sniff_codex, sessions.parse_codex, sessions.identity("codex"),
        legacy_identity=sessions.by_ref("codex"), keeps_going=True, before_extensions=True),
    TranscriptFormat(
        "gemini", "a Gemini CLI chat (~/.gemini/tmp/*/chats/session-*.json or .jsonl)", (), False,
        agents.sniff_gemini, agents.parse_gemini, sessions.identity("gemini"), keeps_going=True,
        before_extensions=True),
    TranscriptFormat(
        "gemini-stream", "Gemini CLI output of --output-format stream-json", (), False,
        agents.sniff_gemini_stream, agents.parse_gemini_stream, sessions.by_ref("gemini-stream"),
        keeps_going=True, before_extensions=True),
    TranscriptFormat(
        "pi", "a pi agent session (~/.pi/agent/sessions/*/*.jsonl) or pi --mode json output", (), False,
        agents.sniff_pi, agents.parse_pi, sessions.identity("pi"), keeps_going=True, before_extensions=True),
    TranscriptFormat(
        "managed-agents", "a Claude Managed Agents session's events (the list's JSON, JSON lines or the stream)",
        (), False, agents.sniff_managed_agents, agents.parse_managed_agents, sessions.identity("managed-agents"),
        keeps_going=True, before_extensions=True),
    TranscriptFormat(
        "opencode", "an OpenCode session (opencode export)", (), True,
        agents.sniff_opencode, agents.parse_opencode, sessions.identity("opencode"), keeps_going=True),
    TranscriptFormat(
        "chatgpt", "a ChatGPT data export's conversations.json", (), True,
        sessions.sniff_chatgpt, sessions.parse_chatgpt, sessions.identity("chatgpt"),
        legacy_identity=sessions.by_ref("chatgpt"), keeps_going=True),
    TranscriptFormat(
        "claude-ai", "a Claude.ai data export's conversations.json", (), True,
        sessions.sniff_claude_ai, sessions.parse_claude_ai, sessions.identity("claude-ai"),
        legacy_identity=sessions.by_ref("claude-ai"), keeps_going=True),
    TranscriptFormat(
        "locomo", "a LoCoMo conversation, sample, or the locomo10.json sample list", (), True,
        lambda text, data: _is_locomo_conversation(data) or _is_locomo_sample(data) or (
            isinstance(data, list) and bool(data) and all(_is_locomo_sample(s) for s in data)),
        _parse_locomo,
        lambda turn, base: ["locomo", turn.conv, turn.ref, turn.speaker, turn.text]),
    TranscriptFormat(
        "chat", 'a JSON list of {role, content} or {speaker, text, time} messages, or {"messages": [...]}', (), True,
        lambda text, data: (isinstance(data, dict) and isinstance(data.get("messages"), list)
                            and all(_is_message(m) for m in data["messages"])) or (
            isinstance(data, list) and bool(data) and all(_is_message(m) for m in data)),
        _parse_chat, _message_identity("chat")),
    TranscriptFormat(
        "jsonl", "one chat message per line", (".jsonl", ".ndjson"), False, _first_line_is_message,
        lambda text, data, source, *, default_time, conv=None, **_: parse_jsonl(text, source, default_time, conv),
        _message_identity("jsonl")),
    TranscriptFormat(
        "text", "plain text or Markdown, one entry per paragraph", (".md", ".markdown", ".txt"), False,
        lambda text, data: text.lstrip()[:1] not in ("[", "{"),
        lambda text, data, source, *, default_time, conv=None, **_: parse_text(text, source, default_time, conv),
        _message_identity("text")),
)}
FORMATS = tuple(REGISTRY)


def detect(text: str, name: str) -> tuple[str, object]:
    """(format, decoded JSON or None) for an input's text: its file name first, then its content."""
    lowered = name.lower()
    for fmt in REGISTRY.values():
        if fmt.before_extensions and fmt.sniff(text, None):
            return fmt.name, None
    for fmt in REGISTRY.values():
        if lowered.endswith(fmt.extensions or ("\0",)) and (fmt.sniff(text, None) or fmt.name != "jsonl"):
            return fmt.name, None
    data, error = None, None
    if text.lstrip()[:1] in ("[", "{") or lowered.endswith(".json"):
        try:
            data = _json(text, name)
        except InputError as exc:
            error = exc
        if lowered.endswith(".json") and error is None and not isinstance(data, (list, dict)):
            raise InputError(name, f"a JSON {type(data).__name__ if data is not None else 'null'} is not a "
                             "transcript", where="top level")
    for fmt in REGISTRY.values():
        if (data is not None or not fmt.json_document) and fmt.sniff(text, data):
            return fmt.name, data
    if error is not None and not lowered.endswith((".jsonl", ".ndjson")):
        raise error
    raise InputError(name, "not a format memcli reads; it reads " + "; ".join(
        f"{f.description} ({f.name})" for f in REGISTRY.values()) + " (choose one with --format)",
                     where="top level")


# ---------------------------------------------------------------- entry point

def _whole_document(text: str, fmt: TranscriptFormat):
    """``text`` decoded when it is one JSON document that ``fmt`` reads as a whole, else None (JSON
    lines: the first line's end stops the decoder at once)."""
    try:
        data = parsing.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, (dict, list)) and fmt.sniff(text, data) else None


def parse_input(raw: bytes, source: str, *, fmt: str | None = None, sample: str | None = None,
                default_time: str, conv: str | None = None, max_entry_chars: int = MAX_ENTRY_CHARS,
                keep_harness: bool = False) -> Parsed:
    """Decode and parse one input; ``source`` names it in messages ("-" for stdin). Every turn is
    checked: text that is not Unicode, holds a NUL byte or is longer than ``max_entry_chars`` is bad input.
    Agent sessions lose what their harness wrote into the messages (:mod:`memcli.ingest.harness`) unless
    ``keep_harness``."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(source, "input is empty")
    data = None
    if fmt is None:
        fmt, data = detect(text, source)
    elif fmt not in REGISTRY:
        raise InputError(source, f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    elif REGISTRY[fmt].json_document:
        data = _json(text, source)
    elif text.lstrip()[:1] in ("[", "{"):  # a format read as JSON lines or as one document (a Gemini chat,
        data = _whole_document(text, REGISTRY[fmt])  # the Managed Agents list): as auto-detection reads it
    if sample is not None and fmt != "locomo":
        raise InputError(source, f"--sample applies to LoCoMo input, but this is {fmt}")
    try:
        parsed = REGISTRY[fmt].parse(text, data, source, sample=sample, default_time=default_time, conv=conv,
                                     keep_harness=keep_harness)
    except RecursionError:
        raise InputError(source, "nested too deeply to be a transcript") from None
    if REGISTRY[fmt].keeps_going:  # a bad record costs itself, not the session
        kept = []
        for number, turn in enumerate(parsed.turns, 1):
            try:
                _check_turn(turn, source, number, None)
            except InputError as exc:
                parsed.rejected.append((exc.where or f"turn {number}", exc.reason))
                continue
            kept += split_turn(turn, max_entry_chars)
        parsed.turns = kept
    if not parsed.turns and REGISTRY[fmt].keeps_going and not parsed.rejected:
        return parsed  # a session with no conversation yet (its first records): nothing to add, not bad input
    if not parsed.turns:
        problems = "; ".join(f"{where}: {why}" for where, why in parsed.rejected[:3])
        raise InputError(source, "no turns to ingest" + (f" ({len(parsed.rejected)} records left out: {problems})"
                                                         if parsed.rejected else ""))
    for number, turn in enumerate(parsed.turns, 1):
        _check_turn(turn, source, number, max_entry_chars)
    fingerprint_turns(parsed.turns, source, fmt)
    return parsed


def split_turn(turn: Turn, limit: int) -> list[Turn]:
    """``turn``, or when its text is longer than ``limit`` characters, its text in parts of at most
    ``limit`` (cut at a paragraph, line, sentence or word break where one is near), each a turn whose
    ref and id carry the part's number (``~2``, ``~3``...)."""
    if len(turn.text) <= limit:
        return [turn]
    parts, rest = [], turn.text
    while len(rest) > limit:
        window = rest[:limit]
        cut = max((window.rfind(mark) + len(mark) for mark in ("\n\n", "\n", ". ", " ")
                   if window.rfind(mark) >= limit // 2), default=limit)
        parts.append(rest[:cut].strip())
        rest = rest[cut:]
    parts.append(rest.strip())
    out = []
    for number, text in enumerate((p for p in parts if p), 1):
        suffix = f"~{number}" if number > 1 else ""
        out.append(replace(turn, text=text, ref=turn.ref and turn.ref + suffix, uid=turn.uid and turn.uid + suffix))
    return out


def _json(text: str, source: str):
    try:
        return parsing.loads(text)
    except json.JSONDecodeError as exc:
        raise _json_error(source, exc) from None
    except RecursionError:
        raise InputError(source, "invalid JSON: nested too deeply") from None


def _check_turn(turn: Turn, source: str, number: int, max_entry_chars: int | None) -> None:
    where = turn.ref or f"turn {number}"
    for field_name in ("text", "speaker", "conv", "ref"):
        value = getattr(turn, field_name)
        if value is None:
            continue
        if "\x00" in value:
            raise InputError(source, f"{field_name} holds a NUL byte", where=where)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(source, f"{field_name} is not valid Unicode (a lone surrogate)", where=where) from None
    if max_entry_chars is not None and len(turn.text) > max_entry_chars:
        raise InputError(source, f"a turn of {len(turn.text):,} characters is longer than one memory entry may be "
                         f"({max_entry_chars:,}; ingest.max_entry_chars)", where=where)


def fingerprint_turns(turns: list[Turn], source: str, fmt: str) -> None:
    """Identity of each turn for duplicate detection across ingests (the format's ``identity``).

    LoCoMo turns are identified by conversation and dialog id; session and export turns by their
    message id (or file and line); other turns by their input's name (or ``--conv``), speaker, text
    and given time, with an occurrence counter so a repeated "ok" in one chat is kept twice.
    ``aliases``: the fingerprint a turn had under the format's earlier identity (a store that
    ingested it before knows it by that).
    """
    seen: dict[str, int] = {}
    base = source.rsplit("/", 1)[-1]
    identity = REGISTRY[fmt].identity if fmt in REGISTRY else _message_identity(fmt)
    legacy = REGISTRY[fmt].legacy_identity if fmt in REGISTRY else None

    def digest_of(key: list) -> str:
        return hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()[:32]

    for turn in turns:
        digest = digest_of(identity(turn, base))
        if legacy is not None:
            turn.aliases = (digest_of(legacy(turn, base)),)
        if turn.uid:  # a message with its own id is one turn however often it is written
            turn.fingerprint = digest
            continue
        seen[digest] = seen.get(digest, 0) + 1
        turn.fingerprint = f"{digest}.{seen[digest]}" if seen[digest] > 1 else digest
