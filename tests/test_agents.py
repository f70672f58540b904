"""Capture from the agents beside Claude Code and Codex (Gemini CLI, pi, Claude Managed Agents, OpenCode),
the harness text left in the known ones, sessions with no turns yet and files of no known format, through the
real `memcli ingest`. Real files the tools wrote (tests/samples/README.md names source, commit and licence)
are counted here without memcli's parser; the other sessions are written in the shapes the tools' sources
and documentation give."""

from __future__ import annotations

import json

import pytest

from tests.test_capture import SAMPLES, entries, jsonl


def stored(cli) -> list[tuple[str, str]]:
    return [(line["entry"]["meta"].get("speaker"), line["entry"]["text"])
            for line in cli("read", "CURRENT", "--json").json["lines"] if "entry" in line]


def _texts(content) -> str:
    """The text of a message's content as the file holds it: a string, or its text parts."""
    if isinstance(content, str):
        return content.strip()
    return "\n".join(p["text"].strip() for p in content
                     if p.get("type", "text") == "text" and "text" in p and p["text"].strip())


# ---------------------------------------------------------------- real files

def test_a_real_gemini_cli_chat_is_stored_exactly(cli, store_dir):
    path = SAMPLES / "gemini-cli-yoavf.json"
    session = json.loads(path.read_text())
    expected = [("assistant" if m["type"] == "gemini" else "user", _texts(m["content"]))
                for m in session["messages"] if m["type"] in ("user", "gemini") and _texts(m["content"])]
    assert len(expected) == 19 and sum(s == "user" for s, _ in expected) == 5
    assert cli("ingest", path, "--json").json["format"] == "gemini"
    assert stored(cli) == expected
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    thoughts = [t["description"][:60] for m in session["messages"] for t in m.get("thoughts") or [] if
                len(t["description"]) > 60]
    outputs = [value[:60] for m in session["messages"] for call in m.get("toolCalls") or []
               for value in call["args"].values() if isinstance(value, str) and len(value) > 60]
    assert thoughts and outputs
    assert not [t for t in thoughts + outputs if t in files]
    assert cli("ingest", path, "--json").json["added"] == 0


@pytest.mark.parametrize("sample", ["pi-v1-large-session.jsonl", "pi-v1-compaction.jsonl"])
def test_real_pi_sessions_are_stored_exactly(cli, store_dir, sample):
    path = SAMPLES / sample
    records = [json.loads(line) for line in path.read_text().splitlines()]
    expected = [(r["message"]["role"], _texts(r["message"]["content"])) for r in records
                if r["type"] == "message" and r["message"]["role"] in ("user", "assistant")
                and _texts(r["message"]["content"])]
    harness = [_texts(r["message"]["content"])[:80] for r in records if r["type"] == "message"
               and r["message"]["role"] == "toolResult" and len(_texts(r["message"]["content"])) > 80]
    harness += [r["summary"][:80] for r in records if r["type"] == "compaction"]
    harness += [p["thinking"][:80] for r in records if r["type"] == "message" and r["message"]["role"] == "assistant"
                for p in r["message"]["content"] if p.get("type") == "thinking" and len(p["thinking"]) > 80]
    assert len(expected) >= 4 and harness
    assert cli("ingest", path, "--json").json["format"] == "pi"
    assert stored(cli) == expected
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert not [h for h in harness if h in files]
    assert cli("ingest", path, "--json").json["added"] == 0


def test_a_real_claude_code_shell_command_leaves_no_empty_output_elements(cli, store_dir):
    path = SAMPLES / "claude-code-2.0.24-yoavf.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    replies = [_texts(r["message"]["content"]) for r in records if r["type"] == "assistant"
               and _texts(r["message"]["content"])]
    assert cli("ingest", path, "--json").code == 0
    assert stored(cli) == [("assistant", text) for text in replies]
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert "bash-stdout" not in files and "bash-stderr" not in files and "Caveat:" not in files


# ---------------------------------------------------------------- written in the documented shapes

def test_gemini_jsonl_replays_rewinds_and_updates(cli, tmp_path):
    path = tmp_path / "session-2026-05-11T10-00-abcd1234.jsonl"
    jsonl(path, [
        {"sessionId": "abcd1234-0000", "projectHash": "f" * 64, "startTime": "2026-05-11T10:00:00Z", "kind": "main"},
        {"id": "u1", "timestamp": "2026-05-11T10:00:01Z", "type": "user", "content": [{"text": "the build uses make"}]},
        {"id": "g1", "timestamp": "2026-05-11T10:00:02Z", "type": "gemini", "content": ""},
        {"$set": {"lastUpdated": "2026-05-11T10:00:03Z"}},
        {"id": "g1", "timestamp": "2026-05-11T10:00:02Z", "type": "gemini",
         "content": [{"text": "secretly pondering", "thought": True}, {"text": "Noted: make."}],
         "toolCalls": [{"id": "t1", "name": "read_file", "args": {}, "status": "success",
                        "result": [{"functionResponse": {"id": "t1", "name": "read_file",
                                                         "response": {"output": "FILE BODY"}}}]}]},
        {"id": "u2", "timestamp": "2026-05-11T10:01:00Z", "type": "user", "content": "a question I took back"},
        {"id": "g2", "timestamp": "2026-05-11T10:01:01Z", "type": "gemini", "content": "an answer taken back"},
        {"$rewindTo": "u2"},
        {"id": "i1", "timestamp": "2026-05-11T10:02:00Z", "type": "info", "content": "Loaded cached credentials."},
        {"id": "u3", "timestamp": "2026-05-11T10:02:01Z", "type": "user", "content": "we deploy on Fridays"},
    ])
    assert cli("ingest", path, "--json").json["format"] == "gemini"
    assert stored(cli) == [("user", "the build uses make"), ("assistant", "Noted: make."),
                           ("user", "we deploy on Fridays")]
    assert cli("ingest", path, "--json").json["added"] == 0
    legacy = tmp_path / "session-2026-05-11T10-00-abcd1234.json"  # the same chat in the older JSON file
    legacy.write_text(json.dumps({"sessionId": "abcd1234-0000", "projectHash": "f" * 64, "messages": [
        {"id": "u1", "timestamp": "2026-05-11T10:00:01Z", "type": "user", "content": "the build uses make"}]}))
    assert cli("ingest", legacy, "--json").json["added"] == 0


def test_gemini_stream_json_joins_the_reply_chunks(cli, tmp_path):
    path = tmp_path / "out.jsonl"
    jsonl(path, [
        {"type": "init", "timestamp": "2026-05-11T10:00:00Z", "session_id": "s-1", "model": "gemini-2.5-pro"},
        {"type": "message", "timestamp": "2026-05-11T10:00:00Z", "role": "user", "content": "which port is staging?"},
        {"type": "message", "timestamp": "2026-05-11T10:00:01Z", "role": "assistant", "content": "Let me look.",
         "delta": True},
        {"type": "tool_use", "timestamp": "2026-05-11T10:00:01Z", "tool_name": "read_file", "tool_id": "t",
         "parameters": {"path": "a"}},
        {"type": "tool_result", "timestamp": "2026-05-11T10:00:02Z", "tool_id": "t", "status": "success",
         "output": "PORT=8443"},
        {"type": "message", "timestamp": "2026-05-11T10:00:03Z", "role": "assistant", "content": "Staging is ",
         "delta": True},
        {"type": "message", "timestamp": "2026-05-11T10:00:03Z", "role": "assistant", "content": "on 8443.",
         "delta": True},
        {"type": "result", "timestamp": "2026-05-11T10:00:04Z", "status": "success", "stats": {"total_tokens": 9}},
    ])
    assert cli("ingest", path, "--json").json["format"] == "gemini-stream"
    assert stored(cli) == [("user", "which port is staging?"), ("assistant", "Let me look."),
                           ("assistant", "Staging is on 8443.")]
    assert cli("ingest", path, "--json").json["added"] == 0


def test_a_pi_v3_session_keeps_the_branch_the_user_is_on(cli, tmp_path, store_dir):
    def entry(eid, parent, role, content, **extra):
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": f"2026-07-10T10:0{eid[-1]}:00.000Z",
                "message": {"role": role, "content": content, "timestamp": 1783677660000, **extra}}

    path = tmp_path / "2026-07-10T10-00-00-000Z_0199.jsonl"
    jsonl(path, [
        {"type": "session", "version": 3, "id": "0199", "timestamp": "2026-07-10T10:00:00.000Z", "cwd": "/w/pi"},
        {"type": "model_change", "id": "00000000", "parentId": None, "timestamp": "2026-07-10T10:00:00.000Z",
         "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
        entry("00000001", "00000000", "user", "the cache lives in redis"),
        entry("00000002", "00000001", "assistant", [{"type": "thinking", "thinking": "hmm"},
                                                    {"type": "text", "text": "Understood."},
                                                    {"type": "toolCall", "id": "c", "name": "bash", "arguments": {}}]),
        entry("00000003", "00000002", "toolResult", [{"type": "text", "text": "TOOL OUTPUT"}], toolCallId="c"),
        entry("00000004", "00000003", "user", [{"type": "text", "text": "an abandoned idea"}]),
        entry("00000005", "00000004", "assistant", [{"type": "text", "text": "an abandoned reply"}]),
        {"type": "branch_summary", "id": "00000006", "parentId": "00000003", "timestamp": "2026-07-10T10:06:00.000Z",
         "fromId": "00000005", "summary": "BRANCH SUMMARY"},
        {"type": "custom_message", "id": "00000007", "parentId": "00000006", "timestamp": "2026-07-10T10:07:00.000Z",
         "customType": "ext", "content": "INJECTED CONTEXT", "display": False},
        entry("00000008", "00000007", "user", [{"type": "text", "text": "use memcached instead"},
                                               {"type": "image", "data": "AAAA", "mimeType": "image/png"}]),
        entry("00000009", "00000008", "assistant", [{"type": "text", "text": "Switching to memcached."}]),
    ])
    assert cli("ingest", path, "--json").json["format"] == "pi"
    assert stored(cli) == [("user", "the cache lives in redis"), ("assistant", "Understood."),
                           ("user", "use memcached instead"), ("assistant", "Switching to memcached.")]
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert not [w for w in ("abandoned", "BRANCH SUMMARY", "INJECTED", "TOOL OUTPUT", "hmm") if w in files]
    assert cli("ingest", path, "--json").json["added"] == 0


def test_pi_json_mode_output_keeps_the_finished_messages(cli, tmp_path):
    path = tmp_path / "pi-out.jsonl"
    user = {"role": "user", "content": [{"type": "text", "text": "name the release"}], "timestamp": 1783677660000}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Call it Juniper."}], "stopReason": "stop",
             "timestamp": 1783677661000}
    jsonl(path, [
        {"type": "session", "version": 3, "id": "01a0", "timestamp": "2026-07-10T10:00:00.000Z", "cwd": "/w"},
        {"type": "agent_start"}, {"type": "turn_start"},
        {"type": "message_start", "message": user}, {"type": "message_end", "message": user},
        {"type": "message_start", "message": {**reply, "content": []}},
        {"type": "message_update", "message": reply, "assistantMessageEvent": {"type": "text_delta", "delta": "Call"}},
        {"type": "message_end", "message": reply},
        {"type": "turn_end", "message": reply, "toolResults": []}, {"type": "agent_end", "messages": [user, reply]},
    ])
    assert cli("ingest", path, "--json").code == 0
    assert stored(cli) == [("user", "name the release"), ("assistant", "Call it Juniper.")]


MANAGED = [
    {"type": "user.message", "id": "sevt_01", "content": [{"type": "text", "text": "Where is order 1234?"}],
     "processed_at": "2026-03-15T10:00:00Z"},
    {"type": "session.status_running", "id": "sevt_02", "processed_at": "2026-03-15T10:00:00Z"},
    {"type": "agent.thinking", "id": "sevt_03", "content": [{"type": "text", "text": "THINKING"}],
     "processed_at": "2026-03-15T10:00:01Z"},
    {"type": "agent.tool_use", "id": "sevt_04", "name": "lookup", "input": {"order": 1234},
     "processed_at": "2026-03-15T10:00:01Z"},
    {"type": "agent.tool_result", "id": "sevt_05", "content": [{"type": "text", "text": "TOOL RESULT"}],
     "processed_at": "2026-03-15T10:00:02Z"},
    {"type": "agent.message", "id": "sevt_06", "content": [{"type": "text", "text": "It shipped on Monday."}],
     "processed_at": "2026-03-15T10:00:03Z"},
    {"type": "session.status_idle", "id": "sevt_07", "stop_reason": {"type": "end_turn"},
     "processed_at": "2026-03-15T10:00:03Z"},
]


@pytest.mark.parametrize("shape", ["list", "jsonl", "sse"])
def test_managed_agents_events_keep_the_messages(cli, tmp_path, store_dir, shape):
    if shape == "list":
        path = tmp_path / "events.json"
        path.write_text(json.dumps({"data": MANAGED, "next_page": None}))
    elif shape == "jsonl":
        path = tmp_path / "events.jsonl"
        jsonl(path, MANAGED + MANAGED[-2:])  # a stream read again after a reconnect repeats events
    else:
        path = tmp_path / "events.txt"
        path.write_text("".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in MANAGED))
    assert cli("ingest", path, "--json").json["format"] == "managed-agents"
    assert stored(cli) == [("user", "Where is order 1234?"), ("assistant", "It shipped on Monday.")]
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert "THINKING" not in files and "TOOL RESULT" not in files
    assert cli("ingest", path, "--json").json["added"] == 0


def test_an_opencode_export_keeps_text_parts_only(cli, tmp_path, store_dir):
    def message(mid, role, created, *parts):
        return {"info": {"id": mid, "sessionID": "ses_1", "role": role, "time": {"created": created}},
                "parts": [{"id": f"prt_{mid}_{n}", "messageID": mid, "sessionID": "ses_1", **p}
                          for n, p in enumerate(parts)]}

    path = tmp_path / "export.json"
    path.write_text(json.dumps({"info": {"id": "ses_1", "title": "t", "time": {"created": 1790119170000}}, "messages": [
        message("msg_1", "user", 1790119170000, {"type": "text", "text": "keep logs for 30 days"},
                {"type": "text", "text": "SYNTHETIC FILE CONTEXT", "synthetic": True},
                {"type": "file", "mime": "text/plain", "url": "file:///a", "filename": "a"}),
        message("msg_2", "assistant", 1790119171000, {"type": "step-start"},
                {"type": "reasoning", "text": "REASONING"},
                {"type": "tool", "tool": "bash", "state": {"status": "completed", "output": "TOOL OUTPUT"}},
                {"type": "text", "text": "Retention set to 30 days."}, {"type": "step-finish", "reason": "stop"}),
    ], "todos": []}))
    assert cli("ingest", path, "--json").json["format"] == "opencode"
    assert stored(cli) == [("user", "keep logs for 30 days"), ("assistant", "Retention set to 30 days.")]
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert not [w for w in ("SYNTHETIC", "REASONING", "TOOL OUTPUT") if w in files]
    assert cli("ingest", path, "--json").json["added"] == 0


# ---------------------------------------------------------------- unknown formats, no turns yet

@pytest.mark.parametrize("name, body", [
    ("other-agent.jsonl", '{"kind": "turn", "who": "me", "said": "hi"}\n'),
    ("export.json", '{"conversation": {"turns": [{"who": "me", "said": "hi"}]}}'),
])
def test_a_file_of_no_known_format_names_the_formats_memcli_reads(cli, tmp_path, store_dir, name, body):
    path = tmp_path / name
    path.write_text(body)
    done = cli("ingest", path)
    assert done.code == 4
    assert "not a format memcli reads" in done.stderr and "Gemini CLI" in done.stderr and "(pi)" in done.stderr
    assert not (store_dir / "CURRENT.md").exists() or not entries(cli)


@pytest.mark.parametrize("records, fmt", [
    ([{"timestamp": "2026-05-11T10:00:00Z", "type": "session_meta",
       "payload": {"id": "019e", "cwd": "/w", "originator": "codex_cli_rs", "cli_version": "0.125.0"}}], "codex"),
    ([{"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-05-11T10:00:00Z", "sessionId": "5c0f"},
      {"type": "user", "uuid": "u-1", "sessionId": "5c0f", "isMeta": True, "timestamp": "2026-05-11T10:00:00Z",
       "message": {"role": "user", "content": "<local-command-caveat>Caveat</local-command-caveat>"}}],
     "claude-code"),
])
def test_a_session_with_no_turns_yet_is_not_bad_input(cli, tmp_path, records, fmt):
    path = tmp_path / "early.jsonl"
    jsonl(path, records)
    done = cli("ingest", path, "--json")
    assert done.code == 0, done.stderr
    assert done.json["format"] == fmt and done.json["turns"] == 0 and done.json["added"] == 0
    assert "no conversation in it yet" in cli("ingest", path).stdout


# ---------------------------------------------------------------- harness text left in the known formats

def test_the_last_harness_leaks_are_closed(cli, tmp_path, store_dir):
    claude = tmp_path / "claude.jsonl"
    base = {"sessionId": "5c0f", "cwd": "/w", "version": "2.1.14"}
    jsonl(claude, [
        {"type": "user", "uuid": "c-1", "timestamp": "2026-05-30T04:20:00Z", "isCompactSummary": True,
         "message": {"role": "user", "content": "COMPACT SUMMARY of the earlier part"}, **base},
        {"type": "user", "uuid": "c-2", "timestamp": "2026-05-30T04:21:00Z",
         "message": {"role": "user", "content": "This session is being continued from a previous conversation that "
                                                "ran out of context. The summary below covers OLD WORK."}, **base},
        {"type": "user", "uuid": "c-3", "timestamp": "2026-05-30T04:22:00Z",
         "message": {"role": "user", "content": [{"type": "text",
                                                  "text": "[Request interrupted by user for tool use]"}]}, **base},
        {"type": "user", "uuid": "c-4", "timestamp": "2026-05-30T04:23:00Z",
         "message": {"role": "user", "content": "<bash-stdout>LISTING</bash-stdout><bash-stderr></bash-stderr>"},
         **base},
        {"type": "user", "uuid": "c-5", "timestamp": "2026-05-30T04:24:00Z",
         "message": {"role": "user", "content": "ship it on Tuesday"}, **base},
    ])
    codex = tmp_path / "rollout.jsonl"
    jsonl(codex, [
        {"timestamp": "2026-05-30T04:25:00Z", "type": "session_meta", "payload": {"id": "019e", "cwd": "/w"}},
        {"timestamp": "2026-05-30T04:26:00Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text":
                "# Context from my IDE setup:\n\n## Active file: src/a.py\n\n## Open tabs:\n- src/a.py: OPEN TAB\n\n"
                "## My request for Codex:\nrename the flag to --dry-run\n"}]}},
    ])
    chatgpt = tmp_path / "conversations.json"
    chatgpt.write_text(json.dumps([{"id": "cv", "title": "t", "create_time": 1780000000, "current_node": "n2",
                                    "mapping": {
        "n1": {"id": "n1", "parent": None, "children": ["n2"], "message": None},
        "n2": {"id": "n2", "parent": "n1", "children": [], "message": {
            "id": "n2", "author": {"role": "assistant"}, "create_time": 1780000001, "recipient": "all",
            "content": {"content_type": "text", "parts": [
                "The charter limits terms to two years\u301044:0\u2020charter.pdf\u2020L1-L5\u3011. "
                "See also\u30100\u2020file\u2020file_abc\u3011 the bylaws \ue200cite\ue202turn0file1\ue201.\n"
                "\u3010\ud310\uacb0\uc694\uc9c0\u3011 stays"]}}}}}]))
    for path in (claude, codex, chatgpt):
        assert cli("ingest", path, "--json").code == 0
    assert [text for _, text in stored(cli)] == [
        "ship it on Tuesday", "rename the flag to --dry-run",
        "The charter limits terms to two years. See also the bylaws.\n\u3010\ud310\uacb0\uc694\uc9c0\u3011 stays"]
    files = "".join(p.read_text() for p in store_dir.rglob("*.md"))
    assert not [w for w in ("COMPACT SUMMARY", "OLD WORK", "Request interrupted", "LISTING", "bash-", "OPEN TAB",
                            "IDE setup", "charter.pdf", "\u2020") if w in files]


def test_remember_stores_one_note_from_an_argument_or_stdin(cli, store_dir):
    done = cli("remember", "The staging server runs on port 8443", "--speaker", "ops", "--json")
    assert done.code == 0 and done.json["added"] == 1 and done.json["format"] == "note"
    assert cli("remember", "The staging server runs on port 8443", "--speaker", "ops", "-q").stdout == ""  # kept once
    assert cli("remember", "-", "--source", "agent", stdin=b"we deploy on Fridays\n").code == 0
    assert stored(cli) == [("ops", "The staging server runs on port 8443"), (None, "we deploy on Fridays")]
    assert cli("remember", "  ").code == 4
    assert len(entries(cli)) == 2


def test_a_hook_that_fires_before_the_first_turn_writes_no_error(cli, tmp_path, store_dir):
    early = tmp_path / "early-session.jsonl"
    jsonl(early, [{"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-05-11T10:00:00Z",
                   "sessionId": "5c0f"}])
    event = {"session_id": "5c0f", "transcript_path": str(early), "cwd": str(tmp_path), "hook_event_name": "PreCompact"}
    done = cli("hook", "claude-code", "--wait", "--json", stdin=json.dumps(event).encode())
    assert done.code == 0, done.stderr
    assert done.json["action"] == "ingested" and done.json["added"] == 0


def test_help_keeps_the_redaction_placeholder(cli):
    for command in ("ingest", "remember"):
        done = cli(command, "--help")
        assert done.code == 0 and "[redacted:TYPE]" in " ".join(done.stdout.split()), command
