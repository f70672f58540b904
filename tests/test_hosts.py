"""Codex's and Gemini CLI's lifecycle hooks (``memcli hook codex`` / ``memcli hook gemini``), driven the
way each host drives them: a session start, the save events while the session goes on, a resumed
session, and the next session start. The transcripts are real files the tools wrote
(tests/samples/README.md); the payloads carry the fields the hosts' published input schemas require
(Codex: codex-rs/hooks/schema/generated/*.command.input.schema.json; Gemini CLI: docs/hooks/reference.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_memcli

SAMPLES = Path(__file__).parent / "samples"
CODEX = SAMPLES / "codex-0.125-codemie.jsonl"
GEMINI = SAMPLES / "gemini-cli-yoavf.json"


def codex_payload(name: str, cwd: Path, transcript: Path | None, **extra) -> dict:
    base = {"session_id": "019e1625-789d-76c0-80ab-3724b5ddb799", "cwd": str(cwd), "hook_event_name": name,
            "model": "gpt-5.5", "permission_mode": "default",
            "transcript_path": str(transcript) if transcript else None}
    if name == "SessionStart":
        return {**base, "source": extra.get("source", "startup")}
    if name == "Stop":
        return {**base, "turn_id": "019e1626-0000-7000-8000-000000000001", "stop_hook_active": False,
                "last_assistant_message": "done"}
    return {**base, "trigger": "auto", "custom_instructions": None}  # PreCompact


def gemini_payload(name: str, cwd: Path, transcript: Path | None, **extra) -> dict:
    base = {"session_id": "b5a2c1e0", "transcript_path": str(transcript) if transcript else "", "cwd": str(cwd),
            "hook_event_name": name, "timestamp": "2025-10-08T12:00:00.000Z"}
    field = {"SessionStart": ("source", "startup"), "SessionEnd": ("reason", "exit"),
             "PreCompress": ("trigger", "auto")}[name]
    return {**base, field[0]: extra.get(field[0], field[1])}


def codex_turns(path: Path) -> int:
    """The conversation's turns, read here without memcli: each user or assistant message, less what
    Codex itself puts in the user's place (the AGENTS.md instructions and the environment context)."""
    turns = 0
    for line in path.read_text().splitlines():
        record = json.loads(line)
        payload = record.get("payload") or {}
        if record.get("type") != "response_item" or payload.get("type") != "message":
            continue
        texts = [c.get("text", "") for c in payload.get("content", []) if c.get("type") in ("input_text", "output_text")]
        if payload.get("role") == "assistant" and any(t.strip() for t in texts) or payload.get("role") == "user" and any(
                t.strip() and not t.startswith(("# AGENTS.md instructions", "<environment_context>")) for t in texts):
            turns += 1
    return turns


def gemini_turns(path: Path) -> int:
    """User and model messages with text, read here without memcli."""
    def text(content) -> str:
        return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    return sum(1 for m in json.loads(path.read_text())["messages"]
               if m["type"] in ("user", "gemini") and text(m.get("content")).strip())


def cut_codex(source: Path, to: Path, answers: int) -> None:
    """The rollout as it stood after ``answers`` replies (Codex appends to it as the session goes on)."""
    lines, seen = [], 0
    for line in source.read_text().splitlines(keepends=True):
        if seen == answers:
            break
        lines.append(line)
        record = json.loads(line)
        if record.get("type") == "response_item" and (record.get("payload") or {}).get("role") == "assistant":
            seen += 1
    to.write_text("".join(lines))


def cut_gemini(source: Path, to: Path, messages: int) -> None:
    """The chat as Gemini CLI had written it after its first ``messages`` messages."""
    chat = json.loads(source.read_text())
    to.write_text(json.dumps({**chat, "messages": chat["messages"][:messages]}))


HOSTS = {
    "codex": (CODEX, codex_payload, codex_turns, lambda s, t: cut_codex(s, t, 1), ("Stop", "PreCompact")),
    "gemini": (GEMINI, gemini_payload, gemini_turns, lambda s, t: cut_gemini(s, t, 6), ("SessionEnd", "PreCompress")),
}


def saved_turns(store: Path) -> int:
    current = store / "CURRENT.md"
    return current.read_text().count("- <seq=") if current.exists() else 0


def wait_for(store: Path, turns: int, seconds: float = 90) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and saved_turns(store) < turns:
        time.sleep(0.2)
    time.sleep(0.5)  # a save past the count would show now
    return saved_turns(store)


@pytest.mark.slow  # 10-15 s: background ingests waited for
@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_session_is_saved_exactly_resumed_and_recalled_at_the_next_start(tmp_path, host):
    sample, payload, independent, cut, (save, compact) = HOSTS[host]
    project = tmp_path / "kiln"
    (project / ".git").mkdir(parents=True)
    store = tmp_path / "store"
    transcript = tmp_path / sample.name

    def hook(event: dict, *flags):
        return run_memcli("--store", store, "hook", host, *flags, stdin=json.dumps(event).encode(), cwd=project)

    first = hook(payload("SessionStart", project, None))
    assert first.code == 0 and first.stdout == "", first.stderr  # nothing remembered yet: nothing said

    cut(sample, transcript)  # the session so far
    part = independent(transcript)
    assert 0 < part < independent(sample)
    started = hook(payload(save, project, transcript), "--json")
    assert started.code == 0 and started.json["action"] == "saving", started.stderr
    assert wait_for(store, part) == part

    transcript.write_bytes(sample.read_bytes())  # the session goes on (or is resumed) in the same file
    assert hook(payload(save, project, transcript)).stdout == ""  # a save event's stdout is empty: the host reads JSON
    whole = independent(sample)
    assert wait_for(store, whole) == whole
    again = hook(payload(compact, project, transcript), "--wait", "--json")
    assert again.code == 0 and again.json["added"] == 0  # each turn once
    assert saved_turns(store) == whole

    resumed = hook(payload("SessionStart", project, transcript, source="resume"))
    assert resumed.code == 0, resumed.stderr
    said = json.loads(resumed.stdout)  # JSON alone on stdout, the host's schema
    assert said["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = said["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("Memory of kiln") and "CURRENT:" in context
    assert set(said) == {"hookSpecificOutput"} and set(said["hookSpecificOutput"]) == {"hookEventName",
                                                                                      "additionalContext"}


def test_the_hosts_independent_counts_are_the_samples_own():
    """The independent readings agree with what tests/samples/README.md says each file holds."""
    assert codex_turns(CODEX) == 4  # two questions and two replies
    assert gemini_turns(GEMINI) == 19


@pytest.mark.slow  # 4 s each: four processes
@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_bad_payload_is_exit_4_with_a_clear_message_and_other_events_are_ignored(tmp_path, host):
    _sample, payload, _independent, _cut, (save, _compact) = HOSTS[host]
    store = tmp_path / "store"
    bad = run_memcli("--store", store, "hook", host, stdin=b"{not json")
    assert bad.code == 4 and "not JSON" in bad.stderr
    no_name = run_memcli("--store", store, "hook", host, stdin=b'{"cwd": "/tmp"}')
    assert no_name.code == 4 and "hook event" in no_name.stderr
    missing = run_memcli("--store", store, "hook", host,
                         stdin=json.dumps(payload(save, tmp_path, tmp_path / "gone.json")).encode())
    assert missing.code == 4 and "no such file" in missing.stderr
    other = run_memcli("--store", store, "hook", host, "--json",
                       stdin=json.dumps({"hook_event_name": "BeforeTool", "cwd": str(tmp_path)}).encode())
    assert other.code == 0 and other.json["action"] == "ignored"
    assert not store.exists()


def test_a_codex_session_without_a_rollout_saves_nothing_and_says_so(tmp_path):
    store = tmp_path / "store"
    done = run_memcli("--store", store, "hook", "codex", "--json",
                      stdin=json.dumps(codex_payload("Stop", tmp_path, None)).encode())
    assert done.code == 0 and done.json["action"] == "nothing to save"
    assert not store.exists()


@pytest.mark.parametrize("host", ["codex", "gemini"])
def test_print_config_gives_the_hosts_hook_entries(tmp_path, host):
    store = tmp_path / "store"
    done = run_memcli("--store", store, "mcp", "--print-config", f"{host}-hooks")
    assert done.code == 0 and "save as" in done.stderr
    hooks = json.loads(done.stdout)["hooks"]
    assert set(hooks) == {"codex": {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact"},
                          "gemini": {"SessionStart", "BeforeAgent", "SessionEnd", "PreCompress"}}[host]
    for groups in hooks.values():
        (entry,) = groups[0]["hooks"]
        assert entry["type"] == "command" and entry["command"].endswith(f"--store {store} hook {host}")
        # Codex waits in seconds, Gemini CLI in milliseconds: at least 10 s either way, under a minute
        assert 10 <= (entry["timeout"] / 1000 if host == "gemini" else entry["timeout"]) <= 60


@pytest.mark.slow  # 8 s: doctor loads the model
def test_doctor_lists_which_hosts_have_memcli_wired_in(tmp_path):
    """Files as --print-config writes them, in a home folder and a project of their own."""
    home, project = tmp_path / "home", tmp_path / "proj"
    (home / ".codex").mkdir(parents=True)
    (project / ".gemini").mkdir(parents=True)
    (home / ".cursor").mkdir()
    for agent, path in (("codex-hooks", home / ".codex" / "hooks.json"), ("codex", home / ".codex" / "config.toml"),
                        ("gemini-hooks", project / ".gemini" / "settings.json")):
        done = run_memcli("--store", tmp_path / "s", "mcp", "--print-config", agent)
        assert done.code == 0
        path.write_text(done.stdout)
    (home / ".cursor" / "mcp.json").write_text("{not json")
    env = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "nothing-here"), "CODEX_HOME": str(home / ".codex"),
           "PATH": "/usr/bin:/bin", "MEMCLI_MODEL": str(tmp_path / "no-model.gguf")}
    done = run_memcli("doctor", "--json", env=env, cwd=project)
    found = {h["host"]: h for h in done.json["hosts"]}
    assert (found["codex"]["hooks"], found["codex"]["mcp"]) == (True, True)
    assert (found["gemini"]["hooks"], found["gemini"]["mcp"]) == (True, False)  # hooks merged, server not yet
    assert found["gemini"]["files"] == [str(project / ".gemini" / "settings.json")]
    assert not any(found["claude-code"][k] for k in ("present", "hooks", "mcp", "plugin"))
    assert found["cursor"]["unreadable"] == [str(home / ".cursor" / "mcp.json")]
    text = run_memcli("doctor", env=env, cwd=project).stdout
    assert "codex: wired in: hooks (SessionStart, UserPromptSubmit, Stop, PreCompact), MCP server\n" in text
    assert ("gemini: wired in: hooks (SessionStart, BeforeAgent, SessionEnd, PreCompress)  (memcli mcp --print-config "
            "gemini, gemini-hooks)") in text
