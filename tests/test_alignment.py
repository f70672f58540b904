"""Token-level matching (late interaction) with the shipped MiniLM: a question's words against a line's tokens.

The encoder is the real one (it ships with memcli as a package); no model file is needed."""

from __future__ import annotations

import numpy as np
import pytest

from memcli.memory import Memory
from memcli.retrieve.aligned import Tuning, align_read
from memcli.retrieve.evidence import assemble
from memcli.semantic.alignment import Aligner, align, asked_kind, kind_match, locate, tokenize, weakest
from memcli.semantic.encoder import Encoder
from memcli.semantic.wordpiece import basic_words
from memcli.store.lines import Library


@pytest.fixture(scope="module")
def aligner():
    return Aligner(Encoder())


def test_token_vectors_pool_to_the_sentence_vector(aligner):
    """The token vectors are the encoder's own last layer: their mean is the entry's sentence vector."""
    text = "I decided to apply to Open Door rather than Harbor Light."
    (tokens,) = tokenize(aligner.encoder, [text])
    pooled = aligner.encoder.vectors_of([aligner.encoder.tokens(text)])[0]
    assert tokens.vectors.shape == pooled.shape == (len(aligner.encoder.tokens(text)), 384)
    np.testing.assert_allclose(np.linalg.norm(tokens.vectors, axis=1), 1.0, rtol=1e-5)
    sentence = aligner.encoder.encode([text])[0]
    raw = aligner.encoder._hidden([aligner.encoder.tokens(text)])[0][0].mean(axis=0)
    np.testing.assert_allclose(raw / np.linalg.norm(raw), sentence, atol=1e-5)
    assert tokens.words[:3] == ["i", "decided", "to"] and tokens.word_of[0] == -1 and tokens.word_of[-1] == -1


def test_the_question_words_are_its_content_words(aligner):
    asked = aligner.question("Which adoption agency did Caroline choose?")
    assert [asked.words[i] for i in asked.content()] == ["adoption", "agency", "caroline", "choose"]


def test_the_line_holding_what_the_question_asks_about_aligns_better(aligner):
    """Two lines share the question's topic words; the one that says what was asked about aligns higher,
    and the alignment says which words of it the question's words found."""
    asked = aligner.question("What is Mateo's current diet?")
    keto, other = aligner.lines(["Mateo: So I've gone keto.", "Mateo: I watched a film about my old school."])
    assert align(asked, keto).score > align(asked, other).score
    found = align(asked, keto)
    assert len(found.matches) == len(asked.content()) and found.matched.max() < len(keto.words)


@pytest.mark.parametrize("question, line, answer, other", [
    ("How often does Ana swim?", "Ana: I swim twice a week at the lido near my flat.", "twice a week",
     "the lido near my flat"),
    ("What time does the bakery open?", "Tomas: The bakery opens at 7:30 am, just past the station.", "7:30 am",
     "just past the station"),
    ("How many cousins does Lev have?", "Lev: I have eleven cousins, most of them in Riga.", "eleven",
     "most of them in Riga"),
])
def test_the_question_s_opening_words_find_the_part_of_a_line_that_gives_that_kind_of_answer(
        aligner, question, line, answer, other):
    """"How often", "What time", "How many": in context their tokens lie nearer a frequency, a clock time,
    a count than the rest of the line that answers."""
    kind = asked_kind(aligner.question(question))
    (tokens,) = aligner.lines([line])
    assert kind is not None and abs(float(np.linalg.norm(kind)) - 1.0) < 1e-5
    assert kind_match(tokens, basic_words(answer), kind) > kind_match(tokens, basic_words(other), kind)


def test_a_span_is_found_where_its_words_stand_in_the_line_or_not_at_all(aligner):
    (tokens,) = aligner.lines(["Ana: I swim twice a week, twice."])
    assert locate(tokens, ["twice", "a", "week"]) == tokens.words.index("twice")
    assert locate(tokens, ["week", "twice"]) is None and locate(tokens, []) is None
    kind = asked_kind(aligner.question("How often does Ana swim?"))
    assert kind_match(tokens, ["a"], kind) == 0.0  # no content word
    assert kind_match(tokens, ["weekly"], kind) == 0.0  # not in the line


def test_the_weakest_word_is_low_when_memory_lacks_it(aligner):
    """A question about something no line holds: its least-met word finds nothing close; the same question
    about something a line holds does."""
    lines = aligner.lines(["Caroline: I decided to apply to Open Door rather than Harbor Light.",
                           "Priya: My first bowl looks like a hat."])
    held = weakest(aligner.question("What did Caroline decide to apply to?"), lines)
    lacking = weakest(aligner.question("Which submarine did Caroline paint?"), lines)
    assert held > lacking


def test_the_cache_keeps_the_newest_lines(aligner):
    small = Aligner(aligner.encoder, cache=2)
    first = small.lines(["a b c", "d e f"])
    again = small.lines(["a b c"])
    assert again[0] is first[0]
    small.lines(["g h i", "j k l"])
    assert len(small._lines) == 2 and "a b c" not in small._lines


def test_align_read_orders_the_entries_read_and_says_what_is_missing(tmp_path, aligner):
    with Memory(tmp_path / "s", create=True, settings={"search.vectors": "inline"}) as memory:
        memory.remember("I watched a film about my old school.", speaker="Mateo", time="2024-01-01T10:00")
        memory.remember("So I've gone keto.", speaker="Mateo", time="2024-01-02T10:00")
        library = Library(memory.store)
        picks = [("CURRENT", n) for n in sorted(library.doc("CURRENT").entries)]
        read = assemble(library, picks, 10 ** 6)
        found = align_read(aligner, library, "What is Mateo's current diet?", read, picks, Tuning(reorder=True))
        kept = align_read(aligner, library, "What is Mateo's current diet?", read, picks, Tuning(reorder=False))
    assert found.order == [picks[1], picks[0]]
    assert kept.order == picks and kept.alignments[picks[1]].score > kept.alignments[picks[0]].score
    assert found.missing(Tuning(floor=0.0)) is None
    assert found.missing(Tuning(floor=0.99)) in found.words


def test_each_candidate_carries_how_well_it_gives_the_kind_of_answer_asked(tmp_path, aligner):
    """With ``extractive.Tuning.kind`` (off by default: measured, docs/benchmarks.md) a candidate holds its
    ``Aligned.typed`` match and the score weighs it in; off, every candidate holds 0."""
    from dataclasses import replace

    from memcli.retrieve import extractive

    question = "How often does Ana swim?"
    with Memory(tmp_path / "s", create=True, settings={"search.vectors": "inline"}) as memory:
        memory.remember("I swim twice a week at the lido near my flat.", speaker="Ana", time="2024-01-01T10:00")
        library = Library(memory.store)
        picks = [("CURRENT", n) for n in sorted(library.doc("CURRENT").entries)]
        read = assemble(library, picks, 10 ** 6)
        aligned = align_read(aligner, library, question, read, picks)
        on = replace(extractive.DEFAULT, kind=8.0)
        found, _ = extractive.candidates(question, library, read, picks, on, aligned)
        off, _ = extractive.candidates(question, library, read, picks, extractive.DEFAULT, aligned)
    kinds = {c.text: c.kind for c in found}  # spans cut at the function words: "twice", "week", "lido near"
    assert kinds["twice"] > kinds["lido near"] > 0 and kinds["week"] > kinds["flat"]
    assert all(c.kind == 0.0 for c in off)
    assert {c.text: extractive.score(c, on) - extractive.score(c, extractive.DEFAULT) for c in found} == \
        pytest.approx({text: 8.0 * kind for text, kind in kinds.items()})


def test_a_question_word_is_a_persons_short_name_only_as_a_name_is_written(tmp_path, aligner):
    """``held`` leaves out the person's name and its short forms ("Mel"), not a word that only begins it: "car"
    is what "What car does Caroline drive?" asks about (the prefix slip ``extractive._about`` had too)."""
    with Memory(tmp_path / "s", create=True, settings={"search.vectors": "inline"}) as memory:
        memory.remember("I drive a blue Honda Civic.", speaker="Caroline", time="2024-01-01T10:00")
        library = Library(memory.store)
        picks = [("CURRENT", n) for n in sorted(library.doc("CURRENT").entries)]
        read = assemble(library, picks, 10 ** 6)
        car = align_read(aligner, library, "What car does Caroline drive?", read, picks)
        short = align_read(aligner, library, "What does Car drive?", read, picks)
    names = {"caroline"}
    assert car.words == ["car", "caroline", "drive"]
    assert len(car._other_words(picks[0], names)) == 2  # car, drive
    assert car.held(picks[0], names) == pytest.approx(car.alignments[picks[0]].matches[[0, 2]].mean())
    assert short.words[0] == "car" and len(short._other_words(picks[0], names)) == 1  # "Car" is her name: drive
