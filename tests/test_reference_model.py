"""The capable paths on the 1.5B reference model (../shared/tools/reference-model), when MEMCLI_REFERENCE_MODEL
names its GGUF: never a dependency, so without it these tests skip and say why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_memcli

REFERENCE = os.environ.get("MEMCLI_REFERENCE_MODEL", "")  # read before the fixtures clear MEMCLI_* variables
needs_reference = pytest.mark.skipif(
    not REFERENCE or not Path(REFERENCE).is_file(),
    reason="MEMCLI_REFERENCE_MODEL does not name the reference GGUF (../shared/tools/reference-model prints it)")


@pytest.fixture(scope="module")
def example_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reference")
    store = folder / "store"
    assert run_memcli("--store", store, "ingest", EXAMPLES / "caroline-and-priya.json",
                      env={"MEMCLI_AUTO_CONSOLIDATE": "false"}).code == 0
    return store


@pytest.mark.slow
@needs_reference
@pytest.mark.parametrize("answer", ["extract", "generate"])
def test_the_reference_model_answers_the_agency_question_from_the_evidence(example_store, answer):
    import json

    done = run_memcli("--store", example_store, "--model", REFERENCE, "ask",
                      "Which adoption agency did Caroline apply to?", "--answer", answer, "--json")
    assert done.code == 0, done.stderr
    data = json.loads(done.stdout)
    assert "Open Door" in data["answer"] and not data["abstained"], data["answer"]
    read = " ".join(e["text"] for e in data["evidence"])
    from memcli.retrieve.answer import grounded
    from memcli.retrieve.evidence import Evidence

    assert grounded(data["answer"], [Evidence(doc="x", start_line=1, end_line=1, text=read)])


@pytest.mark.slow
@needs_reference
def test_the_reference_model_says_i_dont_know_about_what_was_never_said(example_store):
    done = run_memcli("--store", example_store, "--model", REFERENCE, "ask", "Which adoption agency did Priya "
                      "apply to?", "--answer", "extract")
    assert done.code == 1 and done.stdout.startswith("I don't know"), done.stdout
