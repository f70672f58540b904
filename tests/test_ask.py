"""memcli ask: evidence with no model at all, and an answer from the real default model."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from memcli.tokens import count_tokens

QUESTION = "Which adoption agency did Caroline apply to?"


def setup_store(cli):
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0


def test_evidence_only_needs_no_model(cli, monkeypatch, tmp_path):
    setup_store(cli)
    monkeypatch.setenv("MEMCLI_MODEL", str(tmp_path / "no-such-model.gguf"))  # would fail if loaded
    result = cli("ask", QUESTION, "--evidence-only", "--json")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["mode"] == "evidence-only" and data["answer"] is None
    assert set(data) >= {"question", "answer", "evidence", "citations", "rounds", "tool_calls", "tokens", "timings"}
    refs = {r for item in data["evidence"] for r in item["refs"]}
    assert "D2:5" in refs  # the turn that answers it
    for item in data["evidence"]:
        assert set(item) == {"doc", "start_line", "end_line", "seqs", "refs", "time", "text", "tokens", "rank"}
        read = cli("read", item["doc"], "--lines", f"{item['start_line']}-{item['end_line']}", "--json").json
        assert [int(line["entry"]["meta"]["seq"]) for line in read["lines"]] == item["seqs"]
    assert data["tokens"]["evidence"] <= 2000 and data["tokens"]["prompt"] == 0


def test_budget_stdin_and_no_evidence(cli):
    setup_store(cli)
    small = cli("ask", "-", "--evidence-only", "--budget", "120", "--json", stdin=QUESTION.encode())
    assert small.code == 0 and small.json["question"] == QUESTION
    assert sum(count_tokens(e["text"]) for e in small.json["evidence"]) <= 120
    nothing = cli("ask", "xylophone quartz", "--evidence-only", "--json")
    assert nothing.code == 1 and nothing.json["evidence"] == []
    assert cli("ask", "  ", "--evidence-only").code == 2
    assert cli("ask", QUESTION, "--budget", "10").code == 2
    text = cli("ask", QUESTION, "--evidence-only")
    assert text.stdout.startswith("CURRENT:") and "Open Door" in text.stdout


@pytest.mark.slow
def test_answer_with_the_real_default_model(cli):
    setup_store(cli)
    result = cli("ask", QUESTION, "--json", "--reader", "agent")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["mode"] == "agent" and isinstance(data["answer"], str) and data["answer"]
    assert data["citations"] and data["tokens"]["prompt"] > data["tokens"]["evidence"] > 0
    assert data["tokens"]["generated"] > 0 and data["timings"]["answer_s"] > 0
    text = cli("ask", QUESTION)  # the small profile's default: the deterministic evidence, memcli's reader
    assert "sources: CURRENT:" in text.stdout and text.stdout.splitlines()[0].strip()
    # (on this raw memory the reader answers "babysit": test_answers.py's strict xfail of the quickstart question)
    assert cli("ask", QUESTION, "--reader", "evidence-only", "--no-agent").code == 2


def test_an_answer_shows_the_line_that_decided_it(cli):
    """Under the reader's answer, the line a person checks it against: who said it, when, its citation, its
    words; --json has the same under decided.said."""
    setup_store(cli)
    data = cli("ask", QUESTION, "--json").json
    assert not data["abstained"] and data["decided"]["by"] == "reader"
    doc, _, line = data["decided"]["line"].rpartition(":")
    said = data["decided"]["said"]
    entry = next(x["entry"] for x in cli("read", doc, "--lines", line, "--json").json["lines"] if "entry" in x)
    assert said["text"] == entry["text"] and said["speaker"] == entry["meta"]["speaker"]
    assert said["time"] and said["time"].startswith(entry["meta"]["time"][:10])
    text = cli("ask", QUESTION).stdout.splitlines()
    shown = f"-- {said['speaker']}, {said['time'].replace('T', ' ')} ({data['decided']['line']}): "
    assert text[0] == data["answer"] and text[2].startswith(shown) and said["text"][:40] in text[2]
    unknown = cli("ask", "What is the name of Caroline's goldfish?", "--json").json
    if unknown["abstained"]:  # "I don't know": no line decided it, none shown
        assert "said" not in (unknown.get("decided") or {})
