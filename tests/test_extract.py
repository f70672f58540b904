"""ingest --extract: facts keep their turns' refs, times and sources; bad answers keep raw turns."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES
from fakes import ScriptedModel

from memcli.ingest.entries import ingest_turns
from memcli.ingest.facts import extract_facts
from memcli.ingest.formats import parse_input
from memcli.llm.base import CallStats
from memcli.paths import Resolved
from memcli.store import CURRENT_ID, Store


def parsed_example(name="chat-messages.json"):
    path = EXAMPLES / name
    return parse_input(path.read_bytes(), str(path), default_time="2024-01-01T00:00")


def test_facts_keep_refs_times_and_sources():
    parsed = parsed_example()

    def respond(step, messages, schema):
        assert step == "extract"
        return {"facts": [
            {"text": "Sam maintains ledgerd, a Rust service on Postgres 15.", "turns": ["t0"]},
            {"text": "Sam's team writes SQL keywords in uppercase.", "turns": ["t2", "t3"]},
            {"text": "The assistant suggested batching backfills.", "turns": ["t3"]},
        ]}

    stats = CallStats()
    facts = extract_facts(parsed.turns, model=ScriptedModel(respond), stats=stats)
    assert [f.text for f in facts][0].startswith("Sam maintains ledgerd")
    first, second, third = facts
    assert first.ref == "chat-messages.json#2" and first.time == "2024-05-02T09:12" and first.speaker == "sam"
    assert second.ref == "chat-messages.json#4;chat-messages.json#5" and second.speaker is None
    assert second.source is None and third.source == "AI"
    assert stats.calls == 1 and not stats.fallbacks


def test_rejected_extraction_keeps_the_raw_turns(tmp_path):
    parsed = parsed_example()
    model = ScriptedModel(lambda step, messages, schema: {"facts": [{"text": "Invented.", "turns": ["t99"]}]})
    stats = CallStats()
    facts = extract_facts(parsed.turns, model=model, stats=stats)
    assert [f.text for f in facts] == [t.text for t in parsed.turns]
    assert stats.fallbacks == {"extract": 1} and stats.calls == 2


def test_extracted_ingest_is_skipped_when_repeated(tmp_path):
    store = Store.open(Resolved(tmp_path / "store", "test"), create=True)
    parsed = parsed_example()
    facts = extract_facts(parsed.turns, model=ScriptedModel(lambda *a: {"facts": [
        {"text": "Sam moved ledgerd from Nomad to Kubernetes.", "turns": ["t0", "t4"]}]}), stats=CallStats())
    first = ingest_turns(store, facts, source="x", fmt="chat", consumed=[t.fingerprint for t in parsed.turns],
                         input_turns=len(parsed.turns))
    assert first.added == 1 and first.turns == 5 and first.skipped == 0
    entries = [e for _, e in store.load(CURRENT_ID).doc.entries()]
    assert entries[0].ref == "chat-messages.json#2;chat-messages.json#6"
    assert parsed.turns[0].fingerprint in store.read_fingerprints()


@pytest.mark.slow
def test_extract_with_the_default_model_through_the_cli(cli, store_dir):
    result = cli("ingest", EXAMPLES / "chat-messages.json", "--extract", "--json")
    assert result.code == 0, result.stderr
    data = result.json
    assert data["turns"] == 5 and data["added"] >= 1 and data["extraction"]["calls"] >= 1
    store = Store.open(Resolved(store_dir, "test"))
    entries = [e for _, e in store.load(CURRENT_ID).doc.entries()]
    for entry in entries:  # whatever the small model wrote, provenance is intact
        assert entry.ref and all(r.startswith("chat-messages.json#") for r in entry.ref.split(";"))
        assert entry.time.startswith("2024-05-")
    again = cli("ingest", EXAMPLES / "chat-messages.json", "--extract", "--json")
    assert again.json["added"] == 0 and again.json["skipped"] == 5 and again.json["extraction"]["calls"] == 0
