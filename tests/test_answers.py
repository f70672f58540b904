"""Clean answers: the real default model's answers end where the answer ends (no echoed speaker label, no
loop), and the cleaning rules themselves on replies the real model may or may not produce."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES

from memcli import Memory
from memcli.retrieve.answer import UNKNOWN, clean, grounded
from memcli.retrieve.evidence import Evidence

QUESTIONS = [
    "Which adoption agency did Caroline apply to?",
    "What class did Priya sign up for?",
    "Where did Priya's cousin adopt?",
    "What scares Caroline the most about adopting?",
    "What is Caroline's new apartment like?",
    "When did Caroline start researching adoption agencies?",
]


def repeated_4gram(text: str) -> bool:
    words = re.findall(r"[\w']+", text.lower())
    grams = [tuple(words[i:i + 4]) for i in range(len(words) - 3)]
    return len(grams) != len(set(grams))


@pytest.mark.slow
def test_real_default_model_answers_are_short_and_clean(tmp_path):
    memory = Memory(tmp_path / "store", create=True)
    memory.ingest(EXAMPLES / "caroline-and-priya.json")
    assert memory.profile.name == "small" and memory.default_reader() == "evidence"
    assert memory.answer_style() == "extract"
    answers = [memory.ask(question) for question in QUESTIONS]
    for result in answers:
        text = result.answer
        assert result.mode == "evidence" and text and result.tokens["model_calls"] <= 1
        assert result.abstained or any(text in e.text for e in result.read) or (  # a span of what it read
            "When" in result.question and grounded(text, result.read)), text  # or the date of a line read
        assert "\n" not in text and len(text.split()) <= 40, text
        assert not repeated_4gram(text), text
        assert not re.search(r"(^|\s)(Caroline|Priya|user|assistant):", text), text


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="memcli's reader answers the quickstart's question, on raw memory, with "
                                       "'babysit' (a line of Caroline's it scores above the one that names Open Door)")
def test_the_quickstarts_question_gets_the_fact_it_asks_for(tmp_path):
    with Memory(tmp_path / "store", create=True) as memory:
        memory.ingest(EXAMPLES / "caroline-and-priya.json")
        assert "Open Door" in memory.ask(QUESTIONS[0]).answer


def evidence(*lines: str) -> list[Evidence]:
    return [Evidence(doc="CURRENT", start_line=1, end_line=len(lines), text="\n".join(lines))]


def test_clean_cuts_labels_loops_lines_and_second_sentences():
    labels = {"Priya", "Caroline"}
    looped = ("Priya: Open Door Adoptions Priya: Caroline, that's a wonderful choice. I'm going to be a part "
              "of a new family. I'm going to be a part of a new family.")
    assert clean(looped, labels) == "Open Door Adoptions"
    assert clean("[2024-03-03 18:40] Caroline: Harbor Light", labels) == "Harbor Light"
    assert clean("a pottery class\nPriya: it looks like a hat", labels) == "a pottery class"
    assert clean("She went to Portland. Then she came back. Then again.", labels) == "She went to Portland."
    assert clean("on 7 May 2023. It rained.", labels) == "on 7 May 2023."
    assert clean("the the the the the the the", labels) == "the"
    assert not repeated_4gram(clean("we went to the lake and we went to the lake and we", labels))
    assert clean("Priya:", labels) == "" and clean("  \n\n", labels) == ""


def test_clean_drops_a_framing_clause_and_writes_iso_dates_as_people_do():
    assert clean("The answer is: 2023-08-17 13:50") == "17 August 2023"
    assert clean("Answer: she moved on 2021-03-07.") == "she moved on 7 March 2021."
    assert clean("At 10:30 she left the house") == "At 10:30 she left the house"  # a time is not a frame
    assert clean("The plan she made with her sister last year: sail") == "The plan she made with her sister last year: sail"
    assert clean("on 2023-13-45") == "on 2023-13-45"  # not a date: left as it is


def test_no_evidence_or_nothing_left_is_i_dont_know():
    from fakes import ScriptedModel

    from memcli.llm.base import CallStats
    from memcli.retrieve.answer import answer

    model = ScriptedModel(lambda step, messages, schema: "Caroline: ")
    assert answer(model, "who?", [], CallStats()).text == UNKNOWN and not model.calls  # no call without evidence
    assert answer(model, "who?", evidence("[2024-03-03 18:40] Caroline: hi"), CallStats()).text == UNKNOWN
    model = ScriptedModel(lambda step, messages, schema: "\n  Open Door Adoptions\nCaroline: and more")
    assert answer(model, "which?", evidence("Caroline: Open Door Adoptions"), CallStats()).text == "Open Door Adoptions"
    said = answer(model, "which?", evidence("Caroline: Open Door"), CallStats())  # "Adoptions" is not in the lines
    assert said.text == UNKNOWN and said.finish_reason == "ungrounded"


@pytest.fixture(scope="module")
def readme_store(tmp_path_factory):
    """The README's set-up: init, ingest the example, consolidate (in a folder of its own, as a user would)."""
    from conftest import run_memcli

    folder = tmp_path_factory.mktemp("readme")
    env = {"HOME": str(folder / "home"), "XDG_CACHE_HOME": str(folder / "cache"),
           "XDG_CONFIG_HOME": str(folder / "config"), "XDG_DATA_HOME": str(folder / "data")}
    for args in (("init",), ("ingest", EXAMPLES / "caroline-and-priya.json"), ("consolidate",)):
        assert run_memcli(*args, cwd=folder, env=env).code == 0, args
    return folder, env


@pytest.mark.parametrize("question, words", [
    ("Which adoption agency did Caroline apply to?", ["Open Door"]),
    ("Why did Caroline not choose Harbor Light?", ["waiting list"]),
    ("When did Caroline pass the home study?", ["week before 2 July 2024"]),
    ("What did Caroline research?", ["adoption agencies"]),  # every word of the question in one sentence
    pytest.param("What did Caroline sell?", ["hatchback"], marks=pytest.mark.xfail(
        strict=True, reason="memcli's reader answers 'a used minivan' (what she bought, in the same line)")),
    ("When is Caroline's parenting course?", ["every Wednesday evening"]),  # a day of each week
    ("When is Priya's pottery class?", ["Thursdays"]),  # not the month of a later line about the bowls
    ("Which room in Caroline's apartment is empty?", ["spare room"]),  # the span and the noun asked for after it
    pytest.param("What does Priya make in her class?", ["bowl"], marks=pytest.mark.xfail(
        strict=True, reason="memcli's reader picks a span of the line about the bowls that leaves them out ('a set "
                            "of four'; docs/benchmarks.md, 'Questions a new user asks of the examples')")),
])
@pytest.mark.slow
def test_the_examples_questions_through_the_readmes_own_ask(readme_store, question, words):
    """The README's own ask command, with the real default model, on the shipped example's questions and a few
    more a user asks (benchmarks/bench_examples.py): the answer is a span of the line that says it (a date or
    a day for "when")."""
    from conftest import run_memcli

    folder, env = readme_store
    done = run_memcli("ask", question, cwd=folder, env=env)
    assert done.code == 0, (done.stdout, done.stderr)
    said = done.stdout.splitlines()[0]
    assert all(w.lower() in said.lower() for w in words), said


@pytest.mark.slow
def test_what_memory_cannot_answer_is_i_dont_know_with_exit_1(readme_store):
    from conftest import run_memcli

    folder, env = readme_store
    unknown = run_memcli("ask", "What is Caroline's favourite colour?", cwd=folder, env=env)
    assert unknown.code == 1 and unknown.stdout.splitlines()[0] == UNKNOWN
    assert "no answer:" in unknown.stdout and "Caroline:" in unknown.stdout  # why, and the lines it read
    as_json = run_memcli("ask", "What is Caroline's favourite colour?", "--json", cwd=folder, env=env)
    assert as_json.code == 1 and as_json.json["abstained"] is True and as_json.json["answer"] == UNKNOWN


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="memcli's reader answers 'cousin' from a line of Priya's about her cousin's "
                                       "agency: the person rule finds a line of hers that answers")
def test_a_fact_of_someone_elses_asked_of_the_wrong_person_is_i_dont_know(readme_store):
    from conftest import run_memcli

    folder, env = readme_store
    swapped = run_memcli("ask", "Which adoption agency did Priya apply to?", "--json", cwd=folder, env=env)
    assert swapped.code == 1 and "someone else" in swapped.json["why"]  # Caroline applied, not Priya
    chosen = run_memcli("ask", "Which adoption agency did Priya choose?", "--json", cwd=folder, env=env)
    assert chosen.code == 1 and chosen.json["answer"] == UNKNOWN  # Caroline's line says it better than Priya's:
    assert "someone else" in chosen.json["why"]
