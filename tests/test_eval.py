"""memcli eval locomo: records, summary, resume, selection, and the baselines with the real model."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES
from fakes import ScriptedModel

from memcli.eval.locomo import select

EXAMPLE = EXAMPLES / "caroline-and-priya.json"


def test_evidence_only_needs_no_model_and_writes_records(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCLI_MODEL", str(tmp_path / "missing.gguf"))  # would fail if loaded
    out = tmp_path / "r.jsonl"
    result = cli("eval", "locomo", EXAMPLE, "--mode", "evidence-only", "--out", out, "--json", store=False)
    assert result.code == 0, result.stderr
    data = result.json
    questions = json.loads(EXAMPLE.read_text())["qa"]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == data["summary"]["all"]["questions"] == len(questions)
    assert all(r["answer"] is None and r["f1"] is None for r in records)
    assert data["summary"]["all"]["recall_all"] == 1.0  # a small conversation fits the budget whole
    worded = [r for r in records if r["category"] in (1, 3, 4)]
    assert all(r["answer_shown"] is None for r in records if r["category"] not in (1, 3, 4))
    assert worded and all(0.0 <= r["answer_shown"] <= 1.0 for r in worded)
    agency = next(r for r in records if r["question"] == "Which adoption agency did Caroline apply to?")
    assert agency["answer_shown"] == pytest.approx(2 / 3, abs=1e-4)  # "Open Door Adoptions": its gold line says "Open Door"
    assert {str(r["category"]) for r in records} == {k for k in data["summary"] if k != "all"}
    assert not (tmp_path / "store").exists()  # no store of the user's was made or touched


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_refuses_to_overwrite_and_resumes(cli, tmp_path, monkeypatch):
    out = tmp_path / "r.jsonl"
    args = ("eval", "locomo", EXAMPLE, "--mode", "evidence-only", "--out", out)
    assert cli(*args, "--questions", "2", store=False).code == 0
    assert len(out.read_text().splitlines()) == 2
    assert cli(*args, store=False).code == 2  # exists, no --resume
    out.write_text(out.read_text() + '{"truncated": ')  # a crash mid-line
    result = cli(*args, "--resume", "--json", store=False)
    assert result.code == 0, result.stderr
    assert result.json["resumed"] == 2 and result.json["summary"]["all"]["questions"] == 4
    lines = out.read_text().splitlines()
    assert sum(1 for line in lines if line.startswith("{\"conversation\"")) == 4


def test_bad_arguments(cli, tmp_path):
    assert cli("eval", "locomo", EXAMPLE, "--mode", "magic", store=False).code == 2
    assert cli("eval", "locomo", EXAMPLE, "--categories", "1,9", store=False).code == 2
    assert cli("eval", "locomo", EXAMPLE, "--resume", store=False).code == 2
    assert cli("eval", "locomo", EXAMPLE, "--sample", "nope", "--mode", "evidence-only", store=False).code == 4
    chat = tmp_path / "chat.json"
    chat.write_text('[{"role": "user", "content": "hi"}]')
    assert cli("eval", "locomo", chat, "--mode", "evidence-only", store=False).code == 4


def test_question_selection_round_robin():
    qs = [{"category": c} for c in (4, 4, 4, 2, 1, 1, 5)]
    assert [i for i, _ in select(qs, {1, 2, 4}, 3)] == [0, 3, 4]
    assert [i for i, _ in select(qs, {1, 2, 4}, None)] == [0, 1, 2, 3, 4, 5]
    assert [i for i, _ in select(qs, {5}, None)] == [6]


@pytest.mark.parametrize("mode", ["oracle", "bm25-turns"])
def test_baselines_score_a_scripted_answer(cli, monkeypatch, mode):
    model = ScriptedModel(lambda step, messages, schema: "Open Door")  # what the gold line says
    monkeypatch.setattr("memcli.llm.open_model", lambda *_, **__: model)
    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")  # the scripted model writes the answer
    data = cli("eval", "locomo", EXAMPLE, "--mode", mode, "--categories", "4", "--questions", "1", "--json",
               store=False).json
    row = data["summary"]["all"]
    assert row["questions"] == 1 and row["f1"] == 0.8 and row["recall_all"] == 1.0  # gold: Open Door Adoptions


def test_the_answer_context_is_recorded_and_part_of_the_resume_key(cli, monkeypatch, tmp_path):
    model = ScriptedModel(lambda step, messages, schema: "Open Door Adoptions")
    monkeypatch.setattr("memcli.llm.open_model", lambda *_, **__: model)
    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")
    out = tmp_path / "r.jsonl"
    args = ("eval", "locomo", EXAMPLE, "--mode", "bm25-turns", "--questions", "1", "--out", out, "--resume", "--json")
    first = cli(*args, "--answer-context", "30", store=False).json
    assert first["answer_context"] == 30 and first["resumed"] == 0
    record = json.loads(out.read_text().splitlines()[0])
    assert record["answer_context"] == 30 and 0 < record["read_tokens"] <= 30 < record["evidence_tokens"]
    assert cli(*args, "--answer-context", "30", store=False).json["resumed"] == 1
    again = cli(*args, "--answer-context", "0", store=False).json  # another setting: asked again
    assert again["resumed"] == 0 and len(out.read_text().splitlines()) == 2
    assert json.loads(out.read_text().splitlines()[1])["read_tokens"] == record["evidence_tokens"]


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_the_i_dont_know_rate_is_reported_by_category(cli, monkeypatch, tmp_path):
    """Category 5 (questions about what was never said) is scored by how often the answer is I don't know; an
    answer that names what the evidence never says is one (it is not grounded)."""
    model = ScriptedModel(lambda step, messages, schema: "in Lisbon with Harbor Light")
    monkeypatch.setattr("memcli.llm.open_model", lambda *_, **__: model)
    monkeypatch.setenv("MEMCLI_ASK_ANSWER", "generate")
    conv = json.loads(EXAMPLE.read_text())
    conv["qa"].append({"question": "Which agency did Priya apply to?", "evidence": ["D2:5"], "category": 5,
                       "adversarial_answer": "Open Door Adoptions"})
    path = tmp_path / "with-5.json"
    path.write_text(json.dumps(conv))
    out = tmp_path / "r.jsonl"
    data = cli("eval", "locomo", path, "--mode", "ask", "--categories", "4,5", "--json",
               "--out", out, store=False).json
    assert data["summary"]["5"]["abstained"] == 1.0 and data["summary"]["5"]["questions"] == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["answer"] == "I don't know" and r["abstained"] for r in records)  # Lisbon is in no line
    table = cli("eval", "locomo", path, "--mode", "ask", "--categories", "5", store=False)
    header, first = (line.split("\t") for line in table.stdout.splitlines()[:2])
    assert table.code == 0 and header[4] == "I don't know" and first[4] == "100.0%"


@pytest.mark.slow
def test_every_answering_mode_with_the_real_model(cli, tmp_path):
    out = tmp_path / "r.jsonl"
    for mode in ("ask", "no-agent", "full-context", "oracle"):
        result = cli("eval", "locomo", EXAMPLE, "--mode", mode, "--questions", "1", "--out", out, "--resume",
                     "--json", store=False)
        assert result.code == 0, result.stderr
        row = result.json["summary"]["all"]
        assert row["questions"] == 1 and row["f1"] is not None
        assert row["prompt_tokens"] >= 0  # the small profile's answer is memcli's reader: no prompt
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["mode"] for r in records] == ["ask", "no-agent", "full-context", "oracle"]
    assert all(isinstance(r["answer"], str) and 0 <= r["f1"] <= 1 for r in records)


@pytest.mark.slow
def test_kv_compose_mode_answers_from_composed_units_with_the_real_model(cli, monkeypatch):
    """--mode kv-compose runs what ask --kv-compose does: units within the budget (the default model's
    extractive answer), an answer, only the question prefilled once the units' blocks are made; a server
    backend is refused."""
    data = cli("eval", "locomo", EXAMPLE, "--mode", "kv-compose", "--categories", "4", "--questions", "2",
               "--json", store=False).json
    row = data["summary"]["all"]
    assert data["mode"] == "kv-compose" and row["questions"] == 2
    assert data["answer_context"] == 0  # as ask --kv-compose with the extractive answer: the whole budget
    assert row["f1"] is not None and 0 < row["read_tokens"] <= 2000
    monkeypatch.setenv("MEMCLI_BASE_URL", "http://127.0.0.1:9/v1")
    assert cli("eval", "locomo", EXAMPLE, "--mode", "kv-compose", store=False).code == 3
