"""Extractive answers: candidates are spans of the evidence, the person asked about must be in it, dates come
from the entries' times; "I don't know" when the evidence does not support an answer; generated answers are
checked against the evidence they read."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from memcli.clauses import clauses, denied, unlabelled
from memcli.retrieve.answer import grounded
from memcli.retrieve.evidence import Evidence, assemble
from memcli.retrieve.extractive import (
    DEFAULT,
    UNKNOWN,
    Candidate,
    Tuning,
    _about,
    asks_when,
    candidates,
    choose,
    dated,
    extract,
    named,
    spans,
)
from memcli.store.format import Entry
from memcli.store.lines import Library
from memcli.terms import term_set


def entry(speaker: str, text: str, time: str = "2024-07-02T20:05") -> Entry:
    return Entry({"seq": "1", "time": time, "speaker": speaker}, text)


def test_spans_are_parts_of_the_clause_without_the_questions_words():
    asked = frozenset(term_set("Which agency did she apply to?"))
    found = spans("I decided to apply to Open Door rather than Harbor Light", asked, {"Caroline"})
    assert "Open Door" in found and "Harbor Light" in found
    for span in found:
        assert span in "I decided to apply to Open Door rather than Harbor Light"
        assert not span.lower().startswith(("i ", "to ", "apply"))
    assert spans("I did apply to it", asked, set()) == []  # nothing left beyond the question's words


def test_a_mention_that_only_addresses_a_person_is_not_about_them():
    people = {"Melanie"}
    assert not _about(entry("Caroline", "Thanks, Melanie! This necklace is a gift from my grandma."), people)
    assert not _about(entry("Caroline", "Hey Mel, I ran a charity race."), people)
    assert _about(entry("Caroline", "I gave Melanie a book about dogs."), people)
    assert _about(entry("Melanie", "I painted a lake."), people)


def test_a_word_that_begins_a_persons_name_is_no_mention_of_them_unless_capitalised():
    people = {"Caroline"}  # "Car" may be short for Caroline, "car" is a car
    assert not _about(entry("Melanie", "Hey Caroline, my son got into an accident. [a photo of a car dashboard]"),
                      people)
    assert _about(entry("Melanie", "I told Car about my son."), people)


def test_when_questions_are_answered_with_the_entrys_date():
    assert asks_when("When did Caroline pass the home study?")
    assert asks_when("In what year did Jon open a studio? What date?") and not asks_when("What did Jon open?")
    assert dated("I passed the home study last week", "2024-07-02T20:05") == "the week before 2 July 2024"
    assert dated("I went yesterday", "2024-07-02T20:05") == "1 July 2024"  # a day resolved: its date
    assert dated("The thesis is due on April 18.", "2024-02-02T20:05") == "April 18"  # a date it writes out
    assert dated("We sold the car", "2024-07-02T20:05") == "2 July 2024"
    assert dated("We sold it last Saturday", "2024-07-02") == "the saturday before 2 July 2024"
    assert dated("anything", "not a time") is None


def write_store(tmp_path, lines: list[tuple[str, str, str]]):
    from memcli import Memory

    memory = Memory(tmp_path / "store", create=True)
    for speaker, text, when in lines:
        memory.remember(text, speaker=speaker, time=when)
    library = Library(memory.store)
    doc = library.doc("CURRENT")
    picks = [("CURRENT", n) for n in doc.lines]
    return memory, library, assemble(library, picks, 10_000), picks


def test_a_question_about_someone_the_evidence_is_not_about_gets_no_candidates(tmp_path):
    memory, library, read, order = write_store(tmp_path, [
        ("Ana", "I adopted a greyhound named Pip from the shelter.", "2024-01-05T10:00"),
        ("Cleo", "Thanks, Ana! Pip sounds lovely.", "2024-01-05T10:01"),
        ("Ben", "Morning all, the trains are late again.", "2024-01-06T08:00"),
    ])
    order = order[:2]
    read = assemble(library, order, 10_000)  # Ben's line is in memory, not among the lines read
    assert "Ben" in library.speakers()
    found, reason = candidates("What dog did Ben adopt?", library, read, order)
    assert found == [] and "Ben" in reason
    found, reason = candidates("What dog did Ana adopt?", library, read, order)
    assert reason is None and any("greyhound" in c.text for c in found)
    assert all(c.doc == "CURRENT" and c.text in c.entry.text for c in found)
    off = candidates("What dog did Ben adopt?", library, read, order, Tuning(subject=False))[0]
    assert off  # the rule, not the evidence, made the difference
    found, reason = candidates("What colour is Ana's car?", library, read, order)
    assert found == [] and "word of the question" in reason
    memory.close()


class Scorer:
    """A model that can score: each candidate's log-probability is given by ``table`` (per token: -1)."""

    name = "scorer"

    def __init__(self, table: dict[str, float]):
        self.table = table
        self.calls = 0

    def score(self, messages, texts, *, shared=None):
        from memcli.llm.base import Completion

        self.calls += 1
        return [[self.table.get(t, -9.0)] for t in texts], Completion("", 10, 0, "score")

    def count_tokens(self, text):
        return len(text.split())



def candidates_of(tmp_path, asked: str, lines: list[tuple[str, str, str]], align: bool = False):
    """The candidates of a store of ``lines`` (all read) for ``asked``, with the token-level stage when ``align``;
    and the picks in the order read."""
    from memcli.retrieve.aligned import align_read

    memory, library, read, order = write_store(tmp_path, lines)
    try:
        aligned = align_read(memory.index.aligner(), library, asked, read, order) if align else None
        return candidates(asked, library, read, order, aligned=aligned)[0], order
    finally:
        memory.close()


def answered(tmp_path, asked: str, lines: list[tuple[str, str, str]], scores: dict[str, float],
             tuning: Tuning = DEFAULT):
    """The extractive answer to ``asked`` from a store of ``lines`` (all read, the token-level stage on), the
    model scoring as ``scores`` says."""
    from memcli.llm.base import CallStats
    from memcli.retrieve.aligned import align_read

    memory, library, read, order = write_store(tmp_path, lines)
    try:
        aligned = align_read(memory.index.aligner(), library, asked, read, order)
        return extract(Scorer(scores), asked, library, read, order, CallStats(), tuning, aligned=aligned)
    finally:
        memory.close()


def test_extract_takes_the_best_scored_span_or_abstains_by_the_margin(tmp_path):
    from memcli.llm.base import CallStats

    memory, library, read, order = write_store(tmp_path, [
        ("Ana", "I adopted a greyhound named Pip from the shelter.", "2024-01-05T10:00"),
    ])
    model = Scorer({"greyhound named Pip": -1.0, UNKNOWN: -3.0})
    said = extract(model, "What dog did Ana adopt?", library, read, order, CallStats())
    assert said.text == "greyhound named Pip" and not said.abstained and said.citation.startswith("CURRENT:")
    model = Scorer({"greyhound named Pip": -6.0, UNKNOWN: -1.0})
    said = extract(model, "What dog did Ana adopt?", library, read, order, CallStats(),
                   Tuning(overlap=0.0, margin=2.0))
    assert said.text == UNKNOWN and said.abstained
    said = extract(model, "When did Ana adopt a dog?", library, read, order, CallStats(),
                   replace(DEFAULT, margin=math.inf))  # the scripted model likes "I don't know" best
    assert said.text == "5 January 2024"
    # a question that asks when answers with a date the answer writes out: held to ``when_margin``, not ``margin``
    said = extract(model, "When did Ana adopt a dog?", library, read, order, CallStats(), replace(DEFAULT, margin=2.0))
    assert said.text == "5 January 2024" and DEFAULT.when_margin == math.inf
    said = extract(model, "When did Ana adopt a dog?", library, read, order, CallStats(),
                   replace(DEFAULT, margin=2.0, when_margin=2.0))
    assert said.text == UNKNOWN and said.abstained
    memory.close()


def test_choose_breaks_ties_by_rank_normalises_by_length_and_wants_the_persons_line():
    a = Candidate("a b", "D", 1, None, "", 1, 0.0, -2.0, 2)
    b = Candidate("c", "D", 2, None, "", 0, 0.0, -1.0, 1)
    plain = Tuning(overlap=0.0, rank=0.0)
    assert choose([a, b], None, replace(plain, length=1.0))[0] is b  # same mean: the better rank
    assert choose([a, b], None, replace(plain, length=0.0))[0] is b  # sums: -1 beats -2
    assert choose([a, b], (-0.1, 1), replace(plain, margin=0.5))[0] is None
    assert choose([a, b], (-0.1, 1), replace(plain, margin=math.inf))[0] is b
    low = Candidate("d", "D", 3, None, "", 5, 1.0, -1.0, 1)  # its sentence holds the question's words
    assert choose([b, low], None, replace(plain, overlap=4.0))[0] is low
    assert choose([b, low], None, replace(plain, overlap=4.0, rank=4.0))[0] is b  # far down the ranking
    other = Candidate("e", "D", 4, None, "", 0, 1.0, -0.5, 1, about=False)  # best, but someone else's
    best, why = choose([b, other], None, DEFAULT)
    assert best is None and "someone else" in why
    assert choose([b, other], None, replace(DEFAULT, subject=False))[0] is other
    assert choose([], None, DEFAULT)[0] is None


def test_choose_abstains_when_another_entry_answers_about_as_well():
    plain = Tuning(overlap=0.0, rank=0.0)
    top = Candidate("a", "D", 1, None, "", 0, 0.0, -1.0, 1)
    same_entry = Candidate("b", "D", 1, None, "", 0, 0.0, -1.05, 1)  # its own entry's other span: no rival
    rival = Candidate("c", "D", 2, None, "", 1, 0.0, -1.2, 1)
    assert choose([top, same_entry], None, replace(plain, lead=0.5))[0] is top
    best, why = choose([top, same_entry, rival], None, replace(plain, lead=0.5))
    assert best is None and "another line" in why
    assert choose([top, same_entry, rival], None, replace(plain, lead=0.1))[0] is top  # leads by 0.2
    assert choose([top, rival], None, plain)[0] is top  # lead 0: never


def test_a_generated_answer_must_say_only_what_the_evidence_says():
    read = [Evidence(doc="CURRENT", start_line=1, end_line=1,
                     text="[2024-07-02 20:05] Caroline: I passed the home study last week.")]
    assert grounded("She passed the home study", read)
    assert grounded("the week before 2 July 2024", read)  # a date said from the entry's time
    assert not grounded("She passed it in Portland", read)  # a name the lines never say
    assert not grounded("in 2019", read)  # a number they never say
    assert grounded("", read)


def test_an_amount_with_a_thousands_separator_is_one_span():
    """"£13,300" is one answer, never cut at its comma (nor "10:30" at its colon)."""
    asked = frozenset(term_set("How much is the rent now?"))
    found = spans("The rent went up to £13,300 a year", asked, set())
    assert "£13,300" in found and "300" not in found and "13" not in found
    timed = spans("The train leaves at 10:30 sharp", frozenset(term_set("What time does the train leave?")), set())
    assert timed and all("10:30" in span for span in timed if any(c.isdigit() for c in span))


def test_which_day_is_answered_with_the_day_the_line_names():
    """"Which day is the meeting?" takes the weekday the line states, not the date it was said on; a day
    said relative to the line ("last Thursday") is still resolved against its date."""
    assert dated("The meeting moved to Thursday", "2024-07-02T09:00", weekday=True) == "Thursday"
    assert dated("The meeting is next Friday", "2024-07-02T09:00", weekday=True) == "next Friday"
    assert dated("We met last Thursday", "2024-07-02T09:00", weekday=True) == "the thursday before 2 July 2024"
    assert dated("The meeting moved to Thursday", "2024-07-02T09:00") == "2 July 2024"  # "when": the date


def test_a_clause_speaks_of_the_date_its_sentence_writes_out(tmp_path):
    """A clause cut off its sentence's date ("Good news" of "Good news, the thesis is now due June 12.")
    answers a "when" question with that date, not the date it was said on; a weekday question takes
    only the candidates that name a day of the week when some do."""
    sentence = "Good news, the thesis is now due June 12."
    assert dated("Good news", "2023-08-17T16:00", sentence=sentence) == "June 12"
    assert dated("Good news", "2023-08-17T16:00", sentence="Good news, I passed yesterday.") == "16 August 2023"
    assert dated("Good news", "2023-08-17T16:00", sentence="Good news, all done.") == "17 August 2023"
    assert dated("Sorry", "2023-08-17T16:00", weekday=True, sentence="Sorry, Thursday not Wednesday.") == "Thursday"
    memory, library, read, order = write_store(tmp_path, [
        ("Emre", "Every Wednesday we have the team sync.", "2023-05-20T14:00"),
        ("Emre", "The team dinner was lovely, thanks for asking.", "2023-05-05T14:00"),
    ])
    found, _ = candidates("Which day is Emre's weekly team meeting?", library, read, order)
    assert [c.text for c in found] == ["Wednesday"]
    found, _ = candidates("When is Emre's weekly team meeting?", library, read, order)
    assert {c.text for c in found} == {"Every Wednesday", "5 May 2023"}  # "when": each week's day, else the date
    memory.close()


def test_a_line_that_holds_the_question_in_other_words_supports_an_answer(tmp_path):
    from memcli.retrieve.aligned import align_read

    asked = "Which sport does Ana play?"
    memory, library, read, order = write_store(tmp_path / "a", [
        ("Ana", "I quit tennis and took up squash.", "2024-01-05T10:00"),
        ("Ana", "The weather has been wild lately.", "2024-01-06T10:00"),
    ])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    found, reason = candidates(asked, library, read, order, aligned=aligned)
    assert reason is None and any("squash" in c.text for c in found)
    by_words = candidates(asked, library, read, order, replace(DEFAULT, held=0.0), aligned=aligned)
    assert by_words == ([], "no line read holds a word of the question")  # neither "sport" nor "play" is there
    memory.close()
    memory, library, read, order = write_store(tmp_path / "b", [
        ("Ana", "Do you think I should learn to play piano?", "2024-01-05T10:00"),
    ])
    aligned = align_read(memory.index.aligner(), library, "What car does Ana drive?", read, order)
    assert candidates("What car does Ana drive?", library, read, order, aligned=aligned) == (
        [], "no line read holds a word of the question, nor its meaning")
    memory.close()


def test_a_line_near_the_question_in_meaning_supports_an_answer_though_none_of_its_words_do(tmp_path):
    """``near``: the whole line's vector against the question's without the person's name (the ranking's):
    "Picked up my new Tesla Model 3" holds neither "car" nor "drive", and its tokens only weakly, yet it is
    about what the question asks; a question about something else finds it no nearer than small talk."""
    from memcli.retrieve.aligned import align_read

    memory, library, read, order = write_store(tmp_path, [
        ("Olek", "Picked up my new Tesla Model 3 from the dealer today.", "2024-01-05T10:00"),
        ("Olek", "The weather has been wild lately.", "2024-01-06T10:00"),
    ])
    memory.index.refresh()  # the speakers the question's name is found among (ask's ranking refreshes it)
    unsupported = ([], "no line read holds a word of the question, nor its meaning")
    for asked, answered in (("What car does Olek drive?", True), ("What pet does Olek have?", False)):
        aligned = align_read(memory.index.aligner(), library, asked, read, order, index=memory.index)
        assert set(aligned.near) == set(order)
        found = candidates(asked, library, read, order, aligned=aligned)
        assert (found[1] is None and any("Tesla Model 3" in c.text for c in found[0])) if answered \
            else found == unsupported
        assert candidates(asked, library, read, order, replace(DEFAULT, near=0.0), aligned=aligned) == unsupported
    memory.close()


def test_choose_abstains_when_the_answering_line_holds_a_word_of_the_question_weakly():
    plain = Tuning(overlap=0.0, rank=0.0)
    weak = Candidate("a", "D", 1, None, "", 0, 0.0, -1.0, 1, least=0.3)  # best, but a word of the question is far
    strong = Candidate("b", "D", 2, None, "", 1, 0.0, -2.0, 1, least=0.8)
    assert choose([weak, strong], None, plain)[0] is weak  # off (the default): no word needs holding
    best, why = choose([weak, strong], None, replace(plain, cover=0.4))
    assert best is None and "every word" in why  # the best line is judged, not replaced by the next
    assert choose([weak, strong], None, replace(plain, cover=0.25))[0] is weak


def test_a_later_line_that_restates_the_answer_gives_it_as_it_is_now(tmp_path):
    """The stale line says the slot in the question's words, the update in others: the later line wins."""
    from memcli.llm.base import CallStats
    from memcli.retrieve.aligned import align_read

    asked = "What car does Bram drive?"
    memory, library, read, order = write_store(tmp_path / "a", [
        ("Bram", "I drive a Honda Civic.", "2024-01-05T10:00"),
        ("Bram", "The weather has been wild lately.", "2024-02-01T10:00"),
        ("Bram", "I sold the Honda Civic and bought a Subaru Outback.", "2024-03-01T10:00"),
    ])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    model = Scorer({"Honda Civic": -1.0, UNKNOWN: -3.0})
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    now = library.doc("CURRENT").entries[order[2][1]].text
    assert said.citation == f"CURRENT:{order[2][1]}" and said.text in now and "Subaru Outback" in said.text, said
    assert "restates" in said.reason
    before = extract(model, asked, library, read, order, CallStats(), replace(DEFAULT, restate=None), aligned=aligned)
    assert before.text == "Honda Civic"  # the rule, not the scores, made the difference
    memory.close()
    memory, library, read, order = write_store(tmp_path / "b", [
        ("Bram", "I drive a Honda Civic.", "2024-01-05T10:00"),
        ("Bram", "The weather has been wild lately.", "2024-02-01T10:00"),
    ])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    assert said.text == "Honda Civic"  # a later line about something else restates nothing
    model = Scorer({UNKNOWN: -1.0})
    assert extract(model, asked, library, read, order, CallStats(), aligned=aligned).text == UNKNOWN  # nor answers
    memory.close()


def test_a_later_line_restates_the_answer_only_if_it_names_what_the_question_and_the_answer_name(tmp_path):
    """One person's memory of many things: a later line close in meaning but about something else the
    question does not name ("my holiday", not Tomas) does not restate the answer."""
    from memcli.llm.base import CallStats
    from memcli.retrieve.aligned import align_read

    asked = "Where did Noor's brother Tomas move to?"
    moved, holiday = "My brother Tomas moved to Porto last spring.", "We went to Crete as a family last spring."
    memory, library, read, order = write_store(tmp_path, [
        ("Noor", moved, "2024-01-05T10:00"), ("Noor", holiday, "2024-03-01T10:00")])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    vectors = aligned.encoder.encode([moved, holiday])
    assert float(vectors[0] @ vectors[1]) >= DEFAULT.restate and DEFAULT.named  # close enough to "restate"
    model = Scorer({"Porto last spring": -1.0, "Porto": -1.0, UNKNOWN: -3.0})
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    assert "Porto" in said.text and "restates" not in said.reason, said
    unnamed = extract(model, asked, library, read, order, CallStats(), replace(DEFAULT, named=False),
                      aligned=aligned)
    assert "Porto" not in unnamed.text and "restates" in unnamed.reason, unnamed  # the rule made the difference
    memory.close()


def test_a_later_line_naming_what_the_answers_sentence_says_beside_it_restates_that_not_the_answer(tmp_path):
    """"It runs on Postgres 15 and we deploy it with Nomad.", later "we moved ledgerd from Nomad to Kubernetes":
    the deployment changed, the database did not (the shipped example's question). The sentence is cut before
    "and we", and a later line naming "Nomad" (of a clause that holds no word of the question), nothing the
    answer names, does not restate "Postgres 15"; asked how ledgerd is deployed, it does."""
    from memcli.llm.base import CallStats
    from memcli.retrieve.aligned import align_read

    asked = "What database does ledgerd run on?"
    runs, moved = "It runs on Postgres 15 and we deploy it with Nomad.", "Update: we moved ledgerd from Nomad to Kubernetes."
    assert clauses(runs) == ["It runs on Postgres 15", "and we deploy it with Nomad."]
    for whole in ("I went hiking and camping with my kids.", "Taylor and I have been together two years."):
        assert clauses(whole) == [whole]
    memory, library, read, order = write_store(tmp_path, [("Sam", runs, "2024-05-02T09:12"),
                                                          ("Sam", moved, "2024-05-09T16:40")])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    vectors = aligned.encoder.encode([runs, moved])
    assert float(vectors[0] @ vectors[1]) >= DEFAULT.restate  # close enough to "restate" by meaning alone
    model = Scorer({"Postgres 15": -1.0, UNKNOWN: -3.0})
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    assert said.text == "Postgres 15" and "restates" not in said.reason, said
    unnamed = extract(model, asked, library, read, order, CallStats(), replace(DEFAULT, named=False), aligned=aligned)
    assert "Kubernetes" in unnamed.text and "restates" in unnamed.reason, unnamed  # the rule made the difference
    deployed = "How is ledgerd deployed?"  # the part the question asks about ("deploy") is the part that changed
    aligned = align_read(memory.index.aligner(), library, deployed, read, order)
    said = extract(model, deployed, library, read, order, CallStats(), aligned=aligned)
    assert "Kubernetes" in said.text and "restates" in said.reason, said
    memory.close()


def test_a_fact_that_changed_twice_is_answered_from_the_end_of_its_chain(tmp_path):
    """Each change restates the one before it, not always the first: the answer follows the chain to the
    latest line (the third line's sentence is far from the first's, near the second's)."""
    from memcli.llm.base import CallStats
    from memcli.retrieve.aligned import align_read

    asked = "What car does Bram drive?"
    first, second = "I drive a Honda Civic.", "I sold the Honda Civic and bought a Subaru Outback."
    third = "The Outback was written off and the insurer paid for a Tesla Model 3."
    memory, library, read, order = write_store(tmp_path, [
        ("Bram", first, "2024-01-05T10:00"), ("Bram", second, "2024-03-01T10:00"),
        ("Bram", third, "2024-05-01T10:00")])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    vectors = aligned.encoder.encode([first, second, third])
    assert float(vectors[0] @ vectors[2]) < DEFAULT.restate <= float(vectors[1] @ vectors[2])  # a chain, not a star
    said = extract(Scorer({"Honda Civic": -1.0, UNKNOWN: -3.0}), asked, library, read, order, CallStats(),
                   aligned=aligned)
    assert "Tesla Model 3" in said.text and "restates" in said.reason, said
    memory.close()


def test_a_date_a_later_line_writes_out_restates_a_written_date_not_an_event_told_again(tmp_path):
    """A "when" question: a deadline the person moved is answered with the date the later line writes out;
    an event told of again later keeps the day it happened (the date is the entry's, not written)."""
    said = answered(tmp_path / "a", "When is Kofi's thesis due?", [
        ("Kofi", "My thesis is due on March 3.", "2024-01-05T10:00"),
        ("Kofi", "The thesis deadline got pushed to June 12.", "2024-02-01T10:00")],
        {"March 3": -1.0, "June 12": -2.0, UNKNOWN: -4.0})
    assert said.text == "June 12" and "restates" in said.reason, said

    told, again = "I ran the charity race this morning.", "Still sore from the charity race."
    memory, *_ = write_store(tmp_path / "vectors", [("Kofi", told, "2024-01-05T10:00")])
    vectors = memory.index.aligner().encoder.encode([told, again])
    memory.close()
    assert float(vectors[0] @ vectors[1]) >= DEFAULT.restate  # close enough to restate, were the dates written
    said = answered(tmp_path / "b", "When did Kofi run the charity race?", [
        ("Kofi", told, "2024-01-05T10:00"), ("Kofi", again, "2024-02-01T10:00")],
        {"5 January 2024": -1.0, "1 February 2024": -2.0, UNKNOWN: -4.0})
    assert said.text == "5 January 2024", said


def test_an_update_that_names_the_value_it_replaces_is_answered_with_the_new_value(tmp_path):
    """The newer line says the old value too ("Dropped the Fairphone 5 ..."); its span that repeats the earlier
    line's answer is not the answer, the part that is new is. A line that does not repeat it keeps its best span."""
    from memcli.llm.base import CallStats
    from memcli.retrieve.aligned import align_read

    asked = "What phone does Dalia use?"
    memory, library, read, order = write_store(tmp_path, [
        ("Dalia", "It's a Fairphone 5, not an iPhone 13, my mistake.", "2024-01-05T10:00"),
        ("Dalia", "Dropped the Fairphone 5 in a lake, so now I have a Pixel 8.", "2024-03-01T10:00")])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    # the model prefers the update's first clause, as the default model does on this line
    model = Scorer({"Dropped the Fairphone 5 in a lake": -1.0, "Pixel 8": -1.2, "Fairphone 5": -1.5, UNKNOWN: -3.0})
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    assert said.text == "Pixel 8" and "repeat" in said.reason, said
    memory.close()

    memory, library, read, order = write_store(tmp_path / "other", [
        ("Dalia", "It's a Fairphone 5, not an iPhone 13, my mistake.", "2024-01-05T10:00"),
        ("Dalia", "Dropped my phone in a lake, so now I have a Pixel 8.", "2024-03-01T10:00")])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    model = Scorer({"Dropped my phone in a lake": -1.0, "Pixel 8": -1.2, "Fairphone 5": -1.5, UNKNOWN: -3.0})
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    assert said.text == "Dropped my phone in a lake", said  # nothing of the earlier answer repeated: unchanged
    memory.close()

    asked = "What job does Mel want?"
    memory, library, read, order = write_store(tmp_path / "again", [
        ("Mel", "I would love a job in nursing.", "2024-01-05T10:00"),
        ("Mel", "Started looking into nursing jobs, and I want to help sick kids feel safe.", "2024-03-01T10:00")])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    model = Scorer({"nursing": -1.1, "Started looking into nursing": -1.0, "help sick kids feel safe": -1.2,
                    "Started looking": -1.3, UNKNOWN: -3.0})
    said = extract(model, asked, library, read, order, CallStats(), aligned=aligned)
    assert said.text == "Started looking into nursing", said  # said again, and more that is no value of its kind
    memory.close()


def test_a_name_an_earlier_line_writes_is_an_earlier_value_though_its_span_is_the_updates(tmp_path):
    """"Texting you from my Fairphone 5." then "Dropped the Fairphone 5 in a lake, so now I have a Pixel 8.": the span
    "Fairphone 5" is a candidate once, of the better-ranked update line, so the earlier line's best candidate is
    "Texting you from my Fairphone 5"; the name it writes still tells the update's first clause repeats it."""
    assert named("Texting you from my Fairphone 5.") == ["Fairphone 5"]
    assert named("It's a Fairphone 5, not an iPhone 13, my mistake.") == ["Fairphone 5", "iPhone 13"]
    assert named("I've been at Orbital Foods since May 2021.") == ["Orbital Foods", "May 2021"]
    asked = "What phone does Lena use?"
    lines = [("Lena", "Texting you from my Fairphone 5.", "2024-01-05T10:00"),
             ("Lena", "Dropped the Fairphone 5 in a lake, so now I have a Pixel 8.", "2024-03-01T10:00")]
    found, order = candidates_of(tmp_path / "candidates", asked, lines, align=True)
    assert [c.line for c in found if c.text == "Fairphone 5"] == [order[0][1]]  # the update line's, ranked first
    said = answered(tmp_path / "answer", asked, lines, {
        "Dropped the Fairphone 5 in a lake": -1.0, "Pixel 8": -1.2, "Texting you from my Fairphone 5": -1.4,
        UNKNOWN: -3.0})
    assert said.text == "Pixel 8" and "repeat" in said.reason, said


def test_a_label_that_leads_a_sentence_is_no_answer(tmp_path):
    """"Correction: the company is Orbital Foods" answers with what follows the label, never the label; a
    colon between digits or after a long head is no label."""
    assert unlabelled("Correction: the company is Orbital Foods, not Tessel.") == \
        " the company is Orbital Foods, not Tessel."
    assert unlabelled("New job alert: Tessel hired me!") == " Tessel hired me!"
    for kept in ("We meet at 10:30 on Thursdays.", "Note:", "I finally found my real muses: painting and pottery"):
        assert unlabelled(kept) == kept
    found, _ = candidates_of(tmp_path, "Which company does Vera work for?", [
        ("Vera", "Correction: the company is Orbital Foods, not Tessel.", "2024-01-05T10:00")])
    assert any(c.text == "Orbital Foods" for c in found) and not any("Correction" in c.text for c in found)


def test_a_value_a_clause_denies_is_no_answer(tmp_path):
    """"the company is Orbital Foods, not Northwind": Northwind is what is not so. A clause that only denies gives
    no candidate; the same value stated elsewhere still does, and so does the denial to a question that asks
    what is not so."""
    assert denied("not Northwind") and denied(" Not easy") and not denied("nothing new") \
        and not denied("I'm not sure")
    asked = "Which company does Fiona work for?"
    found, _ = candidates_of(tmp_path / "denied", asked, [
        ("Fiona", "Correction: the company is Orbital Foods, not Northwind.", "2024-01-05T10:00")])
    assert any(c.text == "Orbital Foods" for c in found) and not any("Northwind" in c.text for c in found)
    found, _ = candidates_of(tmp_path / "stated", asked, [("Fiona", "I work at Northwind.", "2024-01-05T10:00")])
    assert any("Northwind" in c.text for c in found)
    found, _ = candidates_of(tmp_path / "asked", "What should Fiona not bring to the pool?", [
        ("Fiona", "Bring towels to the pool, not glass bottles.", "2024-01-05T10:00")])
    assert any("glass bottles" in c.text for c in found)  # a question about what is not so reads the denial


def test_a_sentence_that_asks_gives_no_answer_where_a_sentence_states_one(tmp_path):
    """"Do you think I should learn to play piano?" shares "play" with "Which sport does Ana play?" but asks;
    the statement answers. A question is still read when nothing read states anything."""
    asked = "Which sport does Ana play?"
    memory, library, read, order = write_store(tmp_path, [
        ("Ana", "I quit squash and took up tennis.", "2024-01-05T10:00"),
        ("Ana", "Do you think I should learn to play piano?", "2024-03-01T10:00")])
    found, _ = candidates(asked, library, read, order)
    assert any("tennis" in c.text for c in found) and not any("piano" in c.text for c in found)
    memory.close()
    memory, library, read, order = write_store(tmp_path / "asks", [
        ("Ana", "Do you think I should learn to play piano?", "2024-03-01T10:00")])
    found, _ = candidates(asked, library, read, order)
    assert any("piano" in c.text for c in found)
    memory.close()


class Counting:
    """The real default model, counting the candidates it is asked to score."""

    def __init__(self, model):
        self.model, self.scored = model, []
        self.name = model.name

    def score(self, messages, texts, *, shared=None):
        self.scored += texts
        return self.model.score(messages, texts, shared=shared)

    def count_tokens(self, text):
        return self.model.count_tokens(text)


def test_the_model_scores_only_the_candidates_that_can_still_be_chosen(tmp_path, monkeypatch):
    """The same answer, and about the same scores for every candidate that could win, as scoring them all, with
    fewer candidates read: one that cannot reach the best score even at a log-probability of 0 is left
    unscored (the real default model)."""
    from memcli import llm
    from memcli.llm.base import CallStats
    from memcli.retrieve import extractive
    from memcli.retrieve.aligned import align_read
    from memcli.retrieve.extractive import score

    asked = "Which adoption agency did Caroline apply to?"
    memory, library, read, order = write_store(tmp_path, [
        ("Caroline", "I applied to Open Door Adoptions last week, after the home study visit.", "2024-06-01T10:00"),
        ("Caroline", "My running group meets on Sundays at the lake, rain or shine, with coffee after.",
         "2024-06-02T10:00"),
        ("Caroline", "The agency called back about the paperwork and the interview in July.", "2024-06-03T10:00"),
    ])
    aligned = align_read(memory.index.aligner(), library, asked, read, order)
    model = llm.open_model(memory.settings)
    pruned = Counting(model)
    said = extract(pruned, asked, library, read, order, CallStats(), aligned=aligned)
    monkeypatch.setattr(extractive, "FIRST_SCORED", 10 ** 6)
    every = Counting(model)
    whole = extract(every, asked, library, read, order, CallStats(), aligned=aligned)
    assert (said.text, said.citation, said.abstained) == (whole.text, whole.citation, whole.abstained)
    assert len(pruned.scored) < len(every.scored) == len(whole.candidates) + 1
    best = max(score(c) for c in whole.candidates)
    for mine, theirs in zip(said.candidates, whole.candidates):
        if mine.logprob is None:  # left unscored: could not have won
            assert score(mine) < best
        else:  # read in batches of another shape (a prefix read off another candidate): a 4-bit model's
            # logits move by a few hundredths per token, so a span's sum by a few per cent (0.42 of 17.1
            # on an AMD EPYC, within 0.25 on CI's first machines)
            assert mine.logprob == pytest.approx(theirs.logprob, rel=0.05, abs=0.25)
    memory.close()


def test_a_later_line_close_to_the_line_a_correction_replaced_restates_the_correction(tmp_path):
    """"Correction: the company is Helix Labs, not Tessel." replaced "My job at Tessel keeps me pretty busy."
    (memcli.ingest.corrections); the later "I handed in my notice and joined Mapleworks." is close to the line
    replaced, not to the correction's words, and still tells the value now."""
    lines = [("Rosa", "My job at Tessel keeps me pretty busy.", "2024-01-05T10:00"),
             ("Rosa", "Correction: the company is Helix Labs, not Tessel.", "2024-01-05T10:05"),
             ("Rosa", "I handed in my notice and joined Mapleworks.", "2024-03-01T10:00")]
    memory, *_ = write_store(tmp_path / "vectors", lines[:1])
    vectors = memory.index.aligner().encoder.encode([text for _, text, _ in lines])
    memory.close()
    assert float(vectors[1] @ vectors[2]) < DEFAULT.restate <= float(vectors[0] @ vectors[2])  # why it needs both
    said = answered(tmp_path / "a", "Which company does Rosa work for?", lines,
                    {"Helix Labs": -1.0, "Mapleworks": -2.0, UNKNOWN: -4.0})
    assert "Mapleworks" in said.text and "restates" in said.reason, said


def test_the_margin_does_not_refuse_a_line_that_changes_an_earlier_one(tmp_path):
    """Where a person's lines give a slot two values, the model's probability is shared between them and "I
    don't know" can outscore each by more than the margin; the margin asks whether memory holds an answer at
    all, and a line that restates an earlier one ("took up tennis" after "Volleyball is my way to unwind")
    says it does. A line with nothing before it is still refused."""
    asked = "Which sport does Ana play?"
    old, new = "Volleyball is my way to unwind.", "I quit volleyball and took up tennis."
    lines = [("Ana", old, "2024-01-05T10:00"), ("Ana", new, "2024-03-01T10:00")]
    scores = {"tennis": -3.5, "quit volleyball and took up tennis": -3.5, UNKNOWN: -1.0}  # 2.5 over the margin
    memory, *_ = write_store(tmp_path / "vectors", lines[:1])
    vectors = memory.index.aligner().encoder.encode([old, new])
    memory.close()
    assert float(vectors[0] @ vectors[1]) >= DEFAULT.restate and DEFAULT.margin < 2.5 and DEFAULT.changed
    said = answered(tmp_path / "a", asked, lines, scores)
    assert "tennis" in said.text and not said.abstained and "changes an earlier one" in said.reason, said
    off = answered(tmp_path / "b", asked, lines, scores, replace(DEFAULT, changed=False))
    assert off.text == UNKNOWN  # the rule, not the scores, made the difference
    alone = answered(tmp_path / "c", asked, lines[1:], scores)
    assert alone.text == UNKNOWN and alone.abstained  # nothing changed: the margin refuses it


def test_which_day_is_answered_with_a_date_no_line_writes_only_from_a_sentence_that_says_what_is_asked(tmp_path):
    """A line's date tells which day only of what the line says: a question about a meeting no line mentions
    is not answered with the day a line about rugby was said (its "days" is no word of what is asked: "which
    day" asks); a line about the meeting is answered with the day it names, and a question that asks when
    (not which day) still with the date of the line that tells it."""
    asked = "Which day is Ana's weekly team meeting?"
    rugby = [("Ana", "These days it's all rugby for me.", "2024-03-09T11:06")]
    said = answered(tmp_path / "a", asked, rugby, {UNKNOWN: -3.0})
    assert said.text == UNKNOWN and said.abstained, said
    before = answered(tmp_path / "b", asked, rugby, {UNKNOWN: -3.0}, replace(DEFAULT, told=False))
    assert before.text == "9 March 2024"  # the rule, not the scores, made the difference
    meeting = rugby + [("Ana", "Our weekly team meeting is on Thursday.", "2024-03-10T09:00")]
    assert answered(tmp_path / "c", asked, meeting, {UNKNOWN: -3.0}).text == "Thursday"
    adopted = [("Ana", "I adopted a greyhound named Pip from the shelter.", "2024-01-05T10:00")]
    assert answered(tmp_path / "d", "When did Ana adopt a dog?", adopted, {UNKNOWN: -3.0}).text == "5 January 2024"


def test_a_question_naming_a_thing_no_line_read_writes_is_i_dont_know(tmp_path):
    lines = [("Jon", "Took a short trip last week to Rome to clear my mind a little.", "2023-01-20T10:00"),
             ("Gina", "Rome sounds lovely, I went there in June.", "2023-01-20T10:01")]
    memory, library, read, order = write_store(tmp_path, lines)
    try:
        asked = "What did Jon take a trip to Barcelona for?"
        found, reason = candidates(asked, library, read, order, replace(DEFAULT, things=True))
        assert found == [] and reason == "no line read names Barcelona"
        assert candidates(asked, library, read, order, replace(DEFAULT, things=False))[0]  # the rule did it
        for named in ("What did Jon take a trip to Rome for?", "Where did Gina go in June?"):  # a month is a time
            assert candidates(named, library, read, order, replace(DEFAULT, things=True))[0], named
    finally:
        memory.close()


def test_a_question_asked_of_the_wrong_person_is_i_dont_know(tmp_path):
    """A fact of someone else's, asked of the wrong person: another's line holds the question's words better than
    any line of the person asked about (``whose``); a line that only asks holds them and states nothing."""
    from memcli.retrieve.aligned import align_read

    lines = [("Ines", "My years in therapy are what made me want to train as a counsellor.", "2024-03-01T10:00"),
             ("Theo", "That is brave work. I want to train for a marathon this spring.", "2024-03-01T10:01")]
    asked = "What made Theo want to train as a counsellor?"
    memory, library, read, order = write_store(tmp_path, lines)
    try:
        aligned = align_read(memory.index.aligner(), library, asked, read, order)
        found, reason = candidates(asked, library, read, order, replace(DEFAULT, whose=0.0), aligned=aligned)
        assert found == [] and reason == "a line of Ines's holds the question better than any of Theo's"
        assert candidates(asked, library, read, order, replace(DEFAULT, whose=None), aligned=aligned)[0]
        mine = "What made Ines want to train as a counsellor?"
        aligned = align_read(memory.index.aligner(), library, mine, read, order)
        assert candidates(mine, library, read, order, replace(DEFAULT, whose=0.0), aligned=aligned)[0]
    finally:
        memory.close()
    lines[0] = ("Ines", "What made you want to train as a counsellor, Theo?", "2024-03-01T10:00")
    memory, library, read, order = write_store(tmp_path / "asks", lines)
    try:
        aligned = align_read(memory.index.aligner(), library, asked, read, order)
        assert candidates(asked, library, read, order, replace(DEFAULT, whose=0.0), aligned=aligned)[0]
    finally:
        memory.close()


def test_the_margin_does_not_refuse_a_sentence_that_holds_every_word_of_the_question(tmp_path):
    """The margin asks whether memory holds an answer at all; a sentence of the person's that holds every word
    of the question ("What did Ana research?", "I've started researching adoption agencies.") says it does,
    however likely the small model finds "I don't know". A sentence holding only some of them is still refused."""
    lines = [("Ana", "I've started researching adoption agencies.", "2024-03-03T18:40")]
    scores = {"started researching adoption agencies": -4.1, "adoption agencies": -5.1, UNKNOWN: -1.9}  # 2.2 over
    assert DEFAULT.margin < 2.2 and DEFAULT.whole
    said = answered(tmp_path / "a", "What did Ana research?", lines, scores)
    assert "adoption agencies" in said.text and not said.abstained, said
    off = answered(tmp_path / "b", "What did Ana research?", lines, scores, replace(DEFAULT, whole=False))
    assert off.text == UNKNOWN and off.abstained  # the rule, not the scores, made the difference
    part = answered(tmp_path / "c", "What did Ana research at work?", lines, scores)
    assert part.text == UNKNOWN and part.abstained, part


def test_when_a_weekly_thing_is_is_answered_with_the_day_the_line_says(tmp_path):
    """"When is Ana's pottery class?" of "I signed up for a pottery class on Thursdays." is Thursdays, not the
    day the line was said; a date or a relative date the line writes still says when."""
    lines = [("Ana", "I signed up for a pottery class on Thursdays.", "2024-03-03T18:40")]
    assert answered(tmp_path / "a", "When is Ana's pottery class?", lines, {UNKNOWN: -3.0}).text == "Thursdays"
    said = "2024-07-02T20:05"
    assert dated("A twelve-week parenting course every Wednesday evening, then a match.", said) \
        == "every Wednesday evening"
    assert dated("The course starts on 12 March and meets on Thursdays.", said) == "12 March"
    assert dated("Last week I joined a choir that sings on Mondays.", said) == "the week before 2 July 2024"
    assert dated("I joined a choir on Monday.", said) == "2 July 2024"  # one Monday, not each week's
