"""The deterministic evidence ranking: replies to questions, pseudo-relevance feedback, compact times."""

from __future__ import annotations

import json

import pytest

from memcli.config import Settings
from memcli.index import LibraryIndex
from memcli.paths import Resolved
from memcli.retrieve import evidence_reader as policy
from memcli.retrieve.evidence import assemble, best_part, render_entry, render_run
from memcli.store import Store
from memcli.store.format import Entry
from memcli.store.lines import DocLines, Library
from memcli.tokens import count_tokens

CHATTER = [  # unrelated small talk, a different line each time
    "The bakery on the corner finally reopened after the flood repairs.",
    "Work has been hectic, we ship the new billing system on Friday.",
    "I started reading a thick novel about sailors in the Arctic.",
    "My sister visits next month and wants to see the old harbour.",
    "The weather turned cold so quickly this week, I needed gloves.",
    "I fixed the squeaky bike chain with some oil from the garage.",
    "Our neighbours painted their fence bright yellow.",
    "The train was late twice, so I cycled into town instead.",
    "I tried a recipe for lentil soup and it was surprisingly good.",
    "The library extended its opening hours on weekdays.",
    "My phone screen cracked when it slipped off the table.",
    "We watched a documentary about volcanoes in Iceland.",
    "The market had cheap strawberries, so I made jam.",
    "I finally cleaned out the attic and found old photographs.",
    "The office moved to the third floor, with a view of the river.",
    "A storm knocked down a tree in the park near us.",
    "I booked a dentist appointment I had postponed for months.",
    "The new cafe downtown serves cardamom buns on Thursdays.",
    "My laptop fan is noisy, I should get it repaired.",
    "The kids next door built a treehouse over the holidays.",
    "I switched to a cheaper electricity provider.",
    "There is a chess tournament at the community hall in May.",
    "The ferry schedule changed, the last boat now leaves at nine.",
    "I planted tomatoes on the balcony, fingers crossed.",
    "Our team lunch was at a Georgian restaurant with great dumplings.",
    "The museum has a new exhibition about medieval maps.",
    "I lost my umbrella on the bus again.",
    "The plumber finally came and the kitchen tap is fixed.",
    "My friend from university is getting married in Lisbon.",
    "We are repainting the hallway a calm shade of green.",
]


def chatter(session: int) -> list[tuple[str, str]]:
    lines = CHATTER[(session * 5) % len(CHATTER):] + CHATTER
    return [("Lena" if at % 2 else "Tomas", text) for at, text in enumerate(lines[:5])]


SESSIONS = [
    [("Tomas", "We adopted two dogs from the shelter on Saturday!"),
     ("Lena", "That is huge news, congratulations!")],
    [("Lena", "The dogs in our street barked all night again."),
     ("Tomas", "Loud dogs are the worst when you need to sleep.")],
    [("Lena", "My cousin walks dogs for money now, six dogs at once."),
     ("Tomas", "Six dogs sounds like a workout, good for her.")],
    [("Tomas", "I practise every evening now, the cello audition for the orchestra is close."),
     ("Lena", "Every evening? The orchestra will be lucky to get such a devoted cello player.")],
    [("Lena", "How was your week?"),
     ("Tomas", "Busy, but the lessons go well."),
     ("Lena", "By the way, what did you name the dogs?"),
     ("Tomas", "Biscuit and Pepper, after the snacks my grandmother used to bake."),
     ("Tomas", "My cello teacher says the orchestra will like my bowing.")],
    [("Lena", "Guess what?"),
     ("Lena", "I ran ten kilometres on Sunday without stopping.")],
]


def conversation() -> dict:
    data: dict = {"speaker_a": "Tomas", "speaker_b": "Lena"}
    for number, turns in enumerate(SESSIONS, start=1):
        data[f"session_{number}_date_time"] = f"10:00 am on {number} June, 2024"
        turns = chatter(number) + turns
        data[f"session_{number}"] = [{"speaker": who, "dia_id": f"D{number}:{at}", "text": text}
                                     for at, (who, text) in enumerate(turns, start=1)]
    return data


@pytest.fixture
def library(cli, store_dir, tmp_path):
    source = tmp_path / "tomas-and-lena.json"
    source.write_text(json.dumps(conversation()))
    assert cli("ingest", source).code == 0
    store = Store.open(Resolved(store_dir, "test"))
    return store, LibraryIndex(store, Settings.load(store_dir).search_partition_tokens)


def rank_of(store: Store, index: LibraryIndex, question: str, ref: str) -> int:
    library = Library(store)
    ranked = policy.ranked_entries(library, index, question)
    refs = [library.doc(doc).entries[line].ref for doc, line in ranked]
    return refs.index(ref) if ref in refs else len(refs)


def test_a_reply_to_a_matching_question_ranks_with_it(library, monkeypatch):
    store, index = library
    monkeypatch.setattr(policy, "FEEDBACK_WEIGHT", 0.0)  # the replies alone
    question = "What names do the dogs have?"
    with_replies = rank_of(store, index, question, "D5:9")  # "Biscuit and Pepper ...": no word of the question
    monkeypatch.setattr(policy, "FOLLOW_WEIGHT", 0.0)
    without = rank_of(store, index, question, "D5:9")
    assert with_replies < without


def test_a_reply_needs_a_question_and_another_speaker(library):
    store, _ = library
    doc = Library(store).doc("CURRENT")
    line_of = {entry.ref: line for line, entry in doc.entries.items()}
    assert policy.reply_to(doc, line_of["D5:8"]) == line_of["D5:9"]  # Lena asks, Tomas answers
    assert policy.reply_to(doc, line_of["D5:6"]) == line_of["D5:7"]
    assert policy.reply_to(doc, line_of["D5:9"]) is None  # not a question
    assert policy.reply_to(doc, line_of["D6:6"]) is None  # the same speaker goes on


def test_feedback_brings_entries_that_share_the_best_entries_words(library, monkeypatch):
    store, index = library
    question = "What does Tomas practise every evening?"
    with_feedback = rank_of(store, index, question, "D5:10")  # says "cello" and "orchestra", not "practise"
    monkeypatch.setattr(policy, "FEEDBACK_WEIGHT", 0.0)
    without = rank_of(store, index, question, "D5:10")
    assert with_feedback < without


def test_feedback_terms_are_the_best_entries_shared_rare_words(monkeypatch):
    monkeypatch.setattr(policy, "FEEDBACK_ENTRIES", 2)
    candidates = {("d", 1): (8.0, {"tomas", "practis", "cello", "orchestra"}),
                  ("d", 2): (7.0, {"tomas", "cello", "teacher"}),
                  ("d", 3): (0.0, {"lena", "bakery"})}
    scores = {("d", 1): 10.0, ("d", 2): 9.0, ("d", 3): 0.5}
    idf = {"cello": 3.0, "orchestra": 2.0, "teacher": 2.5, "bakery": 4.0}.get
    terms = policy.feedback_terms(candidates, scores, {"tomas", "practis"}, lambda t: idf(t) or 0.1)
    assert terms == ["cello", "teacher", "orchestra"]  # cello is in both of the best entries
    # the question's own terms are not feedback, and the third entry is not among the best two


def test_a_range_shows_each_time_once_and_fits_the_budget(cli, library):
    result = cli("ask", "dogs shelter names cello", "--evidence-only", "--budget", "300", "--json")
    assert result.code == 0, result.stderr
    evidence = result.json["evidence"]
    assert sum(count_tokens(item["text"]) for item in evidence) <= 300
    untimed = 0
    above: dict[str, str] = {}  # the time of the entry shown last from each document
    for item in evidence:
        lines = item["text"].split("\n")
        read = cli("read", item["doc"], "--lines", f"{item['start_line']}-{item['end_line']}", "--json").json
        entries = [line["entry"] for line in read["lines"]]
        assert [int(entry["meta"]["seq"]) for entry in entries] == item["seqs"] and len(lines) == len(entries)
        assert item["time"] == entries[0]["meta"]["time"]
        for line, entry in zip(lines, entries):
            changed = entry["meta"]["time"] != above.get(item["doc"])
            assert line.startswith(f"[{entry['meta']['time'].replace('T', ' ')}] ") == changed, line
            untimed += not changed
            above[item["doc"]] = entry["meta"]["time"]
    assert untimed > 0, "expected consecutive entries of one session in a range"


class _Lines:
    """A document as :class:`DocLines` reads it: numbered entry lines."""

    def __init__(self, entries: list[Entry]):
        self.entries = entries

    def lines(self):
        return ((at, entry.render()) for at, entry in enumerate(self.entries, start=1))


def _library(*entries: Entry) -> Library:
    library = Library(None)
    library._docs["topic"] = DocLines("topic", _Lines(list(entries)))
    return library


def _entry(seq: int, time: str, text: str) -> Entry:
    return Entry({"seq": str(seq), "time": time, "speaker": "Lena", "ref": f"D:{seq}"}, text)


def cost(entry: Entry, with_time: bool = True) -> int:
    return count_tokens(render_entry(entry, with_time=with_time) + "\n")


def test_a_time_carries_over_a_gap_between_ranges_of_a_document():
    one, two, three = (_entry(n, "2024-06-01T10:00", f"Line number {n} of the session.") for n in (1, 2, 3))
    library = _library(one, two, three)
    exact = cost(one) + cost(three, with_time=False)  # the third entry does not repeat the first's time
    first, second = assemble(library, [("topic", 1), ("topic", 3)], exact)
    assert (first.start_line, second.start_line) == (1, 3)
    assert first.text.startswith("[2024-06-01 10:00] ") and second.text == "Lena: Line number 3 of the session."
    assert second.time == "2024-06-01T10:00"  # the range still carries its time
    assert len(assemble(library, [("topic", 1), ("topic", 3)], exact - 1)) == 1
    read = best_part(library, [first, second], [("topic", 3), ("topic", 1)], 10**6)  # what an answer reads
    assert [item.text.startswith("[2024-06-01 10:00] ") for item in read] == [True, True]  # each range its time


def test_an_entry_of_another_time_between_two_makes_the_lower_one_show_its_time_again():
    early, other, late = (_entry(1, "2024-06-01T10:00", "First of the morning."),
                          _entry(2, "2024-07-09T18:30", "An evening much later."),
                          _entry(3, "2024-06-01T10:00", "Second of the morning."))
    library = _library(early, other, late)  # a topic document: times need not ascend
    picks = [("topic", 1), ("topic", 3), ("topic", 2)]
    exact = cost(early) + cost(other) + cost(late)  # all three show their times
    evidence = assemble(library, picks, exact)
    assert [line.startswith("[") for line in evidence[0].text.split("\n")] == [True, True, True]
    assert sum(item.tokens for item in evidence) <= exact
    short = assemble(library, picks, exact - 1)  # the middle one no longer fits, the third keeps no time
    assert short[0].end_line == 1 and short[1].text == "Lena: Second of the morning."


def test_a_time_is_shown_again_where_it_changes():
    first = Entry({"seq": "1", "time": "2024-06-01T10:00", "speaker": "Lena"}, "One.")
    second = Entry({"seq": "2", "time": "2024-06-01T10:00", "speaker": "Tomas"}, "Two.")
    later = Entry({"seq": "3", "time": "2024-06-02T09:30", "speaker": "Lena"}, "Three.")
    assert render_run([first, second, later]).split("\n") == [
        "[2024-06-01 10:00] Lena: One.", "Tomas: Two.", "[2024-06-02 09:30] Lena: Three."]


def test_evidence_fills_the_budget_in_either_order(library):
    store, _ = library
    lib = Library(store)
    doc = lib.doc("CURRENT")
    longest = max(count_tokens(render_entry(entry)) for entry in doc.entries.values())
    for order in (doc.lines, doc.lines[::-1]):  # oldest first, newest first (full-context's order)
        evidence = assemble(lib, [("CURRENT", line) for line in order], 600)
        used = sum(count_tokens(item.text) for item in evidence)
        assert 600 - longest < used <= 600


def test_the_answer_reads_the_best_ranked_part_of_the_evidence(library):
    store, index = library
    lib = Library(store)
    ranked = policy.ranked_entries(lib, index, "What did Tomas name the dogs?")
    evidence = assemble(lib, ranked, 600)
    part = best_part(lib, evidence, ranked, 80)
    assert 0 < sum(item.tokens for item in part) <= 80 < sum(item.tokens for item in evidence)
    shown = {(item.doc, line) for item in part for line in lib.doc(item.doc).lines
             if item.start_line <= line <= item.end_line}
    inside = {(item.doc, line) for item in evidence for line in lib.doc(item.doc).lines
              if item.start_line <= line <= item.end_line}
    assert ranked[0] in shown and shown < inside  # the best entry, and nothing the evidence does not cite
    # all of it, as it is: no limit, no order, no library; a limit it fits: all of it, read again
    assert best_part(lib, evidence, ranked, 0) == best_part(lib, evidence, [], 80) == evidence
    assert best_part(None, evidence, ranked, 80) == evidence
    whole = best_part(lib, evidence, ranked, 10**6)
    assert [(item.start_line, item.end_line) for item in whole] == [(item.start_line, item.end_line) for item in evidence]
    # an order that names none of the evidence: its first entries, never nothing
    elsewhere = [pick for pick in ranked if pick not in inside] or [("CURRENT", 10 ** 6)]
    first = best_part(lib, evidence, elsewhere, 80)
    assert 0 < sum(item.tokens for item in first) <= 80 and first[0].start_line == evidence[0].start_line


def test_interleave_alternates_two_rankings():
    first, second = [("a", 1), ("a", 2), ("a", 3)], [("b", 1), ("a", 1)]
    assert policy.interleave(first, second) == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
    assert policy.interleave([], second) == second


def test_session_coverage_spreads_evidence_over_sessions(library):
    """The coverage rule (Tuning.session_decay, off by default: cross-validation keeps it off) takes
    a further entry of an already covered day only after the best of other days."""
    store, _ = library
    lib = Library(store)
    line_of = {entry.ref: line for line, entry in lib.doc("CURRENT").entries.items()}
    one_day = [("CURRENT", line_of[f"D1:{n}"]) for n in (1, 2, 3, 4)]
    others = [("CURRENT", line_of["D3:1"]), ("CURRENT", line_of["D5:1"])]
    scores = {**{key: 10.0 - at for at, key in enumerate(one_day)}, **{key: 6.5 - at for at, key in enumerate(others)}}
    assert policy.cover_sessions(lib, scores, 1.0) == one_day + others  # no rule: best first
    assert policy.cover_sessions(lib, scores, 0.5) == [one_day[0], *others, *one_day[1:]]
    # the first ``free`` entries of a day are not discounted
    assert policy.cover_sessions(lib, scores, 0.5, free=2) == [*one_day[:3], *others, one_day[3]]


def test_a_full_budget_stops_reading_a_long_ranking():
    entries = [_entry(n, f"2024-06-{1 + n % 28:02d}T10:00", f"Entry {n} says something of its own.") for n in range(1, 501)]
    library = _library(*entries)
    picks = [("topic", n) for n in range(1, 501)]
    read = []
    counting = lambda text: read.append(text) or count_tokens(text)  # noqa: E731
    evidence = assemble(library, picks, 200, counting)
    shown = sum(len(e.seqs) for e in evidence)
    assert 0 < shown < 50 and sum(e.tokens for e in evidence) <= 200
    assert len(read) < 4 * shown + 10  # the 500 entries are not all rendered to find that none fits


@pytest.mark.slow  # the reader's weights are loaded
def test_evidence_for_an_outer_model_and_for_memcli_reader_are_ranked_each_by_its_own_tuning(tmp_path, monkeypatch):
    """``ask --evidence-only`` ranks with ``DEFAULT`` (chosen by evidence recall), ``ask`` with an answer with
    ``ANSWERING`` (chosen by the answers): they differ in set selection (docs/benchmarks.md)."""
    from memcli import Memory

    assert policy.ANSWERING != policy.DEFAULT and policy.ANSWERING.diversity != policy.DEFAULT.diversity
    seen = []
    original = policy.evidence_only

    def recording(*args, tuning=policy.DEFAULT, **kwargs):
        seen.append(tuning)
        return original(*args, tuning=tuning, **kwargs)

    monkeypatch.setattr(policy, "evidence_only", recording)
    memory = Memory(tmp_path / "store", create=True, settings={"search.semantic": False})
    memory.remember("I keep the spare key under the blue flower pot.", speaker="Ana")
    memory.ask("Where is the spare key?", reader="evidence-only")
    memory.ask("Where is the spare key?", reader="evidence", answer="extract")
    assert seen == [policy.DEFAULT, policy.ANSWERING]


def test_a_question_about_one_of_two_people_ranks_the_other_s_lines_lower(tmp_path):
    """Of a chat between two, the lines of the one a question does not name count ``others`` of their score;
    notes, and every line of a chat of more than two (where what is said of Ross is often said by the others),
    as they were; nothing changes for a question naming no one or both."""
    from memcli.memory import Memory

    with Memory(tmp_path / "store", create=True, on_warning=list.append) as memory:
        for speaker, text in [("Ana", "I went hiking by the lake."), ("Ben", "I went hiking in the hills."),
                              (None, "Buy boots before the trip.")]:
            memory.remember(text, speaker=speaker, time="2024-03-01T10:00")
        library = Library(memory.store)
        said = {library.doc("CURRENT").entries[n].meta.get("speaker"): ("CURRENT", n)
                for n in library.doc("CURRENT").lines}
        scores = dict.fromkeys(said.values(), 2.0)
        lowered = policy.own_first(library, scores, {"Ana"}, 0.4)
        assert lowered == {said["Ana"]: 2.0, said["Ben"]: 0.8, said[None]: 2.0}
        assert policy.own_first(library, scores, {"Ana", "Ben"}, 0.4) == scores
        assert policy.own_first(library, scores, set(), 0.4) == scores
        assert policy.DEFAULT.others < 1.0 and policy.ANSWERING.others == 1.0  # the reader's person rule reads both
        memory.remember("Take the lake path.", speaker="Cleo", time="2024-03-01T10:05")
        group = Library(memory.store)
        everyone = dict.fromkeys((("CURRENT", n) for n in group.doc("CURRENT").lines), 2.0)
        assert policy.own_first(group, everyone, {"Ana"}, 0.4) == everyone  # three speakers: no one's lines lowered
