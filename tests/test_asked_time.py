"""The time a question's words ask about ("as of 8 December 2023", "in May 2023", "before Quarry Bank"), read as
``ask --as-of`` reads a day (memcli.retrieve.asked_time)."""

from __future__ import annotations

import json

import pytest
from conftest import steady_reader
from test_current import chat

from memcli import Memory
from memcli.retrieve.asked_time import GRACE, dated, previous


@pytest.mark.parametrize("question, day", [
    ("Where did Bram live as of 8 December 2023?", "2023-12-08"),  # "as of", "by": the end of that day
    ("Where did Noor live by 2024-02-01?", "2024-02-01"),
    ("What phone did Chidi use as of the 3rd of March 2023?", "2023-03-03"),
    ("Which company did Bram work for on July 8, 2023?", "2023-07-15"),  # "on", "in": GRACE days more
    ("What did Gina find for her store on 1 February, 2023?", "2023-02-08"),
    ("What setback did Melanie face in October 2023?", "2023-11-07"),
    ("In February 2024, where did Noor live?", "2024-03-07"),  # a leap year's month
    ("How many times has Melanie gone to the beach in 2023?", "2024-01-07"),
    ("When did Melanie go camping in June?", None),  # no year: which June is the question's
    ("What did Noor do on 31 February 2023?", None),  # no such day
    ("Who offered to babysit every Friday?", None),
    ("Did she score 2023 points?", None),
])
def test_a_day_month_or_year_written_with_its_year_bounds_the_question(question, day):
    """To its end, the question read without the words that only bound it ("as of", "by"); after "on", "in" or
    "during" GRACE days more (what happened then is often told later), the question read as asked (the date
    may say which event is meant)."""
    assert GRACE == 7
    found = dated(question)
    assert (found and found.as_of) == day
    if found:
        strict = found.phrase.lower().startswith(("as of", "by"))
        assert found.phrase in question and (found.question == question) != strict
        assert not strict or found.question == question.replace(" " + found.phrase, "")


@pytest.fixture
def jobs(tmp_path):
    return chat(tmp_path / "jobs.json", [
        ("2024-01-10T09:00", "I work at Northwind as a data analyst."),
        ("2024-01-10T09:10", "My sister is a pharmacist."),
        ("2024-03-05T10:00", "New job alert: Quarry Bank hired me!"),
        ("2024-03-05T10:10", "Quarry Bank has a lovely canteen."),
        ("2024-05-20T11:00", "Starting Monday I'm an employee of Helix Labs."),
    ])


def test_before_a_value_reads_what_was_said_before_the_first_line_that_names_it(store_dir, jobs, cli):
    """"before Quarry Bank": the bound is the minute before the first line naming it (not the later one), the
    evidence holds nothing said from then on, and the answer is what was true then; ``--json`` says the bound."""
    with Memory(store_dir, create=True, on_warning=list.append) as memory:
        memory.ingest(jobs, consolidate=False)
        found = memory.ask("Which company did Noor work for before Quarry Bank?", reader="evidence-only")
        assert found.asked_time["as_of"] == "2024-03-05T09:59" and found.asked_time["from"] == "before Quarry Bank"
        assert found.evidence and all("Quarry Bank" not in e.text and "Helix" not in e.text for e in found.evidence)
        with steady_reader():
            assert memory.ask("Which company did Noor work for before Quarry Bank?").answer == "Northwind"
        nothing = memory.ask("Which company did Noor work for before Tessel?", reader="evidence-only")
        assert not nothing.asked_time  # no line names it: no bound, the question as asked
        how_long = memory.ask("How long before Quarry Bank hired Noor?", reader="evidence-only")
        assert not how_long.asked_time  # a duration asked: "before" bounds nothing
    shown = cli("ask", "Which company did Noor work for before Quarry Bank?", "--evidence-only")
    assert shown.code == 0 and shown.stdout.startswith('as of 2024-03-05T09:59 ("before Quarry Bank")\n')
    done = cli("ask", "Which company did Noor work for as of 1 April 2024?", "--evidence-only", "--json")
    said = json.loads(done.stdout)
    assert done.code == 0 and said["asked_time"] == {"as_of": "2024-04-01", "from": "as of 1 April 2024"}
    assert said["question"] == "Which company did Noor work for as of 1 April 2024?"
    assert any("Quarry Bank" in e["text"] for e in said["evidence"])
    assert all("Helix" not in e["text"] for e in said["evidence"])


def test_before_reads_the_line_holding_most_of_the_rarest_words_memory_holds(store_dir, tmp_path):
    """"before it moved to June 12": "move", "june" and "12" are each said once; the line holding two of them
    bounds, not a later one holding the third ("moving"). "before going paleo": "going" is never said, and
    "paleo" places the line."""
    lines = chat(tmp_path / "thesis.json", [
        ("2024-01-05T09:00", "I eat vegan these days."),
        ("2024-01-10T09:00", "My thesis is due on March 3."),
        ("2024-02-01T09:00", "The thesis deadline got pushed to June 12."),
        ("2024-02-20T09:00", "Lately it's paleo meals only for me."),
        ("2024-03-01T09:00", "Finished moving the project over to MariaDB."),
    ])
    with Memory(store_dir, create=True, on_warning=list.append) as memory:
        memory.ingest(lines, consolidate=False)
        found = memory.ask("When was Noor's thesis due before it moved to June 12?", reader="evidence-only")
        assert found.asked_time["as_of"] == "2024-02-01T08:59"
        assert all("June 12" not in e.text for e in found.evidence)
        diet = memory.ask("What diet was Noor on before going paleo?", reader="evidence-only")
        assert diet.asked_time["as_of"] == "2024-02-20T08:59"


def test_an_explicit_as_of_wins_over_the_question_s_words(store_dir, jobs):
    with Memory(store_dir, create=True, on_warning=list.append) as memory:
        memory.ingest(jobs, consolidate=False)
        found = memory.ask("Which company did Noor work for in May 2024?", as_of="2024-02-01", reader="evidence-only")
        assert not found.asked_time and all("Quarry" not in e.text for e in found.evidence)


@pytest.mark.parametrize("question, plain, word", [
    ("What was Bram's previous car?", "What was Bram's car?", "previous"),
    ("Where did Bram live previously?", "Where did Bram live?", "previously"),
    ("Which company did Noor work for before that?", "Which company did Noor work for?", "before that"),
    ("Who was Noor's former partner?", "Who was Noor's partner?", "former"),
    ("Which company did Noor work for before Quarry Bank?", None, None),  # "before X": before() bounds it
    ("What activity did Caroline used to do with her dad?", None, None),  # a habit, not a value replaced
])
def test_a_question_for_the_previous_value_is_asked_without_the_word_first(question, plain, word):
    assert previous(question) == ((plain, word) if plain else None)


def test_the_previous_value_is_read_before_the_line_that_answers_now(store_dir, jobs):
    """Two readings: "Which company did Noor work for?" is answered now (the Helix Labs line), then the question
    is read as of the minute before that line."""
    with Memory(store_dir, create=True, on_warning=list.append) as memory:
        memory.ingest(jobs, consolidate=False)
        with steady_reader():
            said = memory.ask("Which company did Noor work for previously?")
        assert said.asked_time["as_of"] == "2024-05-20T10:59" and said.asked_time["from"] == "previously"
        assert said.answer == "Quarry Bank" and all("Helix" not in e.text for e in said.evidence)
        only = memory.ask("Which company did Noor work for previously?", reader="evidence-only")
        assert not only.asked_time  # no reader says which line answers now: the question as asked
