"""Bad and hostile input: every case is exit 4 naming the file, quickly, and nothing is written."""

from __future__ import annotations

import json
import os

import pytest
from conftest import snapshot

MESSAGE = {"role": "user", "content": "hello"}

CASES = {
    "deeply nested JSON": ("deep.json", "[" * 100_000 + "]" * 100_000),
    "a timestamp that overflows": ("big.json", json.dumps([{**MESSAGE, "timestamp": 1e300}])),
    "a date beyond the calendar": ("year.json", json.dumps([{**MESSAGE, "timestamp": "99999-01-01T00:00"}])),
    "a session number of 5000 digits": ("sess.json", json.dumps({"speaker_a": "A", "speaker_b": "B",
                                                                  "session_" + "9" * 5000: [{"speaker": "A",
                                                                                             "text": "hi"}]})),
    "a lone surrogate": ("sur.json", '[{"role": "user", "content": "\\ud800 broken"}]'),
    "a .json file holding null": ("null.json", "null"),
    "a .json file holding a number": ("num.json", "42"),
    "a .json file holding a string": ("str.json", '"hello"'),
    "a role given as null": ("rnull.json", json.dumps([{"role": None, "content": "hi"}])),
    "a role given as an object": ("robj.json", json.dumps([{"role": {"x": 1}, "content": "hi"}])),
    "a NUL byte in a message": ("nul.json", json.dumps([{"role": "user", "content": "a\u0000b"}])),
    "a NUL byte in text": ("nul.txt", "first paragraph\n\nsecond\u0000paragraph\n"),
    "a single line longer than an entry may be": ("long.txt", "x" * 30_000 + "\n"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_is_exit_4_and_writes_nothing(cli, store_dir, tmp_path, case):
    name, text = CASES[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = cli("ingest", path, "--json")
    assert result.code == 4, (case, result.stdout, result.stderr)
    assert result.json["error"]["type"] == "bad_input" and name in result.json["error"]["message"]
    assert "internal error" not in result.stderr
    assert not store_dir.exists()  # not even an empty store


def test_special_files_are_refused_without_waiting(cli, store_dir, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # no writer: reading it would wait for ever
    for path in (fifo, "/dev/zero"):
        result = cli("ingest", path, "--json")
        assert result.code == 4 and "not a regular file" in result.json["error"]["message"], path
    assert not store_dir.exists()


def test_input_size_limits_are_settings(cli, store_dir, tmp_path, monkeypatch):
    assert cli("ingest", "-", "--format", "text", stdin=b"a first memory\n").code == 0
    before = snapshot(store_dir)
    big = tmp_path / "big.txt"
    big.write_text("word " * 400 + "\n")
    monkeypatch.setenv("MEMCLI_MAX_INPUT_BYTES", "1000")
    assert cli("ingest", big).code == 4
    piped = cli("ingest", "-", "--format", "text", stdin=big.read_bytes())
    assert piped.code == 4 and "ingest.max_bytes" in piped.stderr
    monkeypatch.setenv("MEMCLI_MAX_INPUT_BYTES", "100000")
    monkeypatch.setenv("MEMCLI_MAX_ENTRY_CHARS", "100")
    long_entry = cli("ingest", big)
    assert long_entry.code == 4 and "ingest.max_entry_chars" in long_entry.stderr
    assert snapshot(store_dir) == before
    monkeypatch.setenv("MEMCLI_MAX_ENTRY_CHARS", "5000")
    assert cli("ingest", big).code == 0


def test_terminal_output_escapes_control_characters(cli, store_dir):
    hostile = "red \x1b[31malert\x1b[0m and a bell \x07 and a bidi \u202e override"
    assert cli("ingest", "-", "--format", "text", stdin=hostile.encode() + b"\n").code == 0
    current = store_dir / "CURRENT.md"
    current.write_text(current.read_text() + "a hand-written line with a NUL \x00 byte\n")
    for args in (["grep", "alert|NUL"], ["read", "CURRENT"], ["search", "bell"], ["ask", "red bell", "--evidence-only"]):
        shown = cli(*args)
        assert shown.code == 0, args
        assert not any(c in shown.stdout for c in "\x1b\x07\x00\u202e"), args
        assert "\\x1b[31malert" in shown.stdout, args
    exact = cli("grep", "alert", "--json").json["matches"][0]["text"]
    assert "\x1b[31malert\x1b[0m" in exact and "\u202e" in exact  # --json keeps the exact text


@pytest.mark.parametrize("payload, message", [
    (b'{"hook_event_name": "SessionEnd", "transcript_path": "/tmp/a\\u0000b.jsonl"}', "NUL"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
])
def test_hostile_hook_events_are_bad_input(cli, store_dir, payload, message):
    done = cli("hook", "claude-code", stdin=payload)
    assert done.code == 4 and message in done.stderr, done.stderr
    assert "internal error" not in done.stderr


@pytest.mark.parametrize("text, message", [
    ('[{"role": "user", "content": "hi", "timestamp": "0001-01-01T00:00+23:59"}]', "out of range"),
    (json.dumps([{"id": "c", "current_node": ["n1"], "mapping": {"n1": {"id": "n1", "message": None}}}]),
     "not a node id"),
    (json.dumps([{"id": "c", "current_node": {"n": 1}, "mapping": {"n1": {"id": "n1"}}}]), "not a node id"),
    (json.dumps([{"id": "c", "current_node": None, "mapping": {"n1": {"id": "n1", "parent": None,
                                                                       "children": [{"x": 1}]}}}]),
     "not a node id"),
])
def test_hostile_shapes_are_exit_4_with_the_place(cli, store_dir, tmp_path, text, message):
    path = tmp_path / "conversations.json"
    path.write_text(text)
    done = cli("ingest", path)
    assert done.code == 4 and message in done.stderr and "internal error" not in done.stderr, done.stderr
    assert not (store_dir / "CURRENT.md").exists()
