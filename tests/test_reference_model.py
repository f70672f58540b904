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


# questions on the shipped example; every one is answered in the example's memory units
COMPOSED_QUESTIONS = [
    "Which adoption agency did Caroline apply to?",
    "Why did Caroline not choose Harbor Light?",
    "When did Caroline pass the home study?",
    "What does Priya make in her class?",
    "What car did Caroline buy?",
    "Who offered to babysit every Friday?",
    "How long does it take before Caroline can be matched?",
    "What did Priya's sister get for her birthday?",
    "What course does Caroline take after the home study?",
    "Where did Priya's cousin adopt?",
]
COMPOSED_RECOMPUTE = 64  # the recomputation bench_kv.py measured at 90% top-1 agreement on this model (40 questions)


@pytest.mark.slow
@needs_reference
@pytest.mark.xfail(strict=True, reason="7 of the 10 agree with 64 recomputed tokens (every one with all of each unit "
                                       "recomputed): the disagreements, at full-prefill margins 0.52, 0.24 and "
                                       "0.10, name another agency, place or person; docs/benchmarks.md, 'Composed agreement on 40 "
                                       "questions'")
def test_composed_memory_agrees_with_a_full_prefill_on_the_reference_model(example_store):
    """ask --kv-compose's context (every memory unit restored from its own block, 64 tokens after each seam
    recomputed) against a full prefill of the same units and question: the first token agrees on at
    least 90% of the example's questions, the threshold bench_kv.py supports on this model."""
    from memcli import Memory
    from memcli.kv import block_store
    from memcli.kv.composed_ask import ComposedPrompt
    from memcli.kv.engine import KVEngine, Unit
    from memcli.kv.units import Units
    from memcli.llm import open_model
    from memcli.store.lines import Library

    memory = Memory(str(example_store), settings={"model.path": REFERENCE, "model.threads": 2})
    model = open_model(memory.settings, kv_sequences=2)
    try:
        engine = KVEngine(model, block_store(memory.store, memory.settings))
        prompt = ComposedPrompt(engine)
        units = [Unit(u.label, engine.tokenize(u.text)) for u in Units(Library(memory.store)).every()]
        assert len(units) >= 3  # seams to cross
        agree = []
        for question in COMPOSED_QUESTIONS:
            tail = prompt.tail(question)
            engine.reset()
            engine.load_chain([prompt.prefix])
            engine.prefill([t for u in units for t in u.tokens] + tail)
            full = int(engine.last_logits().argmax())
            engine.reset()
            engine.compose(prompt.prefix, units, recompute=COMPOSED_RECOMPUTE)
            engine.prefill(tail)
            agree.append(int(engine.last_logits().argmax()) == full)
        assert sum(agree) >= 0.9 * len(agree), [q for q, ok in zip(COMPOSED_QUESTIONS, agree, strict=True) if not ok]
    finally:
        memory.close()
