"""Corrections marked without a model (memcli/ingest/corrections.py): at ingest in CURRENT, at consolidation
in the documents, undone by forget, read by ``--as-of`` before the correction and as support after it."""

from __future__ import annotations

import json

import pytest
from conftest import run_memcli

from memcli.ingest.corrections import corrections, denied_values
from memcli.store.format import Entry, parse_entry


def entry(seq: int, speaker: str, text: str, time: str) -> Entry:
    return Entry({"seq": str(seq), "time": time, "speaker": speaker}, text)


def remembered(tmp_path, speaker: str, lines: list[tuple[str, str]]):
    """A new store (its path) with each (text, time) remembered as ``speaker``'s, through the real command."""
    store = tmp_path / ".memcli"
    assert run_memcli("--store", store, "init", "-q").code == 0
    for text, when in lines:
        assert run_memcli("--store", store, "remember", text, "--speaker", speaker, "--time", when, "-q").code == 0
    return store


def test_the_values_a_sentence_denies_are_its_words_without_function_words_at_the_edges():
    assert denied_values("It's a Fairphone 5, not a iPhone 13, my mistake.") == [("iphone", "13")]
    assert denied_values("Correction: the company is Orbital Foods, not Northwind.") == [("northwind",)]
    assert denied_values("Sorry, March 3, not April 18, for the thesis.") == [("april", "18")]
    assert denied_values("I'm not sure about Northwind.") == []  # a clause that does not begin by denying


def test_a_correction_supersedes_the_nearest_earlier_entry_of_the_same_speaker_that_writes_the_value():
    stated = entry(1, "Olek", "I've been at Northwind for three years.", "2024-03-01T10:00")
    canteen = entry(2, "Olek", "The canteen at Northwind is great.", "2024-03-01T10:01")
    other = entry(3, "Ana", "My sister works at Northwind.", "2024-03-01T10:02")
    fixed = entry(4, "Olek", "Correction: the company is Orbital Foods, not Northwind.", "2024-03-01T10:03")
    assert corrections([fixed], [stated, other]) == {1: 4}  # not Ana's line, though it is nearer
    assert corrections([fixed], [stated, canteen, other]) == {2: 4}  # the nearest only
    assert corrections([stated, fixed]) == {1: 4}  # within one batch too
    # the value's words in a row: "Orbital" alone, or another speaker's correction, supersedes nothing
    assert corrections([entry(5, "Olek", "Sorry, Northwind, not Orbital Foods Ltd.", "2024-03-02T10:00")], [fixed]) == {}
    assert corrections([entry(5, "Ana", "No, Tessel, not Northwind.", "2024-03-02T10:00")], [stated]) == {}
    # a message of more than one sentence is not replaced whole for a word of it
    told = entry(1, "Olek", "I've been at Northwind for three years. The canteen is great.", "2024-03-01T10:00")
    assert corrections([fixed], [told]) == {}
    # an assistant's "..., not X" corrects no one, not even the user it answers (one party in a session)
    user = Entry({"seq": "1", "time": "2024-03-01T10:00", "speaker": "user"}, "Let's store it in Postgres.")
    bot = Entry({"seq": "2", "time": "2024-03-01T10:01", "speaker": "assistant", "source": "AI"},
                "I'll use SQLite, not Postgres.")
    again = Entry({"seq": "3", "time": "2024-03-01T10:02", "speaker": "user"}, "Sorry, MySQL, not Postgres.")
    assert corrections([bot], [user]) == {} and corrections([again], [user, bot]) == {1: 3}
    # a line earlier than the correction only: a later one writing the value is not what it corrects
    assert corrections([fixed], [entry(9, "Olek", "Northwind called again.", "2024-03-05T10:00")]) == {}


@pytest.mark.slow  # several processes: the slow tier (CI runs it)
def test_ingest_marks_the_corrected_entry_in_current_and_ask_reads_it_only_before_the_correction(tmp_path):
    """The real command: the corrected line stays where it is, with superseded_by; the evidence after the
    correction leaves it out but shows it as the correction's history, ``--as-of`` a day before the
    correction reads it, ``--json`` counts it."""
    store = remembered(tmp_path, "Priti", [("I drive a Tesla Model 3.", "2024-03-01T10:00"),
                                          ("Just got back from a walk.", "2024-03-05T10:00")])
    said = run_memcli("--store", store, "remember", "Oops, it's a Mazda CX-5, not a Tesla Model 3.",
                      "--speaker", "Priti", "--time", "2024-03-10T10:00", "--json")
    assert said.code == 0 and json.loads(said.stdout)["superseded"] == 1, said.stdout
    lines = [parse_entry(line) for line in (store / "CURRENT.md").read_text().splitlines()]
    marked = {e.text: e.meta.get("superseded_by") for e in lines if e is not None}
    assert marked == {"I drive a Tesla Model 3.": "3", "Just got back from a walk.": None,
                      "Oops, it's a Mazda CX-5, not a Tesla Model 3.": None}, marked

    def evidence(*more) -> str:
        found = run_memcli("--store", store, "ask", "What car does Priti drive?", "--evidence-only", "--json", *more)
        assert found.code == 0, found.stderr
        return "\n".join(e["text"] for e in json.loads(found.stdout)["evidence"])

    assert "Mazda CX-5" in evidence() and "I drive a Tesla" not in evidence()
    found = json.loads(run_memcli("--store", store, "ask", "What car does Priti drive?", "--evidence-only",
                                  "--json").stdout)["evidence"]
    history = [old for e in found for old in e.get("replaced", [])]  # the correction's range says what it replaced
    assert history == [{"seq": 1, "by": 3, "time": "2024-03-01T10:00", "text": "I drive a Tesla Model 3."}], found
    assert "I drive a Tesla" in evidence("--as-of", "2024-03-05")
    # the answer: the correction's value (the reader's margin 0.28 alone, under its threshold 0.5; 0.84 with the
    # line's likeness in meaning to the question), held by the question's word "drive" in the line it corrected
    answer = run_memcli("--store", store, "ask", "What car does Priti drive?", "--json")
    assert answer.code == 0 and json.loads(answer.stdout)["answer"] == "Mazda CX-5", answer.stdout


@pytest.mark.slow  # several processes or stores: the slow tier (CI runs it)
def test_consolidation_keeps_the_mark_and_forgetting_the_correction_makes_the_older_entry_current(tmp_path):
    store = remembered(tmp_path, "Olek", [("I've been at Northwind for three years.", "2024-03-01T10:00"),
                                         ("Correction: the company is Orbital Foods, not Northwind.", "2024-03-01T10:05")])
    assert run_memcli("--store", store, "consolidate", "-q").code == 0
    docs = "\n".join(p.read_text() for p in sorted((store / "docs").glob("*.md")))
    superseded = docs.split("## Superseded", 1)[1]
    assert "superseded_by=2> I've been at Northwind" in superseded, docs
    forgot = run_memcli("--store", store, "forget", "2", "-q")
    assert forgot.code == 0, forgot.stderr
    docs = "\n".join(p.read_text() for p in sorted((store / "docs").glob("*.md")))
    assert "## Superseded" not in docs and "superseded_by" not in docs and "I've been at Northwind" in docs, docs


def test_forgetting_a_correction_in_current_takes_its_mark_off_the_line_it_corrected(tmp_path):
    store = remembered(tmp_path, "Wes", [("Our weekly team meeting is on Tuesday.", "2024-03-01T10:00"),
                                        ("Sorry, Thursday, not Tuesday, for the meeting.", "2024-03-01T10:05")])
    assert "superseded_by=2" in (store / "CURRENT.md").read_text()
    assert run_memcli("--store", store, "forget", "2", "-q").code == 0
    current = (store / "CURRENT.md").read_text()
    assert "superseded_by" not in current and "- <seq=1," in current and "Thursday" not in current, current
