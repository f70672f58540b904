"""The semantic signal (sentence vectors fused with the words), its cache, and compact evidence,
each measured against the ranking with it turned off, on a conversation written here."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from memcli.config import Settings
from memcli.index import LibraryIndex
from memcli.paths import Resolved
from memcli.retrieve import evidence_reader as policy
from memcli.retrieve.evidence import Focus, assemble, compact, render_entry
from memcli.semantic import encoder as encoder_module
from memcli.semantic.encoder import Encoder
from memcli.semantic.vectors import Similarities, entry_text
from memcli.semantic.wordpiece import WordPiece, basic_words
from memcli.store import Store
from memcli.store.format import Entry
from memcli.store.lines import Library
from memcli.terms import terms
from memcli.tokens import count_tokens

SMALL_TALK = [
    "Mira: The bus was late again this morning, I waited forty minutes.",
    "Jonas: Our landlord finally replaced the broken boiler.",
    "Mira: I baked bread yesterday but it came out flat.",
    "Jonas: My brother moved to a flat near the train station.",
    "Mira: The printer at work jams whenever someone is in a hurry.",
    "Jonas: I bought a second-hand desk for the spare room.",
    "Mira: My aunt sent a parcel of dried figs from her garden.",
    "Jonas: The internet was down the whole evening.",
    "Mira: I reorganised my bookshelf by colour, it looks odd.",
    "Jonas: The council is repaving the road outside our building.",
    "Mira: I finished a jigsaw puzzle of a lighthouse.",
    "Jonas: Our cat knocked a mug off the table again.",
]
ANSWERS = {  # what Mira does for sport, said without a word of the question
    "D2:3": ("Mira", "On Saturdays I go bouldering at the climbing gym with Pia."),
    "D4:3": ("Mira", "Tuesday evenings are for volleyball with my team from work."),
}
QUESTION = "Which sports does Mira play?"


def conversation(answers: dict = ANSWERS) -> dict:
    data: dict = {"speaker_a": "Mira", "speaker_b": "Jonas"}
    for number in range(1, 7):
        data[f"session_{number}_date_time"] = f"9:00 am on {number} March, 2024"
        turns = [line.split(": ", 1) for line in SMALL_TALK[number % 4:] + SMALL_TALK[:number % 4]][:6]
        rows = [{"speaker": who, "dia_id": f"D{number}:{at}", "text": text}
                for at, (who, text) in enumerate(turns, start=1)]
        for ref, (who, text) in answers.items():
            if ref.startswith(f"D{number}:"):
                rows.insert(2, {"speaker": who, "dia_id": ref, "text": text})
        for at, row in enumerate(rows, start=1):
            row["dia_id"] = f"D{number}:{at}"
        data[f"session_{number}"] = rows
    return data


def ingested(cli, store_dir, tmp_path, answers: dict):
    """The conversation with ``answers`` ingested; (store, index with the semantic signal)."""
    source = tmp_path / "mira-and-jonas.json"
    source.write_text(json.dumps(conversation(answers)))
    assert cli("ingest", source).code == 0
    store = Store.open(Resolved(store_dir, "test"))
    index = LibraryIndex(store, Settings.load(store_dir).search_partition_tokens, cache_dir=tmp_path / "cache",
                         semantic=True)
    yield store, index
    index.close()


@pytest.fixture
def mira(cli, store_dir, tmp_path):
    yield from ingested(cli, store_dir, tmp_path, ANSWERS)


def remember(cli, text: str) -> bool:
    return cli("ingest", "-", "--format", "text", stdin=text.encode()).code == 0


def ranks(store: Store, index: LibraryIndex, question: str, tuning: policy.Tuning) -> list[int]:
    library = Library(store)
    ranked = policy.ranked_entries(library, index, question, tuning=tuning)
    refs = [library.doc(doc).entries[line].ref for doc, line in ranked]
    return sorted(refs.index(ref) if ref in refs else len(refs) for ref in ANSWERS)


# ------------------------------------------------------------------ the model

def test_wordpiece_follows_bert_uncased():
    assert basic_words("Café au LAIT, s'il vous plaît!") == ["cafe", "au", "lait", ",", "s", "'", "il", "vous",
                                                             "plait", "!"]
    vocab = {"[CLS]": 0, "[SEP]": 1, "[UNK]": 2, "climb": 3, "##ing": 4, "gym": 5, ".": 6}
    tokenizer = WordPiece(vocab)
    assert tokenizer.encode("Climbing gym.", 16) == [0, 3, 4, 5, 6, 1]
    assert tokenizer.encode("xyz gym", 16) == [0, 2, 5, 1]  # no piece fits: the word is unknown
    assert tokenizer.encode("climbing " * 20, 6) == [0, 3, 4, 3, 4, 1]  # cut to the limit, [SEP] kept


def test_vectors_put_paraphrases_closer_than_unrelated_text():
    encoder = Encoder()
    question, sport, weather = encoder.encode(
        [QUESTION, "Mira: Tuesday evenings are for volleyball with my team.", "The boiler was replaced."])
    assert np.allclose([np.linalg.norm(v) for v in (question, sport, weather)], 1.0, atol=1e-4)
    assert question @ sport > question @ weather + 0.1
    batch = encoder.encode(["short", "a much longer sentence about the climbing gym on Saturday mornings"])
    alone = encoder.encode(["short"])  # padding in a batch changes nothing
    assert np.allclose(batch[0], alone[0], atol=1e-4)


def test_a_missing_model_package_leaves_the_words_alone(mira, monkeypatch, cli):
    store, index = mira
    monkeypatch.setattr(encoder_module.importlib.util, "find_spec", lambda name: None)
    fresh = LibraryIndex(store, index.partition_tokens, cache_dir=index.folder, semantic=True)
    assert fresh.similarities(QUESTION) == {} and "not installed" in fresh.semantic_missing
    with_words = policy.ranked_entries(Library(store), fresh, QUESTION)
    assert with_words == policy.ranked_entries(Library(store), fresh, QUESTION,
                                               tuning=replace(policy.DEFAULT, semantic_weight=0.0))
    fresh.close()
    asked = cli("ask", QUESTION, "--evidence-only", "--json")
    assert asked.code == 0 and asked.json["evidence"]
    doctor = cli("doctor", "--json")
    check = next(c for c in doctor.json["checks"] if c["name"] == "semantic signal")
    assert not check["ok"] and "words alone" in check["detail"]


# ------------------------------------------------------------------ the signal against words alone

def test_the_semantic_signal_finds_what_shares_no_word_with_the_question(mira):
    store, index = mira
    words = ranks(store, index, QUESTION, policy.Tuning(semantic_weight=0.0))
    both = ranks(store, index, QUESTION, policy.DEFAULT)
    assert sum(both) < sum(words)
    assert max(both) < 10, both  # both answers among the ten best entries


def test_a_question_with_no_word_in_memory_gets_no_evidence(mira, cli):
    store, index = mira
    assert index.similarities("Quantum chromodynamics lattice")  # similarity alone always finds something
    assert policy.ranked_entries(Library(store), index, "Quantum chromodynamics lattice") == []
    assert cli("ask", "Quantum chromodynamics lattice", "--evidence-only").code == 1  # exit 1: no evidence


def test_the_vectors_are_computed_once_and_then_only_for_new_text(mira, store_dir, tmp_path, cli):
    store, index = mira
    vectors = index.vectors()
    first = vectors.refresh()
    assert first > 0 and vectors.refresh() == 0
    calls = []
    real = vectors.encoder.encode
    vectors.encoder.encode = lambda texts, on_batch=None: calls.append(list(texts)) or real(texts)
    index.similarities(QUESTION)
    assert calls == [[QUESTION]]  # a question embeds the question, nothing else
    assert remember(cli, "Mira signed up for a fencing class at the sports centre.")
    calls.clear()
    assert vectors.refresh() == 1 and len(calls) == 1 and calls[0][0].endswith("a fencing class at the sports centre.")
    # another process (a new index on the same cache) reads the vectors instead of computing them
    again = LibraryIndex(store, index.partition_tokens, cache_dir=index.folder, semantic=True)
    assert again.vectors().refresh() == 0
    assert again.similarities(QUESTION).keys() == index.similarities(QUESTION).keys()
    again.close()


def test_the_vector_cache_is_rebuilt_when_deleted_and_kept_in_memory_when_unwritable(mira, tmp_path):
    store, index = mira
    before = index.similarities(QUESTION)
    index.close()
    (index.folder / "vectors.sqlite").unlink()
    rebuilt = LibraryIndex(store, index.partition_tokens, cache_dir=index.folder, semantic=True)
    after = rebuilt.similarities(QUESTION)
    assert after.keys() == before.keys()
    assert all(abs(after[k] - before[k]) < 1e-3 for k in after)
    rebuilt.close()
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    warnings = []
    memory_only = LibraryIndex(store, index.partition_tokens, cache_dir=blocked, semantic=True,
                               on_warning=warnings.append)
    assert memory_only.similarities(QUESTION).keys() == before.keys() and warnings
    memory_only.close()


# ------------------------------------------------------------------ compact evidence

def test_compact_keeps_the_sentences_that_matter_and_marks_the_rest():
    focus = Focus(frozenset(terms("Where does Mira go bouldering?")))
    text = "I had a long week. On Saturdays I go bouldering at the gym. Then we eat pizza. It was fun."
    assert compact(text, focus) == "… On Saturdays I go bouldering at the gym. …"
    assert compact("I go bouldering on Saturdays.", focus) == "I go bouldering on Saturdays."  # one sentence
    assert compact("Nothing here. Nor here.", focus) == "Nothing here. Nor here."  # no sentence matters
    entry = Entry({"seq": "1", "time": "2024-03-02T09:00", "speaker": "Mira"}, text)
    assert render_entry(entry, focus=focus) == "[2024-03-02 09:00] Mira: … On Saturdays I go bouldering at the gym. …"


def test_compact_evidence_fits_more_entries_and_cites_them_whole(cli, mira):
    store, _ = mira
    assert remember(cli, "A long note. Mira told me about bouldering. It rained all day. The bus was late. "
                    "We had soup for dinner. The cat slept on the sofa.")
    library = Library(store)
    doc = library.doc("CURRENT")
    picks = [("CURRENT", line) for line in reversed(doc.lines)]
    focus = Focus(frozenset(terms("bouldering Mira")))
    whole, short = assemble(library, picks, 120), assemble(library, picks, 120, focus=focus)
    count = lambda evidence: sum(len(e.seqs) for e in evidence)  # noqa: E731
    assert count(short) > count(whole)
    note = next(e for e in short if "A long note" not in e.text and "told me about bouldering" in e.text)
    assert "…" in note.text
    read = cli("read", note.doc, "--lines", f"{note.start_line}-{note.end_line}", "--json").json
    assert any("The cat slept on the sofa." in line["text"] for line in read["lines"])  # the cited line is whole
    # ask --evidence-only shows its best entries whole in the first quarter of its budget
    asked = cli("ask", "What did Mira say about bouldering?", "--evidence-only", "--budget", "100", "--json")
    assert asked.code == 0 and any("…" in e["text"] for e in asked.json["evidence"])
    asked = cli("ask", "What did Mira say about bouldering?", "--evidence-only", "--budget", "2000", "--json")
    assert asked.code == 0 and any("The cat slept on the sofa." in e["text"] for e in asked.json["evidence"])
    assert not any("…" in e["text"] for e in asked.json["evidence"])


def test_the_best_entries_are_shown_whole_in_the_first_part_of_the_budget(cli, mira):
    store, _ = mira
    long = ("I had a long week. On Saturdays I go bouldering at the gym. Then we eat pizza. It was fun.",
            "The bus was late again. Mira says bouldering keeps her sane. We had soup for dinner.")
    for text in long:
        assert remember(cli, text)
    library = Library(store)
    doc = library.doc("CURRENT")
    first, second = (next(n for n in doc.lines if doc.entries[n].text == text) for text in long)
    words = frozenset(terms("Where does Mira go bouldering?"))
    one = count_tokens(render_entry(doc.entries[first]) + "\n")
    shown = assemble(library, [("CURRENT", first), ("CURRENT", second)], 400, focus=Focus(words, whole_until=one))
    text = "\n".join(e.text for e in shown)
    assert long[0] in text  # the best entry fits in the first part: whole
    assert "… Mira says bouldering keeps her sane. …" in text and long[1] not in text  # the next one: compact
    shown = assemble(library, [("CURRENT", first), ("CURRENT", second)], 400, focus=Focus(words, whole_until=one - 1))
    assert long[0] not in "\n".join(e.text for e in shown)  # it does not fit: compact
    words_only = {"closest_sentence": False}  # no index needed for the focus
    assert policy.focus(None, "bouldering", replace(policy.DEFAULT, **words_only), 400).whole_until == 100
    assert policy.focus(None, "bouldering", replace(policy.ANSWERING, **words_only), 400).whole_until == 0  # all compact


LONG_ANSWERS = {  # Mira's sports again, each said in the middle of a long turn that shares no word with the question
    "D2:3": ("Mira", "The trains were a mess again and I was late for everything. On Saturdays I go bouldering "
                     "at the climbing gym with Pia. Afterwards we usually grab noodles at the place by the river."),
    "D4:3": ("Mira", "My sister phoned about the seating chart for the wedding, which took ages. Tuesday evenings "
                     "are for volleyball with my team from work. The bakery on the corner closed, sadly."),
}


def test_an_entry_holding_no_word_of_the_question_is_shown_as_its_nearest_sentence():
    text = "I had a long week. On Saturdays I go bouldering at the gym. Then we eat pizza."
    words = frozenset(terms(QUESTION))
    assert compact(text, Focus(words)) == text  # no sentence holds a word of the question: whole, without meaning
    nearest = Focus(words, lambda parts: [float("bouldering" in part) for part in parts])
    assert compact(text, nearest) == "… On Saturdays I go bouldering at the gym. …"
    # a sentence with a word of the question is what is shown; meaning only decides where words do not
    assert compact("Mira has a new job. On Saturdays I go bouldering.", nearest) == "Mira has a new job. …"
    assert compact("On Saturdays I go bouldering.", nearest) == "On Saturdays I go bouldering."  # one sentence


@pytest.fixture
def long_turns(cli, store_dir, tmp_path):
    yield from ingested(cli, store_dir, tmp_path, LONG_ANSWERS)


def test_nearest_sentences_fit_more_answers_than_whole_entries(long_turns, cli):
    store, index = long_turns
    on = replace(policy.DEFAULT, whole_share=0.0)  # every entry compact, as the evidence memcli answers from
    off = replace(on, closest_sentence=False)

    def found(tuning: policy.Tuning, budget: int) -> int:
        evidence = policy.evidence_only(store, index, QUESTION, budget=budget, tuning=tuning).evidence
        return len({ref for e in evidence for ref in e.refs} & set(LONG_ANSWERS))

    sweep = {budget: (found(on, budget), found(off, budget)) for budget in range(40, 401, 20)}
    assert all(with_it >= without for with_it, without in sweep.values()), sweep
    assert any(with_it > without for with_it, without in sweep.values()), sweep
    assert sweep[400] == (2, 2)  # a budget that holds both whole: the same answers either way
    asked = cli("ask", QUESTION, "--evidence-only", "--budget", "120", "--json")  # the turns over a quarter of it
    shown = [e for e in asked.json["evidence"] if "bouldering" in e["text"]]
    assert shown and "… On Saturdays I go bouldering at the climbing gym with Pia. …" in shown[0]["text"]
    read = cli("read", shown[0]["doc"], "--lines", f"{shown[0]['start_line']}-{shown[0]['end_line']}", "--json").json
    assert any("grab noodles" in line["text"] for line in read["lines"])  # the citation covers the whole turn


def test_sentence_vectors_are_computed_with_the_entries_not_per_question(long_turns):
    store, index = long_turns
    vectors = index.vectors()
    texts = {entry_text(entry) for entry in Library(store).doc("CURRENT").entries.values()}
    assert vectors.refresh() == len(texts) + 6  # each entry's text, and the three sentences of each long answer
    calls = []
    real = vectors.encoder.encode
    vectors.encoder.encode = lambda texts, on_batch=None: calls.append(list(texts)) or real(texts)
    every = replace(policy.DEFAULT, whole_share=0.0)  # every entry compact: its sentences are compared
    first = policy.evidence_only(store, index, QUESTION, budget=400, tuning=every)
    asked = policy.meaning(index, QUESTION)  # the question as compared in meaning, encoded once
    assert calls == [[asked]] and any("…" in e.text for e in first.evidence)  # read from the cache
    again = LibraryIndex(store, index.partition_tokens, cache_dir=index.folder, semantic=True)
    again.vectors().encoder.encode = vectors.encoder.encode
    calls.clear()
    assert [e.text for e in policy.evidence_only(store, again, QUESTION, budget=400, tuning=every).evidence] == \
        [e.text for e in first.evidence]
    assert calls == [[asked]]  # another process reads the sentences' vectors too
    calls.clear()  # a sentence the cache lacks (written since the refresh) is computed once and stored
    unseen = again.vectors().sentence_vectors(["A sentence no entry holds yet."])
    assert calls == [["A sentence no entry holds yet."]] and unseen.shape == (1, 384)
    calls.clear()
    assert np.allclose(vectors.sentence_vectors(["A sentence no entry holds yet."]), unseen) and calls == []
    again.close()


def test_a_budget_the_candidates_leave_unfilled_takes_the_entries_nearest_in_meaning(mira):
    store, index = mira
    library = Library(store)
    lines = [("CURRENT", line) for line in library.doc("CURRENT").lines]
    similar = index.similarities(QUESTION)
    scores = {lines[5]: 2.0, lines[9]: 1.0}  # two candidates
    ranked = policy.order(library, scores, similar, policy.DEFAULT)
    assert ranked[:2] == [lines[5], lines[9]] and sorted(ranked) == lines  # the candidates, then every other entry
    rest = [similar[key] for key in ranked[2:]]
    assert rest == sorted(rest, reverse=True)  # nearest in meaning first
    words = replace(policy.DEFAULT, semantic_weight=0.0)
    assert policy.order(library, scores, similar, words) == ranked[:2]  # without the signal: the candidates alone
    assert policy.order(library, {}, similar, policy.DEFAULT) == []  # no word of the question in memory: nothing


class Speakers:
    def speakers(self):
        return {"Vera", "Melanie", "Gina", "Jon", "Mary Ann", "user", "assistant"}


def test_a_question_is_compared_in_meaning_without_the_name_of_the_one_person_it_names():
    index = Speakers()
    assert policy.meaning(index, "Which company does Vera work for?") == "Which company does work for?"
    assert policy.meaning(index, "When is Vera\u2019s thesis due?") == "When is thesis due?"
    assert policy.meaning(index, "When did Mel paint a sunrise?") == "When did paint a sunrise?"  # a short form
    assert policy.meaning(index, "What does Mary Ann like?") == "What does like?"
    for kept in ("What do Jon and Gina both have in common?",  # two people: nothing would be left to compare
                 "What does the user like?", "Which company does Ana work for?", "Vera?"):
        assert policy.meaning(index, kept) == kept


def test_the_line_that_answers_ranks_above_the_persons_small_talk(tmp_path):
    """With the name in the question's vector, the person's short lines are nearest ("Vera: Just got back from
    a walk."); without it, the line about work is (the real vectors)."""
    from memcli import Memory

    memory = Memory(tmp_path / "store", create=True, settings={"search.vectors": "inline"})
    for text, when in (("My cousin visited over the weekend.", "2023-05-20T16:03"),
                       ("I've been at Tessel for three years.", "2023-05-20T16:15"),
                       ("Any good podcast suggestions?", "2023-06-12T14:06"),
                       ("I handed in my notice and joined Quarry Bank.", "2023-07-19T14:00"),
                       ("Just got back from a walk.", "2023-10-12T15:03"),
                       ("I keep forgetting to water the plants.", "2023-11-01T14:00"),
                       ("These days it's all squash for me.", "2023-11-01T14:03")):
        memory.remember(text, speaker="Vera", time=when)
    question = "Which company does Vera work for?"
    with memory.store.reading():
        found = policy.evidence_only(memory.store, memory.index, question, budget=2000)
        first = found.library.doc(found.order[0][0]).entries[found.order[0][1]].text
        named = memory.index.similarities(question)
        plain = memory.index.similarities(policy.meaning(memory.index, question))
    assert first == "I handed in my notice and joined Quarry Bank.", first
    job = [key for key in named if found.library.doc(key[0]).entries[key[1]].text.startswith("I handed")][0]
    assert max(named[k] for k in named) > named[job] and max(plain[k] for k in plain) == plain[job]  # the name hid it
    memory.close()


# ------------------------------------------------------------------ evidence as a set

def similarities_of(texts: list[str], question: str):
    """Real sentence vectors of ``texts`` (keys ("doc", 1), ("doc", 2), ...) against ``question``."""
    encoder = Encoder()
    matrix, (asked,) = encoder.encode(texts), encoder.encode([question])
    keys = [("doc", n) for n in range(1, len(texts) + 1)]
    return keys, Similarities(keys, {key: row for row, key in enumerate(keys)}, matrix @ asked,
                              {"doc": np.arange(len(keys))}, matrix, asked)


def test_the_pool_decides_which_entries_without_a_word_of_the_question_take_their_share_of_meaning():
    """Entries of no lexical score join the candidates with their semantic share only among the
    ``semantic_pool`` most alike: the rest come after every candidate, even one whose only score is small."""
    lexical = {("doc", 1): 10.0, ("doc", 2): 0.5}  # the best line, and one that scores by its region alone
    similar = {("doc", 1): 0.8, ("doc", 2): 0.1, ("doc", 3): 0.7, ("doc", 4): 0.6, ("doc", 5): 0.0,
               ("doc", 6): 0.0, ("doc", 7): 0.0}
    one = policy.fuse(lexical, similar, policy.Tuning(semantic_weight=0.75, semantic_pool=1))
    assert set(one) == set(lexical)  # the most alike is a candidate already: nothing joins
    three = policy.fuse(lexical, similar, policy.Tuning(semantic_weight=0.75, semantic_pool=3))
    assert set(three) == {("doc", 1), ("doc", 2), ("doc", 3), ("doc", 4)}
    assert three[("doc", 4)] > three[("doc", 2)]  # near in meaning, no word: before the region's weak line
    median, spread = 0.1, 0.8 - 0.1  # the library's upper median, and the best's cosine over it
    assert three[("doc", 3)] == pytest.approx(0.75 * 10.0 * (0.7 - median) / spread)  # a share of the best score
    assert three[("doc", 2)] == 0.5  # at the median: no share


def test_a_second_fact_is_taken_before_a_restatement_of_the_first():
    keys, similar = similarities_of(["Mira: I go climbing at the gym every Saturday.",
                                     "Mira: Saturdays I am always at the climbing gym.",
                                     "Mira: I also play volleyball on Tuesdays."], "What sports does Mira do?")
    assert similar.pairwise(keys)[0, 1] > similar.pairwise(keys)[0, 2] + 0.2  # the restatement is nearer
    scores = {keys[0]: 10.0, keys[1]: 9.5, keys[2]: 8.0}
    one_by_one = sorted(keys, key=lambda key: -scores[key])
    assert policy.diverse(one_by_one, scores, similar, 0.0, 3) == one_by_one
    assert policy.diverse(one_by_one, scores, similar, 0.75, 3) == [keys[0], keys[2], keys[1]]
    assert policy.diverse(one_by_one, scores, similar, 0.75, 2) == one_by_one  # outside the pool: as ranked


def test_feedback_moves_the_question_toward_what_the_best_entries_say():
    keys, similar = similarities_of(["Mira: We went camping by the lake with the kids.",
                                     "Mira: The children and I spent Sunday hiking in the woods.",
                                     "Mira: The printer at work is jammed again."], "What does Mira do outdoors?")
    moved = similar.toward([keys[0]], 1.0)
    assert moved[keys[1]] - similar[keys[1]] > moved[keys[2]] - similar[keys[2]]  # the line like the best gains more
    assert similar.toward([], 1.0) is similar and similar.toward([keys[0]], 0.0) is similar
    within = similar.within({"doc"})
    assert within.toward([keys[0]], 1.0)[keys[1]] == pytest.approx(moved[keys[1]], abs=1e-6)
