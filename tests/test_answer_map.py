"""The reader's answer map (memcli/qa/model.py, ``Reader.fit``): numpy against what training recorded, what it
tells apart, how ``ask`` weighs it, and what happens when it cannot be used."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np

from memcli.qa import model
from memcli.retrieve import reading
from memcli.semantic.encoder import Encoder

FIXTURES = Path(__file__).parent / "fixtures"


def shipped() -> Path:
    return Path(str(resources.files("memcli.qa").joinpath(model.ANSWER_MAP)))


def test_numpy_maps_questions_as_torch_recorded_when_the_map_was_exported():
    recorded = json.loads((FIXTURES / "answer_map_outputs.json").read_text())
    assert hashlib.sha256(shipped().read_bytes()).hexdigest() == recorded["weights_sha256"]
    encoder, amap = Encoder(), model.answer_map(Encoder())
    for case in recorded["cases"]:
        mapped = amap.map(encoder.encode([case["question"]])[0])
        assert np.abs(mapped - np.array(case["mapped"])).max() < 1e-4


def test_a_span_of_the_kind_asked_fits_better_than_one_of_another_kind():
    reader = reading.shared_reader()
    cases = [("Where does she live now?", "Lisbon", "Galaxy S22"),
             ("Which sport does he play?", "tennis", "a used Volvo"),
             ("Which day is the weekly team meeting?", "Thursday", "Portland")]
    for question, kind, other in cases:
        right, wrong = reader.fit(question, [kind, other])
        assert right > wrong + 0.1, (question, right, wrong)


def test_ask_weighs_each_line_by_its_spans_fit_less_the_mean():
    lines = [reading.Line("a", 1, "Galaxy S22", 3.0), reading.Line("a", 2, "Lisbon", 2.0)]

    class Scripted:
        def fit(self, question, spans):
            return [{"Galaxy S22": 0.1, "Lisbon": 0.5}[s] for s in spans]

    fitted = reading.fits(Scripted(), "Where does she live now?", lines)
    assert [round(x.fit, 6) for x in fitted] == [-0.2, 0.2]
    weighed = reading.adjusted(fitted, reading.Choice(fit=5.0))
    assert [(x.span, round(x.margin, 6)) for x in weighed] == [("Lisbon", 3.0), ("Galaxy S22", 2.0)]
    assert reading.fits(type("NoMap", (), {"fit": lambda self, q, s: None})(), "q", lines) == lines


def test_without_a_readable_map_spans_are_not_fitted(tmp_path, monkeypatch):
    damaged = tmp_path / model.ANSWER_MAP
    damaged.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    monkeypatch.setattr(model.resources, "files", lambda package: tmp_path)
    assert model.answer_map(Encoder()) is None

    class Other:
        name = "some-other-model"

    assert model.answer_map(Other()) is None
