"""Agent sessions and chat-app exports as input: Claude Code and Codex CLI session JSONL, ChatGPT and
Claude.ai conversations.json (sample files written for these tests, in tests/samples/)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import snapshot

SAMPLES = Path(__file__).parent / "samples"


def entries(cli) -> list[dict]:
    lines = cli("read", "CURRENT", "--json").json["lines"]
    return [line["entry"] for line in lines if "entry" in line]


@pytest.mark.parametrize("name, fmt, kept, ignored", [
    ("claude-code-session.jsonl", "claude-code", 4, 4),
    ("codex-rollout.jsonl", "codex", 2, 6),
    ("chatgpt-conversations.json", "chatgpt", 3, 2),
    ("claude-ai-conversations.json", "claude-ai", 2, 1),
])
def test_each_format_is_detected_and_keeps_only_the_conversation(cli, name, fmt, kept, ignored):
    done = cli("ingest", SAMPLES / name, "--json")
    assert done.code == 0, done.stderr
    assert (done.json["format"], done.json["added"], done.json["ignored"]) == (fmt, kept, ignored)
    texts = [e["text"] for e in entries(cli)]
    assert not any(t.startswith("<") for t in texts)  # injected context blocks are not memories
    assert all(e["meta"]["time"] and e["meta"]["ref"] for e in entries(cli))
    forced = cli("ingest", SAMPLES / name, "--format", fmt, "--json")
    assert forced.code == 0 and forced.json["added"] == 0  # the same turns again: nothing new


def test_claude_code_turns_keep_time_speaker_session_and_message_id(cli):
    assert cli("ingest", SAMPLES / "claude-code-session.jsonl").code == 0
    first, first_reply, *_ = entries(cli)
    assert first["meta"]["time"] == "2025-03-04T09:12" and first["meta"]["speaker"] == "user"
    assert first["meta"]["ref"] == "claude-code-session.jsonl#u1"
    assert first["meta"]["conv"] == "7d3f9c1e-5a2b-4c8d-9e0f-1a2b3c4d5e6f"
    assert first_reply["meta"]["source"] == "AI" and first_reply["text"].startswith("I'll look at the test")
    texts = " ".join(e["text"] for e in entries(cli))
    assert "tool_result" not in texts and "subagent prompt" not in texts and "/clear" not in texts


def test_chatgpt_follows_the_current_branch(cli):
    assert cli("ingest", SAMPLES / "chatgpt-conversations.json").code == 0
    texts = [e["text"] for e in entries(cli)]
    assert "An old answer that the user regenerated." not in texts
    assert texts[1].startswith("Feed it around 1 am") and texts[2].startswith("I'll feed at 9 pm")


@pytest.mark.parametrize("name, cut, before, total", [("claude-code-session.jsonl", 4, 2, 4),
                                                     ("codex-rollout.jsonl", 3, 1, 2)])
def test_a_grown_session_file_adds_only_its_new_turns(cli, tmp_path, name, cut, before, total):
    session = tmp_path / name
    lines = (SAMPLES / name).read_text().splitlines(keepends=True)
    session.write_text("".join(lines[:cut]) + lines[cut][:40])  # the agent is still writing the next line
    first = cli("ingest", session, "--json")
    assert first.code == 0 and first.json["added"] == before
    session.write_text("".join(lines))
    grown = cli("ingest", session, "--json")
    assert grown.code == 0 and grown.json["added"] == total - before and grown.json["skipped"] == before
    assert [e["meta"]["seq"] for e in entries(cli)] == [str(n) for n in range(1, total + 1)]


FORMAT = {"claude-code-session.jsonl": "claude-code", "codex-rollout.jsonl": "codex"}


@pytest.mark.parametrize("name, damage, message, lost", [
    ("claude-code-session.jsonl", lambda t: t.replace('"timestamp": "2025-03-04T09:13:40.000Z"',
                                                      '"timestamp": "half past nine"'), "does not parse", 1),
    ("claude-code-session.jsonl", lambda t: t.replace("\n", "\n[1, 2]\n7\n\"text\"\nnull\n{not json\n", 1),
     "is not a session record", 0),
    ("codex-rollout.jsonl", lambda t: t.replace("\n", "\n{not json\n", 1), "invalid JSON", 0),
    ("claude-ai-conversations.json", lambda t: t.replace('"chat_messages": [', '"chat_messages": [7, ', 1),
     "not an object", 0),
])
def test_a_bad_record_is_left_out_and_the_rest_kept(cli, store_dir, tmp_path, name, damage, message, lost):
    """One bad record never costs a whole session: it is left out, named with its place and reason (stderr and
    --json), and every good turn is stored."""
    whole = {"claude-code-session.jsonl": 4, "codex-rollout.jsonl": 2, "claude-ai-conversations.json": 2}[name]
    bad = tmp_path / name
    bad.write_text(damage((SAMPLES / name).read_text()))
    done = cli("ingest", bad, *(["--format", FORMAT[name]] if name in FORMAT else []), "--json")
    assert done.code == 0, done.stderr
    assert done.json["added"] == whole - lost and done.json["rejected"]
    assert any(message in r["reason"] for r in done.json["rejected"]), done.json["rejected"]
    assert all(r["where"] for r in done.json["rejected"]) and "bad records left out" in done.stderr


@pytest.mark.parametrize("name, damage, message", [
    ("chatgpt-conversations.json", lambda t: t.replace('"parent": "m2b"', '"parent": "gone"'), "missing"),
    ("chatgpt-conversations.json", lambda t: t.replace('"parent": "sys"', '"parent": "m3"'), "cycle"),
    ("chatgpt-conversations.json", lambda t: t.replace('"parent": "m2b"', '"parent": ["m2b"]'), "not a node id"),
    ("claude-code-session.jsonl", lambda t: "".join(line.replace('"timestamp": "', '"timestamp": "x')
                                                    for line in t.splitlines(keepends=True)), "does not parse"),
])
def test_nothing_usable_left_exits_4_and_leaves_the_store_unchanged(cli, store_dir, tmp_path, name, damage,
                                                                     message):
    assert cli("ingest", SAMPLES / "claude-ai-conversations.json").code == 0
    before = snapshot(store_dir)
    bad = tmp_path / name
    bad.write_text(damage((SAMPLES / name).read_text()))
    done = cli("ingest", bad, *(["--format", FORMAT[name]] if name in FORMAT else []))
    assert done.code == 4 and message in done.stderr, done.stderr
    assert snapshot(store_dir) == before


def test_a_resumed_session_and_a_record_written_twice_are_remembered_once(cli, tmp_path):
    """Claude Code's resume replays the history into a new file, and a record can be written twice: a turn is
    known by its message id, not its file."""
    lines = (SAMPLES / "claude-code-session.jsonl").read_text().splitlines(keepends=True)
    first = cli("ingest", SAMPLES / "claude-code-session.jsonl", "--json").json["added"]
    resumed = tmp_path / "resumed-session.jsonl"
    resumed.write_text("".join(lines) + "".join(lines[-2:]))  # the history again, its last records twice
    again = cli("ingest", resumed, "--json")
    assert again.code == 0 and again.json["added"] == 0, again.stdout
    assert len([e for e in entries(cli)]) == first


def test_a_turn_longer_than_an_entry_is_split(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCLI_MAX_ENTRY_CHARS", "200")
    record = json.loads((SAMPLES / "claude-code-session.jsonl").read_text().splitlines()[0])
    long = " ".join(f"Sentence number {i} of a long reply." for i in range(40))
    rows = []
    for n, kind in enumerate(("user", "assistant")):
        row = dict(record, type=kind, uuid=f"u-{n}", message={"role": kind, "content": long if n else "hi"})
        rows.append(json.dumps(row))
    session = tmp_path / "long.jsonl"
    session.write_text("\n".join(rows) + "\n")
    done = cli("ingest", session, "--format", "claude-code", "--json")
    assert done.code == 0 and done.json["added"] > 3, done.stderr
    texts = [e["text"] for e in entries(cli)]
    assert all(len(t) <= 200 for t in texts) and " ".join(texts[1:]).split() == long.split()
    assert cli("ingest", session, "--format", "claude-code", "--json").json["added"] == 0


def test_a_plain_chat_jsonl_is_still_plain_jsonl(cli, tmp_path):
    plain = tmp_path / "chat.jsonl"
    plain.write_text("\n".join(json.dumps(m) for m in [{"role": "user", "content": "hello there"},
                                                        {"role": "assistant", "content": "hi"}]) + "\n")
    done = cli("ingest", plain, "--json")
    assert done.code == 0 and done.json["format"] == "jsonl"


def test_the_claude_code_hook_saves_the_session_and_recalls_the_project(cli, tmp_path):
    session = tmp_path / "s.jsonl"
    shutil.copy(SAMPLES / "claude-code-session.jsonl", session)
    event = {"session_id": "x", "transcript_path": str(session), "cwd": "/home/dana/kiln",
             "hook_event_name": "SessionEnd", "reason": "exit"}
    saved = cli("hook", "claude-code", "--wait", "--json", stdin=json.dumps(event).encode())
    assert saved.code == 0, saved.stderr
    assert saved.json["action"] == "ingested" and saved.json["added"] == 4
    again = cli("hook", "claude-code", "--wait", "--json",
                stdin=json.dumps({**event, "hook_event_name": "PreCompact"}).encode())
    assert again.json["added"] == 0
    start = cli("hook", "claude-code", stdin=json.dumps({**event, "hook_event_name": "SessionStart"}).encode())
    assert start.code == 0 and "Memory of kiln" in start.stdout and "kiln-test-<worker id>" in start.stdout
    bad = cli("hook", "claude-code", stdin=b"{not json")
    assert bad.code == 4
    other = cli("hook", "claude-code", "--json", stdin=json.dumps({"hook_event_name": "Notification"}).encode())
    assert other.code == 0 and other.json["action"] == "ignored"


@pytest.mark.parametrize("agent", ["claude-code", "claude-code-hooks", "cursor", "vscode", "claude-desktop", "gemini",
                                   "opencode", "codex"])
def test_print_config_is_a_file_the_host_reads_as_it_is(cli, store_dir, agent):
    import tomllib

    done = cli("mcp", "--print-config", agent)
    assert done.code == 0 and "save as" in done.stderr
    config = tomllib.loads(done.stdout) if agent == "codex" else json.loads(done.stdout)  # nothing else around it
    server = {"command": sys.executable, "args": ["-m", "memcli", "--store", str(store_dir), "mcp"]}
    expected = {"claude-code": {"mcpServers": {"memcli": server}}, "cursor": {"mcpServers": {"memcli": server}},
                "claude-desktop": {"mcpServers": {"memcli": server}},
                "gemini": {"mcpServers": {"memcli": {**server, "timeout": 60000}}},
                "vscode": {"servers": {"memcli": {"type": "stdio", **server}}},
                "codex": {"mcp_servers": {"memcli": {**server, "startup_timeout_sec": 30, "tool_timeout_sec": 60}}}}
    if agent == "opencode":
        assert config["mcp"]["memcli"] == {"type": "local", "command": [server["command"], *server["args"]],
                                           "enabled": True, "timeout": 30000}
    elif agent == "claude-code-hooks":
        hooks = config["hooks"]
        assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd"}
        for entries in hooks.values():
            (hook,) = entries[0]["hooks"]
            assert hook["timeout"] > 0 and str(store_dir) in hook["command"] and "hook claude-code" in hook["command"]
    else:
        assert config == expected[agent]
    as_json = cli("mcp", "--print-config", agent, "--json")
    assert as_json.code == 0 and as_json.json["config"] == config and as_json.json["where"]
    assert not store_dir.exists()  # printing a configuration creates nothing
    assert cli("mcp", "--print-config", "emacs").code == 2


@pytest.mark.slow  # 3-4 s: the fast tier keeps within 5 minutes
def test_a_project_store_is_registered_portably_and_codex_toml_holds_any_path(tmp_path):
    """A file kept in the project names no absolute path (it works on every clone); TOML is valid for a
    store whose path has a character outside the Basic Multilingual Plane, a quote and a backslash."""
    import tomllib

    project = tmp_path / "proj"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCLI_STORE")}
    run = functools.partial(subprocess.run, capture_output=True, text=True, cwd=project, env=env)
    assert run([sys.executable, "-m", "memcli", "init"]).returncode == 0
    for agent in ("claude-code", "claude-code-hooks", "cursor", "vscode", "gemini", "opencode"):
        done = run([sys.executable, "-m", "memcli", "mcp", "--print-config", agent])
        assert done.returncode == 0, done.stderr
        assert str(tmp_path) not in done.stdout and sys.executable not in done.stdout and "commit it" in done.stderr
        config = json.loads(done.stdout)
        if agent in ("cursor", "vscode"):
            assert config[{"cursor": "mcpServers", "vscode": "servers"}[agent]]["memcli"]["args"] == [
                "--store", "${workspaceFolder}/.memcli", "mcp"]
    served = run([sys.executable, "-m", "memcli", "mcp", "--print-config", "claude-code"])
    assert json.loads(served.stdout)["mcpServers"]["memcli"] == {"command": "memcli", "args": ["mcp"]}
    odd = tmp_path / 'st\u00f6re "\U0001f600" \\ x'
    done = run([sys.executable, "-m", "memcli", "--store", str(odd), "mcp", "--print-config", "codex"])
    assert done.returncode == 0
    assert tomllib.loads(done.stdout)["mcp_servers"]["memcli"]["args"][3] == str(odd)


def _event(name: str, cwd, transcript=None) -> bytes:
    return json.dumps({"session_id": "x", "hook_event_name": name, "cwd": str(cwd),
                       **({"transcript_path": str(transcript)} if transcript else {})}).encode()


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
def test_the_hook_files_each_session_under_its_project_and_recalls_only_that(tmp_path):
    """Without --store: a project with a .memcli/ gets its sessions there; any other project's go to the
    user store tagged with the project, and a session start recalls only its own project's entries."""
    from conftest import run_memcli

    kiln, garden, shop = tmp_path / "kiln", tmp_path / "garden", tmp_path / "shop"
    for folder in (kiln, garden, shop):
        (folder / ".git").mkdir(parents=True)
    assert run_memcli("init", shop).code == 0  # shop/.memcli: a project store
    session = tmp_path / "kiln.jsonl"
    shutil.copy(SAMPLES / "claude-code-session.jsonl", session)
    other = tmp_path / "shop.jsonl"
    shutil.copy(SAMPLES / "claude-code-session.jsonl", other)
    saved = run_memcli("hook", "claude-code", "--wait", "--json", stdin=_event("SessionEnd", kiln / "src", session),
                       cwd=tmp_path)
    assert saved.code == 0, saved.stderr
    assert saved.json["project"] == str(kiln) and saved.json["added"] == 4
    user_store = Path(saved.json["store"])
    assert user_store == tmp_path / "xdg-data" / "memcli"
    assert all(f"project={kiln}" in line for line in (user_store / "CURRENT.md").read_text().splitlines()
               if line.startswith("- <seq="))
    in_shop = run_memcli("hook", "claude-code", "--wait", "--json", stdin=_event("SessionEnd", shop, other),
                         cwd=tmp_path)
    assert in_shop.code == 0 and in_shop.json["store"] == str(shop / ".memcli") and in_shop.json["project"] is None
    recalled = run_memcli("hook", "claude-code", stdin=_event("SessionStart", kiln), cwd=tmp_path)
    assert recalled.code == 0 and "Memory of kiln" in recalled.stdout and "kiln-test-<worker id>" in recalled.stdout
    nothing = run_memcli("hook", "claude-code", "--json", stdin=_event("SessionStart", garden), cwd=tmp_path)
    assert nothing.code == 0 and nothing.json["digest"] == ""  # memory holds nothing about the garden
    assert "Memory of shop" in run_memcli("hook", "claude-code", stdin=_event("SessionStart", shop),
                                             cwd=tmp_path).stdout


def test_a_session_end_hook_answers_at_once_and_saves_in_the_background(tmp_path):
    import time

    from conftest import run_memcli

    store = tmp_path / "store"
    session = tmp_path / "s.jsonl"
    shutil.copy(SAMPLES / "claude-code-session.jsonl", session)
    done = run_memcli("--store", store, "hook", "claude-code", "--json",
                      stdin=_event("SessionEnd", tmp_path, session))
    assert done.code == 0 and done.json["action"] == "saving" and done.json["pid"] > 0, done.stderr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (store / "CURRENT.md").exists():
        time.sleep(0.2)
    while time.monotonic() < deadline and (store / "CURRENT.md").read_text().count("- <seq=") < 4:
        time.sleep(0.2)
    assert (store / "CURRENT.md").read_text().count("- <seq=") == 4
    bad = run_memcli("--store", store, "hook", "claude-code",
                     stdin=json.dumps({"hook_event_name": "SessionEnd", "transcript_path": "a\u0000b"}).encode())
    assert bad.code == 4 and "NUL" in bad.stderr  # a bad event is still said properly, by the full command


def test_a_session_start_lists_the_projects_sessions_newest_first_within_its_budget(cli, monkeypatch, store_dir):
    """Three real sessions of one project: the session start names each one's first request and its last reply,
    newest first, each cited by the line that holds it; a smaller budget keeps the newest; a slash command is no
    request; another project's sessions are not listed."""
    from memcli.tokens import count_tokens

    kiln = "/home/dana/kiln"
    for name in ("claude-code-session.jsonl", "claude-code-2.0.76-codemie.jsonl", "claude-code-2.0.24-yoavf.jsonl"):
        assert cli("ingest", SAMPLES / name, "--project", kiln, "-q").code == 0
    assert cli("ingest", SAMPLES / "codex-rollout.jsonl", "--project", "/home/dana/shop", "-q").code == 0
    event = json.dumps({"session_id": "y", "cwd": kiln, "hook_event_name": "SessionStart"}).encode()
    start = cli("hook", "claude-code", stdin=event)
    assert start.code == 0, start.stderr
    lines = start.stdout.splitlines()
    assert lines[0].startswith("Memory of kiln (memcli): 3 sessions saved, the newest first")
    sessions = [line for line in lines if line.startswith("- ")]
    assert [s[2:12] for s in sessions] == ["2026-01-08", "2025-10-21", "2025-03-04"]
    assert 'asked "ultrathink there is logic' in sessions[0] and 'asked "/clear' not in sessions[0]
    assert 'asked "The upload test in kiln fails about one run in ten. Can you find out why?"' in sessions[2]
    assert 'ended "The test shares one temporary bucket between workers;' in sessions[2]
    for cited in re.findall(r"\((CURRENT:\d+)\)", "\n".join(sessions)):  # each cites the line that says it
        doc, line = cited.split(":")
        entry = next(x["entry"] for x in cli("read", doc, "--lines", line, "--json").json["lines"] if "entry" in x)
        assert " ".join(entry["text"].split())[:30] in start.stdout
    assert count_tokens(start.stdout) <= 600 + 10
    from conftest import run_memcli  # a process: the session start's fast path, without the CLI's framework

    fast = run_memcli("--store", store_dir, "hook", "claude-code", stdin=event)
    assert fast.code == 0 and fast.stdout == start.stdout, fast.stderr
    as_json = run_memcli("--store", store_dir, "hook", "codex", "--json", stdin=event)
    assert as_json.code == 0 and json.loads(as_json.stdout)["digest"] == start.stdout.rstrip("\n")
    monkeypatch.setenv("MEMCLI_HOOK_START_TOKENS", "150")
    small = cli("hook", "claude-code", stdin=event)
    kept = [line for line in small.stdout.splitlines() if line.startswith("- ")]
    assert kept and len(kept) < 3 and count_tokens(small.stdout) <= 150
    assert [k.split(":")[0] for k in kept] == [s.split(":")[0] for s in sessions[:len(kept)]]  # the newest
    shop = cli("hook", "claude-code", stdin=json.dumps({"session_id": "z", "cwd": "/home/dana/shop",
                                                        "hook_event_name": "SessionStart"}).encode())
    assert "1 session saved" in shop.stdout and "kiln" not in shop.stdout.splitlines()[1]
