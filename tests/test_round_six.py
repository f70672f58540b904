"""Round six of the adversarial findings: what a clone, an odd question or an odd file could make memcli do
(each test failed on main 0b51bfb). The plugins' PATH search is in tests/test_plugin.py."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import EXAMPLES, REPO, run_memcli

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "conv-26.json"


def memcli(*args, cwd=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memcli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=timeout, stdin=subprocess.DEVNULL)


def no_internal_error(done: subprocess.CompletedProcess) -> None:
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]


# ---------------------------------------------------------------- doctor reads settings as data

def test_doctor_in_a_clone_reports_links_fifos_and_odd_settings_and_reads_none_of_them_whole(tmp_path):
    """A repository commits .mcp.json as a link to /dev/zero, .claude/settings.json is a FIFO, and the user's
    own settings have shapes no host writes: doctor finishes, says which files it could not read and why,
    and still reports the hosts."""
    project, home = tmp_path / "clone", tmp_path / "home"
    for folder in (project / ".claude", project / ".gemini", project / ".codex", home / ".claude" / "plugins",
                   home / ".gemini", home / ".codex", home / ".cursor"):
        folder.mkdir(parents=True)
    (project / ".mcp.json").symlink_to("/dev/zero")
    (project / ".codex" / "hooks.json").symlink_to("/dev/urandom")
    os.mkfifo(project / ".claude" / "settings.json")
    os.mkfifo(home / ".claude" / "settings.json")
    odd = {"mcpServers": {"memcli": {"command": "memcli", "args": 5}, "x": 5}, "hooks": {"SessionStart": [{"hooks": 5}]}}
    (project / ".gemini" / "settings.json").write_text(json.dumps(odd))
    (home / ".gemini" / "settings.json").write_text(json.dumps({"hooks": 5, "mcpServers": [1, 2]}))
    (home / ".claude" / "plugins" / "installed_plugins.json").write_text("[1, 2, 3]")
    (home / ".claude.json").write_text("[" * 100_000 + "]" * 100_000)
    (home / ".codex" / "config.toml").write_text("plugins = 5\nmcp_servers = [1]\n")
    (home / ".cursor" / "mcp.json").write_text('"a string"')
    done = memcli("--store", tmp_path / "store", "doctor", "--json", cwd=project, env={"HOME": str(home)})
    no_internal_error(done)
    assert done.returncode in (0, 3)
    hosts = {h["host"]: h for h in json.loads(done.stdout)["hosts"]}
    why = {path: reason for h in hosts.values() for path, reason in zip(h["unreadable"], h["why"], strict=True)}
    assert why[str(project / ".mcp.json")] == "not a regular file"
    assert why[str(project / ".codex" / "hooks.json")] == "not a regular file"
    assert why[str(project / ".claude" / "settings.json")] == "not a regular file"
    assert why[str(home / ".claude" / "settings.json")] == "not a regular file"
    assert why[str(home / ".claude.json")] == "nested too deeply"
    assert not any(h["hooks"] or h["mcp"] or h["plugin"] for h in hosts.values())  # odd shapes name nothing
    text = memcli("--store", tmp_path / "store", "doctor", cwd=project, env={"HOME": str(home)})
    assert f"{project / '.mcp.json'} could not be read as settings (not a regular file)" in text.stdout


# ---------------------------------------------------------------- a question's time words, read once

@pytest.fixture(scope="module")
def example_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("six") / "store"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json", "-q").code == 0
    return store


@pytest.mark.parametrize("word", ["previous", "previously", "formerly"])
def test_a_question_repeating_previous_is_read_once(example_store, word):
    question = f"Where did Caroline apply {' '.join([word] * 3000)}?"
    done = memcli("--store", example_store, "ask", question, "--json")
    no_internal_error(done)
    assert done.returncode in (0, 1)
    assert json.loads(done.stdout)["asked_time"].get("from", word).lower() == word


def test_before_is_found_in_one_pass_whatever_the_question_holds():
    """Many "before"s and a full stop not at the end (53 s on 0b51bfb for 31 KB): ten times that, parsed under a
    guard of 20 s (the parse is linear: milliseconds)."""
    from memcli.retrieve.asked_time import before_clause, previous

    question = ("what happened before the trip. and before the market with a friend before " * 4000) + "now?"
    spaces = "x" + " " * 300_000 + "previously?"
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the question's time words took more than 20 s to read"))
    signal.alarm(20)
    try:
        clause = before_clause(question)
        assert clause is not None and clause.what == "the market with a friend before now"
        assert previous(spaces) == ("x?", "previously")
    finally:
        signal.alarm(0)
    assert before_clause("Where did Umar live before Porto?").what == "Porto"
    assert before_clause("Where did Umar live before Porto? And now?") is None  # not the last sentence's
    assert before_clause("How long before Caroline can be matched") is not None  # duration: ask's own check


def test_a_hundred_kilobyte_question_is_answered(example_store):
    question = "Which adoption agency did Caroline apply to " + "and before that previously " * 3800 + "?"
    assert len(question) > 100_000
    done = memcli("--store", example_store, "ask", question, "--json")
    no_internal_error(done)
    assert done.returncode in (0, 1)


# ---------------------------------------------------------------- malformed input: exit 4, the place and why

def qa_file(tmp_path, name: str, data) -> Path:
    path = tmp_path / f"{name}.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


SQUAD_OK = {"title": "t", "paragraphs": [{"context": "Ann lives in Ghent.", "qas": [
    {"id": "1", "question": "Where does Ann live?", "answers": [{"text": "Ghent", "answer_start": 13}]}]}]}


@pytest.mark.parametrize(("data", "where"), [
    ({"data": [SQUAD_OK, 5]}, "data[1]"),
    ({"data": [{"title": "t", "paragraphs": [{"context": "x", "qas": 5}]}]}, "data[0].paragraphs[0].qas"),
    ({"data": [{"title": "t", "paragraphs": [{"context": "x", "qas": [{"id": "1", "question": 7, "answers": []}]}]}]},
     "data[0].paragraphs[0].qas[0]"),
    ({"data": [{"title": "t", "paragraphs": [{"context": "Ann", "qas": [{"id": "1", "question": "q",
                                                                            "answers": ["Ann"]}]}]}]},
     "data[0].paragraphs[0].qas[0].answers[0]"),
    ({"data": [{"title": "t", "paragraphs": [{"context": 5, "qas": []}]}]}, "data[0].paragraphs[0].context"),
    ({"data": {"dialogues": [{"edus": 5, "qas": []}]}}, "data.dialogues[0].edus"),
    ({"data": {"dialogues": [{"edus": [{"speaker": "a", "text": ["x"]}], "qas": []}]}}, "data.dialogues[0].edus[0].text"),
    ({"data": [{"title": "s", "paragraphs": [{"utterances:": [{"speakers": 5, "utterance": "hi"}], "qas": []}]}]},
     "data[0].paragraphs[0].utterances:[0].speakers"),
    ({"data": [{"title": "s", "paragraphs": [{"utterances:": [{"speakers": ["A"], "utterance": "hi"}],
                                              "qas": [{"id": "1", "question": "q", "answers": [5]}]}]}]},
     "data[0].paragraphs[0].qas[0].answers[0]"),
    ([1, 2], "top level"),
])
def test_eval_qa_names_where_a_file_is_wrong(tmp_path, data, where):
    path = qa_file(tmp_path, "bad", data)
    done = memcli("eval", "qa", path, "--json")
    no_internal_error(done)
    assert done.returncode == 4, done.stderr
    assert f"{path}: {where}" in done.stderr, done.stderr


@pytest.mark.skipif(not LOCOMO.is_file(), reason=f"no LoCoMo file at {LOCOMO}")
@pytest.mark.parametrize(("item", "field"), [(5, "qa[1]"), ({"answer": "x", "category": 1}, "qa[1].question"),
                                             ("When?", "qa[1]"), ({"question": 5, "category": 2}, "qa[1].question"),
                                             ({"question": "q", "category": "2"}, "qa[1].category"),
                                             ({"question": "q", "category": 2, "evidence": 5}, "qa[1].evidence")])
def test_eval_locomo_names_the_question_that_is_wrong(tmp_path, item, field):
    data = json.loads(LOCOMO.read_text())
    data["qa"] = data["qa"][:1] + [item]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(data))
    done = memcli("eval", "locomo", path, "--mode", "evidence-only", "--no-llm", "--questions", "2")
    no_internal_error(done)
    assert done.returncode == 4, done.stderr
    assert f"{path}: sample " in done.stderr and field in done.stderr, done.stderr


EDGE = "0001-01-01T00:00+01:00"


@pytest.mark.parametrize("args", [["grep", "agency", "--since", EDGE], ["forget", "--grep", "agency", "--dry-run",
                                                                        "--until", EDGE],
                                  ["ask", "Which agency?", "--as-of", EDGE], ["grep", "x", "--since", "9999-12-31T23:30-01:00"],
                                  ["grep", "agency", "--until", "not a day"]])
def test_a_time_outside_the_calendar_is_bad_input_naming_the_option(example_store, args):
    done = memcli("--store", example_store, *args)
    no_internal_error(done)
    assert done.returncode == 4 and f"memcli: error: {args[-2]}: " in done.stderr, done.stderr


def test_an_mcp_tool_says_what_the_cli_says(example_store):
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "MEMCLI_", "HOME", "PATH"))}
    cli = memcli("--store", example_store, "grep", "agency", "--since", EDGE)

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "memcli", "--store", str(example_store),
                                                                     "mcp"], env=env)
        async with Client(params) as client:
            for tool, args in (("memory_search", {"question": "Which agency?", "since": EDGE}),
                               ("grep", {"pattern": "agency", "since": EDGE})):
                result = await client.call_tool(tool, args)
                assert result.is_error
                said = cli.stderr.strip().removeprefix("memcli: error: ")
                assert said and said in result.content[0].text, (result.content[0].text, cli.stderr)

    anyio.run(main)


def test_a_line_said_at_the_calendars_first_minute_bounds_before_without_failing(tmp_path):
    store = tmp_path / "edge"
    for text, time in (("Umar moved to Porto.", "0001-01-01T00:00"), ("Umar lives in Lisbon now.", "2024-05-01T10:00")):
        assert run_memcli("--store", store, "remember", text, "--time", time, "--speaker", "Umar").code == 0
    done = memcli("--store", store, "ask", "Where did Umar live before Porto?", "--json")
    no_internal_error(done)
    assert done.returncode in (0, 1)
