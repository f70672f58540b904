"""The question map (memcli/semantic/query_map.py): numpy against what training recorded, where the ranking
uses it, and what happens when it cannot be used."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from conftest import exact_outputs

from memcli.semantic import query_map
from memcli.semantic.encoder import Encoder
from memcli.semantic.vectors import EntryVectors
from memcli.store import Store

FIXTURES = Path(__file__).parent / "fixtures"


@exact_outputs
def test_numpy_maps_questions_as_torch_recorded_when_the_map_was_exported():
    recorded = json.loads((FIXTURES / "query_map_outputs.json").read_text())
    assert hashlib.sha256(query_map.weights_path().read_bytes()).hexdigest() == recorded["weights_sha256"]
    encoder, qmap = Encoder(), query_map.QueryMap()
    for case in recorded["cases"]:
        mapped = qmap.map(encoder.encode([case["question"]])[0])
        assert np.abs(mapped - np.array(case["mapped"])).max() < 1e-4
        assert abs(float(np.linalg.norm(mapped)) - 1.0) < 1e-5


def test_questions_are_ranked_through_the_map_and_entries_keep_the_encoders_vectors(tmp_path):
    encoder = Encoder()
    vectors = EntryVectors(Store(tmp_path / "store"), None, encoder)
    question = "What activities does she do with her family?"
    own = encoder.encode([question])[0]
    half = vectors.question(question, 0.5)
    assert np.allclose(half, query_map.QueryMap().question(own, 0.5), atol=1e-6)
    assert abs(float(np.linalg.norm(half)) - 1.0) < 1e-5 and float(half @ own) < 0.999  # the map moves it
    assert np.allclose(vectors.question(question), own, atol=1e-6)  # share 0: the encoder's own
    assert list(vectors._questions) == [question]  # encoded once for both


def test_the_evidence_for_an_outer_model_maps_the_question_and_the_readers_does_not(tmp_path, monkeypatch):
    from memcli import Memory
    from memcli.index import LibraryIndex
    from memcli.retrieve import evidence_reader as policy
    from memcli.store.lines import Library

    memory = Memory(tmp_path / "store", create=True, settings={"search.vectors": "inline"})
    memory.remember("We went swimming with the kids on Sunday.", speaker="Mira", time="2023-05-20T16:03")
    shares: list[float] = []
    asked = LibraryIndex.similarities
    monkeypatch.setattr(LibraryIndex, "similarities", lambda self, text, share=0.0: shares.append(share)
                        or asked(self, text, share))
    with memory.store.reading():
        for tuning in (policy.DEFAULT, policy.ANSWERING):
            policy.ranked_entries(Library(memory.store), memory.index, "What does the family do together?",
                                  tuning=tuning)
    memory.close()
    assert shares == [policy.DEFAULT.question_map, 0.0] and shares[0] > 0


def test_a_damaged_map_warns_and_questions_keep_the_encoders_vectors(tmp_path, monkeypatch, cli):
    damaged = tmp_path / "query_map.safetensors"
    damaged.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    monkeypatch.setattr(query_map, "weights_path", lambda: damaged)
    warnings: list[str] = []
    encoder = Encoder()
    vectors = EntryVectors(Store(tmp_path / "store"), None, encoder, warnings.append)
    question = "Where did he travel last year?"
    assert np.allclose(vectors.question(question, 0.5), encoder.encode([question])[0], atol=1e-6)
    assert len(warnings) == 1 and "question map" in warnings[0] and "reinstall memcli" in warnings[0]
    doctor = cli("doctor", "--json")
    check = next(c for c in doctor.json["checks"] if c["name"] == "semantic signal")
    assert not check["ok"] and "question map" in check["detail"] and "reinstall memcli" in check["detail"]


def test_another_encoder_gets_no_map():
    class Other:
        name = "some-other-model"

    assert query_map.for_encoder(Other()) is None
    assert isinstance(query_map.for_encoder(Encoder()), query_map.QueryMap)
