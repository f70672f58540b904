"""The agentic reader and the hybrid reader, driven by a scripted model through the real CLI."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, snapshot
from fakes import ScriptedModel

QUESTION = "Which adoption agency did Caroline apply to?"


@pytest.fixture
def store(cli, store_dir):
    assert cli("ingest", EXAMPLES / "caroline-and-priya.json").code == 0
    return store_dir


def use_model(monkeypatch, responder) -> ScriptedModel:
    model = ScriptedModel(responder)
    monkeypatch.setattr("memcli.llm.open_model", lambda *_, **__: model)  # the one model seam
    monkeypatch.setenv("MEMCLI_MODEL_PROFILE", "capable")  # these tests are about the agent: a capable model's reader
    monkeypatch.setenv("MEMCLI_SEMANTIC", "false")  # the agent loop, not the ranking: no vectors to compute per test
    return model


def agent_round(calls=(), snippets=(), done=False, docs=()) -> dict:
    return {"relevant_snippets": list(snippets), "relevant_docs": list(docs),
            "tool_calls": [{"name": n, "arguments": a} for n, a in calls], "done": done}


def line_of(cli, text: str) -> int:
    return cli("grep", text, "--json").json["matches"][0]["line"]


def test_valid_rounds_cite_evidence_and_trace(cli, store, monkeypatch):
    applied = line_of(cli, "decided to apply")

    def respond(step, messages, schema):
        if step == "answer":
            return "Open Door."
        rounds = sum(1 for m in messages if m["role"] == "assistant")
        if rounds == 0:
            return agent_round(calls=[("grep", {"pattern": "apply to"}), ("search", {"query": "agency"})])
        assert "decided to apply" in messages[-1]["content"]  # the grep result reached the model
        return agent_round(snippets=[{"doc_id": "CURRENT", "start_line": applied, "end_line": applied}], done=True)

    model = use_model(monkeypatch, respond)
    result = cli("ask", QUESTION, "--json", "--budget", "120", "--trace")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["mode"] == "agent" and data["answer"] == "Open Door."
    assert data["rounds"] == 2 and data["stop"] == "done"
    assert [c["name"] for c in data["tool_calls"][0]["tool_calls"]] == ["grep", "search"]
    assert data["tool_calls"][1]["relevant_snippets"] == [
        {"doc_id": "CURRENT", "start_line": applied, "end_line": applied}]
    assert any(e["start_line"] <= applied <= e["end_line"] for e in data["evidence"])
    assert sum(e["tokens"] for e in data["evidence"]) <= 120
    assert data["tokens"]["model_calls"] == 3 and data["tokens"]["retrieval_calls"] == 2
    assert "[round 1]" in result.stderr and "grep" in result.stderr  # --trace
    assert model.steps() == ["agent", "agent", "answer"]


def test_the_answer_reads_the_cited_lines_and_the_best_ranked_evidence(cli, store, monkeypatch):
    applied = line_of(cli, "decided to apply")
    model = use_model(monkeypatch, lambda step, messages, schema: agent_round(
        snippets=[{"doc_id": "CURRENT", "start_line": applied, "end_line": applied}], done=True)
        if step == "agent" else "Open Door.")
    result = cli("ask", QUESTION, "--json", "--budget", "400", "--answer-context", "60")
    assert result.code == 0, result.stderr
    data = result.json
    read, evidence = data["read"], data["evidence"]
    assert 0 < data["tokens"]["read"] <= 60 < data["tokens"]["evidence"] <= 400
    spans = [tuple(map(int, cite.split(":")[1].split("-"))) for cite in read]
    assert any(start <= applied <= end for start, end in spans)  # the cited line comes first
    for start, end in spans:  # what the answer read is part of the evidence returned
        assert any(e["start_line"] <= start and end <= e["end_line"] for e in evidence)
    prompt = model.calls[-1][1][1]["content"]
    assert "decided to apply" in prompt and prompt.count("\n") < sum(e["text"].count("\n") + 1 for e in evidence)
    # text output: the answer, the ranges it was written from, then the rest of the evidence
    text = cli("ask", QUESTION, "--budget", "400", "--answer-context", "60").stdout
    assert "sources: " + ", ".join(read) in text and "more evidence: " in text
    assert cli("ask", QUESTION, "--answer-context", "-1").code == 2
    # 0 reads all of it
    data = cli("ask", QUESTION, "--json", "--budget", "400", "--answer-context", "0").json
    assert data["read"] == data["citations"] and data["tokens"]["read"] == data["tokens"]["evidence"]


def test_first_prompt_has_catalog_question_and_a_search(cli, store, monkeypatch):
    model = use_model(monkeypatch, lambda step, messages, schema: agent_round(done=True)
                      if step == "agent" else "Open Door")
    assert cli("ask", QUESTION, "--json").code == 0
    opening = model.calls[0][1][1]["content"]
    assert "Catalog" in opening and QUESTION in opening and "Open Door" in opening
    # the part other questions share (instructions, catalog) is marked for KV blocks, the question is not
    (system, catalog), = model.shared[0]
    assert system == model.calls[0][1][0] and opening.startswith(catalog["content"])
    assert "Catalog" in catalog["content"] and QUESTION not in catalog["content"]
    answer_messages, answer_shared = model.calls[-1][1], model.shared[-1]
    assert answer_shared[0] == answer_messages[:1]
    assert answer_messages[1]["content"].startswith(answer_shared[1][1]["content"])
    assert QUESTION not in answer_shared[1][1]["content"]


def test_invalid_json_falls_back_to_the_recall_guard(cli, store, monkeypatch):
    model = use_model(monkeypatch, lambda step, messages, schema: "not json {" if step == "agent" else "ok")
    result = cli("ask", QUESTION, "--json", "--budget", "300")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["stop"] == "invalid-answer" and data["rounds"] == 0 and data["tokens"]["invalid"] == 2
    refs = {r for e in data["evidence"] for r in e["refs"]}
    assert "D2:5" in refs  # BM25 still finds the answer
    assert model.steps() == ["agent", "agent", "answer"]  # one retry, then no more agent calls


def test_invalid_shapes_are_rejected_in_code(cli, store, monkeypatch):
    bad = [{"tool_calls": "grep", "relevant_snippets": [], "done": False},
           {"relevant_snippets": [], "tool_calls": [{"name": "grep", "arguments": {}}] * 9, "done": False}]
    answers = iter(bad)
    use_model(monkeypatch, lambda step, messages, schema: next(answers) if step == "agent" else "ok")
    data = cli("ask", QUESTION, "--json").json
    assert data["stop"] == "invalid-answer" and data["tokens"]["invalid"] == 2


def test_hostile_tool_arguments_come_back_as_errors(cli, store, store_dir, monkeypatch, tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("- <seq=1> top secret\n")
    assert cli("ingest", "-", "--format", "text", "--no-auto", stdin=b"a" * 5000 + b"b\n").code == 0
    before = snapshot(store_dir)
    hostile = [
        ("grep", {"pattern": "("}),  # bad regex
        ("grep", {"pattern": "(a|aa)+$"}),  # backtracks without end on the line of "a"s below
        ("grep_doc", {"doc_id": "../secret", "pattern": "secret"}),
        ("read_lines", {"doc_id": str(secret), "start_line": 1, "end_line": 5}),
        ("read_lines", {"doc_id": "CURRENT", "start_line": 1, "end_line": 10 ** 12}),
        ("read_lines", {"doc_id": "no-such-doc", "start_line": 1}),
        ("read_lines", {"doc_id": "CURRENT", "start_line": "1; rm -rf /"}),
        ("list_docs", {"offset": -5}),
        ("delete_doc", {"doc_id": "CURRENT"}),
        ("search", "not an object"),
        ("search", {"query": "x" * 5000}),
    ]
    answers = iter([agent_round(calls=hostile[i:i + 3]) for i in range(0, len(hostile), 3)])

    def respond(step, messages, schema):
        return next(answers, agent_round(done=True)) if step == "agent" else "ok"

    use_model(monkeypatch, respond)
    result = cli("ask", QUESTION, "--json", "--max-rounds", "7")
    assert result.code == 0, result.stderr
    calls = [c for r in result.json["tool_calls"] for c in r["tool_calls"]]
    assert len(calls) == len(hostile)
    read_all = calls[4]
    errors = [c for c in calls if "error" in c]
    assert read_all not in errors and len(read_all["lines"]) <= 40  # clamped, not refused
    assert len(errors) == len(hostile) - 1
    assert all("secret" not in json.dumps(c["lines"]) for c in calls)
    assert snapshot(store_dir) == before  # nothing written


def test_a_model_that_never_says_done_stops_at_max_rounds(cli, store, monkeypatch):
    def respond(step, messages, schema):
        if step != "agent":
            return "ok"
        n = sum(1 for m in messages if m["role"] == "assistant")
        line = 12 + 8 * n  # a new snippet every round: always progress
        return agent_round(calls=[("read_lines", {"doc_id": "CURRENT", "start_line": line, "end_line": line})],
                           snippets=[{"doc_id": "CURRENT", "start_line": line, "end_line": line}])

    model = use_model(monkeypatch, respond)
    data = cli("ask", QUESTION, "--json", "--max-rounds", "3").json
    assert data["rounds"] == 3 and data["stop"] == "max-rounds"
    assert model.steps().count("agent") == 3


def test_a_round_with_nothing_new_stops_the_loop(cli, store, monkeypatch):
    use_model(monkeypatch, lambda step, messages, schema: agent_round(calls=[("grep", {"pattern": "Open Door"})])
              if step == "agent" else "ok")
    data = cli("ask", QUESTION, "--json").json
    assert data["rounds"] == 2 and data["stop"] == "no-progress"


def test_snippets_are_checked_and_expanded(cli, store, monkeypatch):
    applied = line_of(cli, "decided to apply")
    snippets = [{"doc_id": "CURRENT", "start_line": applied, "end_line": applied},
                {"doc_id": "nope", "start_line": 1, "end_line": 2},
                {"doc_id": "CURRENT", "start_line": 9, "end_line": 3},
                {"doc_id": "CURRENT", "start_line": 1, "end_line": 3}]  # front matter: no entries
    use_model(monkeypatch, lambda step, messages, schema: agent_round(snippets=snippets, done=True)
              if step == "agent" else "ok")
    data = cli("ask", QUESTION, "--json", "--budget", "400").json
    round_one = data["tool_calls"][0]
    assert round_one["relevant_snippets"] == snippets[:1] and len(round_one["rejected_snippets"]) == 3
    # CURRENT's one heading block is larger than a quarter of the budget: the snippet and two entries each side
    covered = {n for e in data["evidence"] for n in range(e["start_line"], e["end_line"] + 1)}
    assert set(range(applied - 2, applied + 3)) <= covered


def test_budget_stop(cli, store, monkeypatch):
    use_model(monkeypatch, lambda step, messages, schema: agent_round(
        snippets=[{"doc_id": "CURRENT", "start_line": 12, "end_line": 40}]) if step == "agent" else "ok")
    data = cli("ask", QUESTION, "--json", "--budget", "100").json
    assert data["stop"] == "budget" and data["rounds"] == 1


def test_no_agent_selects_documents_then_bm25(cli, store, monkeypatch):
    assert cli("consolidate", "--no-llm", "--json").code == 0
    docs = [d["id"] for d in cli("docs", "--json").json["docs"] if d["id"] != "CURRENT"]
    assert docs
    answers = iter([{"relevant_docs": ["made-up-id"]}, {"relevant_docs": [docs[0]]}])
    model = use_model(monkeypatch, lambda step, messages, schema: next(answers) if step == "select" else "Open Door")
    data = cli("ask", QUESTION, "--no-agent", "--json").json
    assert data["mode"] == "no-agent" and data["answer"] == "Open Door"
    assert data["tool_calls"][0] == {"tool": "select_docs", "shown": len(docs), "chosen": [docs[0]]}
    assert model.steps() == ["select", "select", "answer"] and data["tokens"]["invalid"] == 1
    assert "D2:5" in {r for e in data["evidence"] for r in e["refs"]}


def test_modes_exclude_each_other(cli, store):
    assert cli("ask", QUESTION, "--no-agent", "--evidence-only").code == 2
    assert cli("ask", QUESTION, "--max-rounds", "0").code == 2
