"""How ask's extractive answer is decided from the reader's line scores (memcli/retrieve/reading.py): the
threshold, whose lines a question about someone reads, the latest of lines that answer as well, and the
date a "when" question is answered with. The scores are set here (what the reader would give), so nothing
hangs on a processor's rounding; tests/test_reader.py runs the real reader."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memcli import Memory
from memcli.retrieve.answer import UNKNOWN
from memcli.retrieve.people import about, named_people
from memcli.retrieve.reading import DEFAULT, Choice, Line, decide
from memcli.store.lines import Library


@pytest.fixture
def library(tmp_path):
    memory = Memory(tmp_path / "store", create=True)
    said = [("Caroline", "I decided to apply to Open Door.", "2024-04-21T10:00"),
            ("Priya", "Thanks, Caroline! My cousin adopted in Portland.", "2024-04-21T10:05"),
            ("Priya", "I drive a Honda Civic.", "2024-05-01T09:00"),
            ("Priya", "I sold the Civic and bought a Subaru Outback.", "2024-06-01T09:00"),
            ("Caroline", "I passed the home study last week!", "2024-07-02T18:00")]
    for speaker, text, when in said:
        memory.remember(text, speaker=speaker, time=when)
    library = Library(memory.store)
    lines = {library.doc("CURRENT").entries[n].text: n for n in library.doc("CURRENT").lines}
    yield library, lines
    memory.close()


def line(lines, text, span, margin):
    return Line("CURRENT", lines[text], span, margin)


def cars_and_study(lines, civic: float, outback: float, study: float) -> list[Line]:
    """The car Priya drove, the one she bought, and Caroline's home study, with these margins."""
    return [line(lines, "I drive a Honda Civic.", "Honda Civic", civic),
            line(lines, "I sold the Civic and bought a Subaru Outback.", "Subaru Outback", outback),
            line(lines, "I passed the home study last week!", "home study", study)]


def alike(a: str, b: str) -> float:
    """A scripted likeness of spans as values: a car and a car alike, a car and the home study not."""
    return {frozenset(("Honda Civic", "Subaru Outback")): 0.6, frozenset(("Honda Civic", "home study")): 0.05}[
        frozenset((a, b))]


def test_the_best_line_answers_above_the_threshold_and_none_below_it(library):
    library, lines = library
    scored = [line(lines, "I decided to apply to Open Door.", "Open Door", 3.0),
              line(lines, "I drive a Honda Civic.", "Honda Civic", 1.0)]
    said = decide("Which agency did she choose?", library, scored, 2.0, Choice(subject=False))
    assert (said.text, said.abstained, said.citation) == ("Open Door", False, f"CURRENT:{scored[0].line}")
    assert said.decided()["margin"] == 3.0 and said.decided()["threshold"] == 2.0
    refused = decide("Which agency did she choose?", library, scored, 3.5, Choice(subject=False))
    assert refused.text == UNKNOWN and refused.abstained and "no answer" in refused.reason


def test_whom_a_question_names_is_one_rule_for_the_evidence_and_the_answer():
    people = {"Melanie", "Howard", "Jon Smith", "user", "assistant"}
    assert named_people("What did Mel's kids paint?", people) == {"Melanie"}  # a short form, possessive
    assert named_people("How was the trip?", people) == set()  # a question's first word is no short form
    assert named_people("Where does Jon Smith work?", people) == {"Jon Smith"}  # every word of the name
    assert named_people("What did the user and the assistant decide?", people) == set()  # roles, not names
    assert named_people("What did MELANIE say?", people) == {"Melanie"}  # the name's words, in any case


def test_a_question_about_someone_reads_their_lines_and_lines_about_them(library):
    library, lines = library
    assert named_people("Which agency did Caroline apply to?", library.speakers()) == {"Caroline"}
    assert named_people("What did Caro say?", library.speakers()) == {"Caroline"}  # a short form
    thanks = library.doc("CURRENT").entries[lines["Thanks, Caroline! My cousin adopted in Portland."]]
    assert not about(thanks, {"Caroline"})  # a name that only addresses her
    scored = [line(lines, "I decided to apply to Open Door.", "Open Door", 4.0)]
    swapped = decide("Which agency did Priya apply to?", library, scored, 0.0)
    assert swapped.abstained and "someone else's, not Priya's" in swapped.reason  # Caroline applied, not Priya
    assert decide("Which agency did Caroline apply to?", library, scored, 0.0).text == "Open Door"
    assert decide("Which agency did Priya apply to?", library, scored, 0.0, Choice(subject=False)).text == "Open Door"


def test_in_a_chat_of_several_people_a_line_said_to_someone_is_about_them(tmp_path):
    memory = Memory(tmp_path / "store", create=True)
    for speaker, text in [("Ross", "One, two, three ..."), ("Monica", "Ross, count faster!"),
                          ("Ross", "I am counting as fast as I can."), ("Joey", "You sound like a robot."),
                          ("Rachel", "Joey bought a boat.")]:
        memory.remember(text, speaker=speaker, time="2024-03-01T10:00")
    library = Library(memory.store)
    at = {library.doc("CURRENT").entries[n].text: n for n in library.doc("CURRENT").lines}
    told = [Line("CURRENT", at["Ross, count faster!"], "Monica", 3.0)]
    assert decide("Who told Ross to count faster?", library, told, 0.0, DEFAULT).text == "Monica"  # said to him
    assert decide("Who told Ross to count faster?", library, told, 0.0, replace(DEFAULT, group=False)).abstained
    reply = [Line("CURRENT", at["You sound like a robot."], "a robot", 3.0)]
    assert decide("What does Ross sound like?", library, reply, 0.0, DEFAULT).text == "a robot"  # in reply to him
    boat = [Line("CURRENT", at["Joey bought a boat."], "a boat", 3.0)]
    assert decide("What did Ross buy?", library, boat, 0.0, DEFAULT).abstained  # neither to him nor in reply
    memory.close()


def test_between_two_people_a_line_said_to_one_is_not_about_them(library):
    library, lines = library  # two speakers: every line of one is said to the other
    scored = [line(lines, "Thanks, Caroline! My cousin adopted in Portland.", "Portland", 4.0)]
    assert decide("Where did Caroline adopt?", library, scored, 0.0, DEFAULT).abstained


def test_two_chats_of_two_people_in_one_document_are_no_group_chat(tmp_path):
    memory = Memory(tmp_path / "store", create=True)
    for speaker, text, chat in [("Ana", "I went to the market today.", "ana-and-sam"),
                                ("Sam", "I bought a kayak.", "ana-and-sam"),
                                ("Lee", "How was the trip?", "sam-and-lee"), ("Sam", "Long.", "sam-and-lee")]:
        memory.remember(text, speaker=speaker, time="2024-03-01T10:00", conv=chat)
    library = Library(memory.store)
    assert library.doc("CURRENT").speakers() == {"Ana", "Sam", "Lee"}
    at = {library.doc("CURRENT").entries[n].text: n for n in library.doc("CURRENT").lines}
    kayak = [Line("CURRENT", at["I bought a kayak."], "a kayak", 3.0)]
    assert decide("What did Ana buy?", library, kayak, 0.0, DEFAULT).abstained  # Sam's reply in a chat of two
    memory.close()


def test_of_lines_that_answer_as_well_the_latest_said_is_the_answer(library):
    library, lines = library
    scored = [line(lines, "I drive a Honda Civic.", "Honda Civic", 5.0),
              line(lines, "I sold the Civic and bought a Subaru Outback.", "Subaru Outback", 4.5)]
    assert decide("What car does Priya drive?", library, scored, 0.0).text == "Honda Civic"  # recency off
    assert decide("What car does Priya drive?", library, scored, 0.0, Choice(recent=1.0)).text == "Subaru Outback"
    assert decide("What car does Priya drive?", library, scored, 0.0, Choice(recent=0.4)).text == "Honda Civic"
    # a later line under the threshold is not an answer, however close
    assert decide("What car does Priya drive?", library, scored, 4.8, Choice(recent=1.0)).text == "Honda Civic"


def test_of_lines_that_answer_nearly_as_well_only_a_value_of_the_same_kind_is_taken_for_the_newer_one(library):
    """With ``recent_kin``, a later line within ``recent`` of the best counts only when its span is alike the
    best's (a car for a car; the likeness is scripted here, the real one is tests/test_reader.py's)."""
    library, lines = library
    scored = cars_and_study(lines, 9.0, 4.0, 5.0)
    question = "What car does she drive?"
    wide = Choice(subject=False, recent=6.0)
    assert decide(question, library, scored, 0.0, wide, alike=alike).text == "home study"  # the latest of any kind
    assert decide(question, library, scored, 0.0, replace(wide, recent_kin=0.3), alike=alike).text == "Subaru Outback"
    assert decide(question, library, scored, 0.0, replace(wide, recent_kin=0.7), alike=alike).text == "Honda Civic"
    assert decide(question, library, scored, 0.0, replace(wide, recent=4.5, recent_kin=0.3),
                  alike=alike).text == "Honda Civic"  # the car's line is 5 under the best: too far


def test_a_line_the_ranking_found_restated_gives_way_to_the_newer_line_when_the_reader_finds_a_span_there(library):
    library, lines = library
    civic, outback = lines["I drive a Honda Civic."], lines["I sold the Civic and bought a Subaru Outback."]
    scored = [line(lines, "I drive a Honda Civic.", "Honda Civic", 5.0),
              line(lines, "I sold the Civic and bought a Subaru Outback.", "Subaru Outback", -1.0)]
    restated = {("CURRENT", civic): [("CURRENT", outback)]}
    question = "What car does Priya drive?"
    said = decide(question, library, scored, 0.0, Choice(restated=-2.0), restated)
    assert said.text == "Subaru Outback" and said.citation == f"CURRENT:{outback}"
    assert "newer line restating" in said.reason
    dated = decide("When does Priya drive her car?", library, scored, 0.0, Choice(restated=-2.0), restated)
    assert dated.citation == f"CURRENT:{outback}" and "date of the reader's span of the newer line" in dated.reason
    assert decide(question, library, scored, 0.0, Choice(restated=0.0), restated).text == "Honda Civic"  # too weak
    assert decide(question, library, scored, 0.0, Choice(restated=None), restated).text == "Honda Civic"  # off
    assert decide(question, library, scored, 0.0, Choice(restated=-2.0)).text == "Honda Civic"  # nothing restated
    # the newer line must have been read: a relation to a line the reader did not score changes nothing
    assert decide(question, library, scored[:1], 0.0, Choice(restated=-2.0), restated).text == "Honda Civic"
    # of several newer lines, the latest in which the reader finds a span of at least that margin
    later = line(lines, "I passed the home study last week!", "home study", -5.0)
    several = {("CURRENT", civic): [("CURRENT", later.line), ("CURRENT", outback)]}
    assert decide(question, library, scored + [later], 0.0, Choice(restated=-2.0), several).text == "Subaru Outback"
    assert decide(question, library, scored + [later], 0.0, Choice(subject=False, restated=-6.0),
                  several).text == "home study"  # (Caroline's: without the person rule)
    # and an answer under the threshold stays "I don't know"
    assert decide(question, library, scored, 6.0, Choice(restated=-2.0), restated).text == UNKNOWN


def test_a_newer_restatement_answers_only_with_a_value_of_the_kind_it_replaces(library):
    """With ``kin``, the newer line answers when its span is alike the replaced one (a car for a car), not when
    it answers something else (the home study for a car): the likeness is scripted here, the real one is
    tests/test_reader.py's."""
    library, lines = library
    civic, outback = lines["I drive a Honda Civic."], lines["I sold the Civic and bought a Subaru Outback."]
    study = lines["I passed the home study last week!"]
    scored = cars_and_study(lines, 5.0, 1.0, 1.0)
    question = "What car does Priya drive?"
    choice = Choice(subject=False, restated=0.0, kin=0.3)
    changed = decide(question, library, scored, 0.0, choice, {("CURRENT", civic): [("CURRENT", outback)]}, alike)
    assert changed.text == "Subaru Outback"
    other = {("CURRENT", civic): [("CURRENT", study)]}
    assert decide(question, library, scored, 0.0, choice, other, alike).text == "Honda Civic"  # another kind
    assert decide(question, library, scored, 0.0, Choice(subject=False, restated=0.0), other,
                  alike).text == "home study"  # kin off: any span
    assert decide(question, library, scored, 0.0, Choice(subject=False, restated=0.0, kin=0.7),
                  {("CURRENT", civic): [("CURRENT", outback)]}, alike).text == "Honda Civic"  # not alike enough


def test_a_question_that_asks_when_is_answered_with_the_date_the_line_speaks_of(library):
    library, lines = library
    scored = [line(lines, "I passed the home study last week!", "home study", 2.0)]
    said = decide("When did Caroline pass the home study?", library, scored, 0.0)
    assert said.text == "the week before 2 July 2024" and said.span == "home study"
    assert decide("When did Caroline pass?", library, [], 0.0).text == UNKNOWN  # nothing read


def test_a_question_that_asks_which_day_is_answered_only_by_a_line_that_names_a_day(tmp_path):
    """With ``weekday``, the line that names no day ("Long week at work.") answers no "which day" question, though
    the reader scores it best: the day it was said is no answer. A line that names one answers; none, "I don't
    know". Other questions are not touched."""
    with Memory(tmp_path / "store", create=True) as memory:
        for text, when in (("Our weekly team meeting moved to Thursday.", "2024-01-08T09:00"),
                           ("Long week at work.", "2024-01-31T15:00"),
                           ("The sprint review was yesterday.", "2024-02-02T10:00")):
            memory.remember(text, speaker="Fiona", time=when)
    library = Library(Memory(tmp_path / "store").store)
    lines = {library.doc("CURRENT").entries[n].text: n for n in library.doc("CURRENT").lines}
    week, thursday = line(lines, "Long week at work.", "Long week", 4.0), line(
        lines, "Our weekly team meeting moved to Thursday.", "Thursday", 1.0)
    question, on = "Which day is Fiona's weekly team meeting?", Choice(subject=False, weekday=True)
    assert decide(question, library, [week, thursday], 0.0, Choice(subject=False)).text == "31 January 2024"  # off
    said = decide(question, library, [week, thursday], 0.0, on)
    assert said.text == "Thursday" and said.citation == thursday.citation
    nothing = decide(question, library, [week], 0.0, on)
    assert nothing.text == UNKNOWN and nothing.abstained and "names a day" in nothing.reason
    yesterday = line(lines, "The sprint review was yesterday.", "yesterday", 2.0)  # a relative day names one
    assert decide(question, library, [week, yesterday], 0.0, on).text == "1 February 2024"
    assert decide("What kind of week was it?", library, [week], 0.0, on).text == "Long week"


@pytest.mark.parametrize("passage, start, end, head, text", [
    ("Jun: New lease, $2,300 a month.", 17, 22, None, "$2,300"),  # the sign the reader's words split off
    ("Ana: It is £980 a month now.", 12, 15, None, "£980"),
    ("Ana: It is £980 a month now.", 11, 15, None, "£980"),  # the reader took it
    ("Kofi: 2,300 people came.", 6, 11, None, "2,300"),  # no sign
    ("Kofi: Tickets are $ 20.", 20, 22, None, "20"),  # not right before it
    ("Kofi: ask $Bob.", 11, 14, None, "Bob"),  # not a number
    ("Caroline: The spare room is empty.", 14, 19, "room", "spare room"),  # the noun asked for, right after
    ("Caroline: The spare room is empty.", 14, 24, "room", "spare room"),  # already in it
    ("Caroline: Two spare rooms here.", 14, 19, "room", "spare rooms"),
    ("Caroline: It's spare, room or not.", 15, 20, "room", "spare"),  # not right after it
    ("Caroline: The spare roommate left.", 14, 19, "room", "spare"),  # another word
])
def test_a_span_keeps_the_currency_sign_before_it_and_the_noun_asked_for_after_it(passage, start, end, head, text):
    from memcli.qa.model import Span
    from memcli.retrieve.reading import span_value

    assert span_value(passage, Span(0, start, end, passage[start:end], 1.0, 0.0), head) == text


@pytest.mark.parametrize("question, noun", [
    ("Which room in Caroline's apartment is empty?", "room"), ("What pet does Caroline have?", "pet"),
    ("What did Caroline sell?", None), ("Where does Bram live now?", None), ("Who is Wes's partner?", None),
])
def test_the_noun_a_question_asks_for_is_the_noun_after_its_which_or_what(question, noun):
    from memcli.retrieve.reading import asked_noun

    assert asked_noun(question) == noun


def test_with_ranked_a_line_the_ranking_put_far_down_counts_less(library):
    library, lines = library
    top = Line("CURRENT", lines["I decided to apply to Open Door."], "Open Door", 2.0, rank=0)
    far = Line("CURRENT", lines["I drive a Honda Civic."], "Honda Civic", 3.0, rank=15)  # log2(16) = 4 doublings
    assert decide("Which agency?", library, [far, top], 0.0, Choice(subject=False)).text == "Honda Civic"  # off
    said = decide("Which agency?", library, [far, top], 0.0, Choice(subject=False, ranked=0.5))
    assert said.text == "Open Door" and said.margin == 2.0  # 3.0 - 0.5 * 4 = 1.0 < 2.0
    assert decide("Which agency?", library, [far], 2.0, Choice(subject=False, ranked=0.5)).abstained  # 1.0 < 2.0
    unranked = Line("CURRENT", lines["I drive a Honda Civic."], "Honda Civic", 3.0)  # a line the ranking did not order
    assert decide("Which agency?", library, [unranked, top], 0.0, Choice(subject=False, ranked=0.5)).text == "Honda Civic"


def test_with_meaning_a_line_nearer_the_question_in_meaning_can_outweigh_a_higher_margin(library):
    library, lines = library
    # the reader's pull toward a line sharing the question's words: a car's line scores above the agency's
    car = Line("CURRENT", lines["I drive a Honda Civic."], "Honda Civic", 3.0, likeness=-0.2)
    agency = Line("CURRENT", lines["I decided to apply to Open Door."], "Open Door", 2.0, likeness=0.1)
    assert decide("Which agency?", library, [car, agency], 0.0, Choice(subject=False)).text == "Honda Civic"  # off
    said = decide("Which agency?", library, [car, agency], 0.0, Choice(subject=False, meaning=8.0))
    assert said.text == "Open Door" and said.margin == pytest.approx(2.8)  # 2.0 + 8 * 0.1 against 3.0 - 1.6
    assert said.decided()["lines"][0]["likeness"] == 0.1
    far = replace(agency, likeness=-0.3)  # the threshold is met by the weighed margin: 2.0 - 2.4 < 0
    assert decide("Which agency?", library, [far], 0.0, Choice(subject=False, meaning=8.0)).abstained


def test_a_lines_likeness_is_its_cosine_with_the_question_less_the_mean_of_the_lines_read(tmp_path):
    from memcli.retrieve.evidence_reader import meaning
    from memcli.retrieve.reading import likeness

    memory = Memory(tmp_path / "store", create=True, settings={"search.vectors": "inline"})
    said = ["Do you think I should learn to play piano?", "I quit squash and took up tennis."]
    for n, text in enumerate(said):
        memory.remember(text, speaker="Ana", time=f"2023-10-0{n + 1}T10:00")
    library = Library(memory.store)
    at = {library.doc("CURRENT").entries[n].text: n for n in library.doc("CURRENT").lines}
    read = [Line("CURRENT", at[text], "x", 0.0) for text in said]
    with memory.store.reading():
        piano, tennis = likeness(memory.index, "Which sport does Ana play?", read)
        asked = meaning(memory.index, "Which sport does Ana play?")  # as the ranking compares it with entries
        cosines = memory.index.similarities(asked)
    memory.close()
    assert piano.likeness + tennis.likeness == pytest.approx(0.0, abs=1e-6)
    assert tennis.likeness - piano.likeness == pytest.approx(cosines[tennis.doc, tennis.line]
                                                             - cosines[piano.doc, piano.line], abs=1e-6)
    assert tennis.likeness - piano.likeness > 0.1  # a sport's line nearer a question about sport than piano's
    assert likeness(memory.index, "Which sport?", []) == []


def test_whose_line_answers_is_judged_by_the_readers_margins_not_by_likeness_in_meaning(library):
    library, lines = library
    # Priya's line is nearer the question in meaning; the reader finds Caroline's answer within `whose` of it
    cousin = line(lines, "Thanks, Caroline! My cousin adopted in Portland.", "cousin", 3.0)
    agency = line(lines, "I decided to apply to Open Door.", "Open Door", 1.5)
    choice = Choice(whose=2.0, meaning=8.0)
    near, far = replace(cousin, likeness=0.1), replace(agency, likeness=-0.1)  # 3.8 against -0.1 once weighed
    said = decide("Which agency did Caroline apply to?", library, [near, far], 0.0, choice)
    assert said.text == "Open Door" and not said.abstained
    far_behind = replace(far, margin=0.5)  # now the reader itself puts Priya's line ahead by more than 2
    assert decide("Which agency did Caroline apply to?", library, [near, far_behind], 0.0, choice).abstained


def test_whose_line_answers_is_judged_again_by_the_lines_read_alone(library):
    library, lines = library
    # read together, Priya's "cousin" outscores Caroline's agency (the words of her line lend it the question's sense)
    cousin = line(lines, "Thanks, Caroline! My cousin adopted in Portland.", "cousin", 3.0)
    agency = line(lines, "I decided to apply to Open Door.", "Open Door", 1.5)
    choice = Choice(whose=None, alone=2, whose_alone=0.5)
    question = "Which agency did Caroline apply to?"
    read_alone = {(cousin.doc, cousin.line): replace(cousin, margin=-1.0),
                  (agency.doc, agency.line): replace(agency, margin=2.0)}
    said = decide(question, library, [cousin, agency], 0.0, choice, alone=read_alone)
    assert said.text == "Open Door" and not said.abstained
    read_alone[cousin.doc, cousin.line] = replace(cousin, margin=2.6)  # alone, Priya's line still answers better by 0.6
    refused = decide(question, library, [cousin, agency], 0.0, choice, alone=read_alone)
    assert refused.abstained and "read alone" in refused.reason and refused.citation == cousin.citation
    assert not decide(question, library, [cousin, agency], 0.0, replace(choice, whose_alone=1.0), alone=read_alone).abstained
    assert not decide(question, library, [cousin, agency], 0.0, replace(choice, alone=0), alone=read_alone).abstained
    # only the first `alone` lines (by the reader's margins) count: Caroline's, second, is not among one
    assert decide(question, library, [cousin, agency], 0.0, replace(choice, alone=1), alone=read_alone).abstained


def test_lines_are_read_alone_only_for_a_question_about_someone_and_only_the_best_few(library):
    from memcli.qa.model import Span
    from memcli.retrieve.reading import read_alone

    library, lines = library
    scored = [line(lines, "I decided to apply to Open Door.", "Open Door", 3.0),
              line(lines, "I passed the home study last week!", "home study", 2.0),
              line(lines, "I drive a Honda Civic.", "Honda Civic", 1.0)]
    seen = []

    class Scripted:  # each passage's last part, its text, scores 1.0
        def by_part(self, question, texts, parts):
            seen.append(texts)
            return [[None] * (len(p) - 1) + [Span(k, *p[-1], t[p[-1][0]:p[-1][1]], 1.0, 0.0)]
                    for k, (t, p) in enumerate(zip(texts, parts))]

    got = read_alone("Which agency did Caroline apply to?", library, scored, 2, Scripted())
    assert sorted(got) == sorted((x.doc, x.line) for x in scored[:2])
    assert len(seen) == 1 and len(seen[0]) == 2 and all("\n" not in text for text in seen[0])  # one line a passage
    assert got[scored[0].doc, scored[0].line].span == "I decided to apply to Open Door"  # its text, edges trimmed
    assert read_alone("Which agency did she apply to?", library, scored, 2, Scripted()) == {}  # names no one
    assert read_alone("Which agency did Caroline apply to?", library, scored, 0, Scripted()) == {}
    assert len(seen) == 1


def test_a_span_naming_the_person_asked_about_is_no_answer_and_the_lines_text_answers(library):
    from memcli.qa.model import Span
    from memcli.retrieve.evidence import Evidence
    from memcli.retrieve.reading import passages, score_lines

    library, lines = library
    n = lines["I decided to apply to Open Door."]
    read = [Evidence("CURRENT", n, n)]
    texts, parts, _ = passages(library, read)
    label, _ = parts[0]

    class Scripted:  # the speaker label scores best, then "Open Door" in the text
        def by_part(self, question, texts, parts):
            text = texts[0]
            at = text.index("Open Door")
            return [[Span(0, *label, text[label[0]:label[1]], 6.0, 0.0),
                     Span(0, at, at + 9, "Open Door", 4.0, 0.0)]]

    about_her = score_lines("Which agency did Caroline apply to?", library, read, Scripted())
    assert [(x.span, x.margin) for x in about_her] == [("Open Door", 4.0)]
    who = score_lines("Who applied to Open Door?", library, read, Scripted())  # names no one: the label answers
    assert [(x.span, x.margin) for x in who] == [("Caroline", 6.0)]


def test_a_name_that_only_addresses_someone_is_in_no_part_a_span_may_come_from(library):
    from memcli.retrieve.evidence import Evidence
    from memcli.retrieve.people import addresses
    from memcli.retrieve.reading import passages

    library, lines = library
    n = lines["Thanks, Caroline! My cousin adopted in Portland."]
    texts, parts, owners = passages(library, [Evidence("CURRENT", n, n)])
    pieces = [texts[0][a:b] for a, b in parts[0]]
    assert pieces == ["Priya", "Thanks, ", " My cousin adopted in Portland."]  # the label, the text around the name
    assert owners[0] == [("CURRENT", n)] * 3
    people = {"Caroline", "Priya"}
    assert addresses("Hey Mel, how was it?", {"Melanie"}) == [(4, 8)]
    assert addresses("I told Caroline, and she cried.", people) == []  # spoken of, not to
    assert addresses("Caroline is my friend.", people) == []
    assert not about(library.doc("CURRENT").entries[n], {"Caroline"})
