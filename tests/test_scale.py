"""What keeps questions fast and right as memory grows: the index kept per changed document, order
statistics of similarities in numpy, one pass over the folder a reading, a question that names a
person answered from that person's conversations, and no import cycle among memcli's modules."""

from __future__ import annotations

import json
import os
import random
import re
import shutil

import numpy as np
import pytest
from conftest import EXAMPLES, LOCOMO, REPO, needs_locomo, run_memcli
from test_evidence_policy import conversation

from memcli.memory import Memory
from memcli.retrieve import evidence_reader as policy
from memcli.semantic.vectors import Similarities
from memcli.store.lines import Library
from memcli.terms import terms

OTHERS = [("Ansel", "Brisa"), ("Corin", "Dalia"), ("Elio", "Fenna"), ("Gero", "Hanne"), ("Ivo", "Juna"),
          ("Kasimir", "Liv"), ("Marek", "Nele"), ("Oskar", "Pia")]


def copy_of(data: dict, names: tuple[str, str], number: int) -> dict:
    """The conversation between other people: speakers renamed in the signatures and the text."""
    swap = {"Tomas": names[0], "Lena": names[1]}
    text = json.dumps(data)
    for old, new in swap.items():
        text = text.replace(old, new)
    out = json.loads(text)
    for key, turns in out.items():
        if key.startswith("session_") and isinstance(turns, list):
            for turn in turns:
                turn["dia_id"] = f"x{number}-{turn['dia_id']}"
    return out


@pytest.fixture
def crowded(tmp_path) -> Memory:
    """Tomas and Lena's conversation among eight others that say the same things."""
    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store")
    for number, names in enumerate([("Tomas", "Lena"), *OTHERS]):
        source = tmp_path / f"conv-{number}.json"
        source.write_text(json.dumps(copy_of(conversation(), names, number) if number else conversation()))
        assert memory.ingest(source, consolidate=False).added
    memory.consolidate(llm=False)
    return memory


@pytest.mark.slow  # 4-6 s: the fast tier keeps within 5 minutes
def test_a_question_naming_a_person_is_answered_from_their_conversations(crowded, monkeypatch):
    question = "What did Tomas name the dogs?"
    asked = crowded.ask(question, reader="evidence-only", budget=400)
    refs = [ref for e in asked.evidence for ref in e.refs]
    assert "D5:9" in refs  # "Biscuit and Pepper, after the snacks ..."
    assert refs and not any(ref.startswith("x") for ref in refs)  # nothing from the eight others
    done = run_memcli("--store", str(crowded.store.root), "ask", question, "--evidence-only", "--budget", "400",
                      "--json")
    assert done.code == 0, done.stderr
    assert [r for e in json.loads(done.stdout)["evidence"] for r in e["refs"]] == refs  # the command says the same
    monkeypatch.setattr(policy, "named_documents", lambda index, question: None)
    crowded.index.parsed.clear()
    everyone = [ref for e in crowded.ask(question, reader="evidence-only", budget=400).evidence for ref in e.refs]
    assert any(ref.startswith("x") for ref in everyone)  # without it the others' words compete


def test_a_first_question_on_an_index_not_built_yet_knows_the_people_it_names(tmp_path):
    """The index is refreshed before the speakers a question names are looked up: the first question on a store
    whose index is not built yet (a clone, a cleared cache) is answered from that person's conversation alone."""
    Memory.init(store=tmp_path / "store")
    with Memory(store=tmp_path / "store", cache_dir=tmp_path / "cache", on_warning=list.append) as memory:
        for number, names in enumerate([("Tomas", "Lena"), *OTHERS[:2]]):
            source = tmp_path / f"conv-{number}.json"
            source.write_text(json.dumps(copy_of(conversation(), names, number) if number else conversation()))
            assert memory.ingest(source, consolidate=False).added
        memory.consolidate(llm=False)
    with Memory(store=tmp_path / "store", cache_dir=tmp_path / "new-cache", on_warning=list.append) as fresh:
        asked = fresh.ask("What did Tomas name the dogs?", reader="evidence-only", budget=400)
    refs = [ref for e in asked.evidence for ref in e.refs]
    assert refs and not any(ref.startswith("x") for ref in refs)


def test_named_documents_are_the_persons_conversations_and_the_owners_own(crowded):
    crowded.remember("Note to self: buy dog food on Friday.")
    crowded.index.refresh()
    people = crowded.index.people()
    named = policy.named_documents(crowded.index, "Where did Ansel run?")
    assert named and named != set(people)
    for doc_id, (speakers, _, _) in people.items():
        assert (doc_id in named) == ("Ansel" in speakers or "Brisa" in speakers or not speakers
                                     or doc_id == "CURRENT"), doc_id
    assert policy.named_documents(crowded.index, "Who ran ten kilometres?") is None  # names nobody


def test_similarities_top_is_a_full_sort(tmp_path):
    rng = random.Random(3)
    keys = [(f"d{d}", line) for d in range(20) for line in range(1, 30)]
    values = np.array([rng.choice([0.1, 0.2, 0.25, 0.5, rng.random()]) for _ in keys], np.float32)
    rows: dict[str, list[int]] = {}
    for at, (doc, _) in enumerate(keys):
        rows.setdefault(doc, []).append(at)
    similar = Similarities(keys, {k: i for i, k in enumerate(keys)}, values,
                           {d: np.array(r) for d, r in rows.items()})
    plain = {k: float(v) for k, v in zip(keys, values)}
    exclude = set(rng.sample(keys, 40))
    within = {"d1", "d4", "d7"}
    for n in (0, 1, 5, 30, 200, len(keys) + 5):
        assert similar.top(n, exclude) == policy.top_similar(plain, n, exclude)
        assert similar.within(within).top(n, exclude) == policy.top_similar(policy.within(plain, within), n, exclude)
    assert similar.median() == policy.median_similarity(plain)
    assert similar.within(within).median() == policy.median_similarity(policy.within(plain, within))
    assert dict(similar.within(within)) == policy.within(plain, within)


def test_signatures_in_one_pass_equal_a_stat_per_document(crowded, tmp_path):
    store = crowded.store
    docs = store.docs_dir
    os.symlink(docs / f"{store.doc_ids()[0]}.md", docs / "linked.md")  # never read
    os.mkfifo(docs / "fifo.md")
    slow = {doc_id: store.signature(doc_id) for doc_id in store.all_ids()}
    assert store.signatures() == slow and "linked" not in slow and "fifo" not in slow
    with store.reading():
        first = store.signatures()
        (docs / f"{store.doc_ids()[0]}.md").write_text("changed by hand\n")
        assert store.signatures() == first  # read once a reading: no writer runs under the lock
    assert store.signatures() != first


def test_the_index_kept_per_document_scores_as_one_built_anew(tmp_path):
    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store")
    memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    memory.consolidate(llm=False)
    memory.index.search("adoption", 5)
    memory.ingest(EXAMPLES / "chat-messages.json", consolidate=False)
    memory.forget(["3-5"])
    memory.remember("The pottery class moved to Thursday evenings.")
    queries = ["adoption agency", "pottery class Thursday", "minivan", "what did Priya make"]
    kept = {q: [(h.doc, h.start_line, h.end_line, round(h.score, 9)) for h in memory.index.search(q, 20)]
            for q in queries}
    idf = memory.index.idf()
    anew = Memory(store=tmp_path / "store", cache_dir=tmp_path / "fresh")
    for q in queries:
        assert [(h.doc, h.start_line, h.end_line, round(h.score, 9)) for h in anew.index.search(q, 20)] == kept[q]
    fresh_idf = anew.index.idf()
    for term in ["adopt", "potteri", "thursday", "minivan", "never-seen"]:
        assert idf(term) == fresh_idf(term)
    assert anew.index.people() == memory.index.people()


@needs_locomo
def test_the_scale_benchmark_renames_people_everywhere():
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_scale import renamed

    data = json.loads((LOCOMO / "conv-26.json").read_text())
    copy = renamed("conv-26", data, 5)
    text = json.dumps(copy)
    for name in (data["speaker_a"], data["speaker_b"]):
        assert not re.search(rf"\b{name}\b", text)
    refs = [t["dia_id"] for k, v in copy["conversation"].items() if k.startswith("session_") and isinstance(v, list)
            for t in v]
    assert refs and all(r.startswith("x5-") for r in refs)


def test_a_new_process_maps_the_vectors_matrix_and_a_forget_removes_it(tmp_path):
    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store", settings={"search.semantic": True})
    memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    memory.consolidate(llm=False)
    question = "Which agency did Caroline apply to?"
    before = memory.index.similarities(question)
    folder = memory.index.folder
    saved = sorted(p.name for p in folder.glob("vectors-matrix-*"))
    assert len(saved) == 2  # the matrix and its keys, named by the documents they were built from
    again = Memory(store=tmp_path / "store", settings={"search.semantic": True})
    mapped = again.index.similarities(question)
    assert isinstance(again.index.vectors()._matrix, np.memmap)  # mapped, not read out of SQLite
    assert dict(mapped) == dict(before)
    memory.remember("Caroline also asked a second agency about open adoption.")
    changed = Memory(store=tmp_path / "store", settings={"search.semantic": True})
    assert len(changed.index.similarities(question)) == len(before) + 1  # an older snapshot is not used
    assert sorted(p.name for p in folder.glob("vectors-matrix-*")) != saved
    changed.forget(["1"])
    assert not list(folder.glob("vectors-matrix-*"))  # it held the forgotten entry's vector


class Stopped(Exception):
    pass


class Stopping:
    """The real encoder, which stops the job (as a kill would) when asked for chunk ``at``; ``then``: run
    first, between two of the job's chunks."""

    def __init__(self, encoder, at: int, then=None):
        self.encoder, self.at, self.then, self.calls = encoder, at, then, 0
        self.name, self.dimensions = encoder.name, encoder.dimensions

    def encode(self, texts, on_batch=None):
        self.calls += 1
        if self.calls == self.at:
            if self.then is None:
                raise Stopped
            self.then()
        return self.encoder.encode(texts, on_batch=on_batch)


def _job_stopped_midway(tmp_path, monkeypatch, then=None, at=3):
    """A store of the shipped example (25 entries), whose vectors job stored ``at - 1`` chunks of eight
    texts and stopped (or, with ``then``, ran ``then`` before the next and went on); (memory, the job's
    vectors, folder)."""
    from memcli.semantic import vectors as vectors_module

    monkeypatch.setattr(vectors_module, "CHUNK", 8)
    monkeypatch.setattr(vectors_module, "PARTIAL_EVERY", 0.0)
    monkeypatch.setattr(vectors_module, "PARTIAL_COST", 0)
    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store", settings={"search.semantic": True, "search.vectors": "inline"})
    memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    folder = memory.index.folder
    real = memory.index.vectors().encoder
    job = vectors_module.EntryVectors(memory.store, folder, Stopping(real, at, then))
    return memory, job, folder


@pytest.mark.parametrize("at", [1, 3])  # stopped in its first chunk (nothing stored yet) or its third
def test_a_question_while_the_job_runs_maps_what_it_has_so_far(tmp_path, monkeypatch, at):
    from memcli.cache import file_signatures
    from memcli.semantic.vectors import EntryVectors

    memory, job, folder = _job_stopped_midway(tmp_path, monkeypatch, at=at)
    with pytest.raises(Stopped):
        job.refresh()  # the job's own refresh computes
    partial = sorted(folder.glob("vectors-matrix-*-partial-*"))
    assert [p.suffix for p in partial] == [".npy", ".npz"]  # the newest only
    assert f"-partial-{8 * (at - 1)}." in partial[0].name
    encoder = memory.index.vectors().encoder
    asked = EntryVectors(memory.store, folder, encoder)
    asked.inline = False  # a question while the job runs: computes nothing
    question = "Which agency did Caroline apply to?"
    mapped = asked.similarities(question)
    assert isinstance(asked._matrix, np.memmap) and len(mapped) == 8 * (at - 1)
    for path in partial:
        path.unlink()
    read = EntryVectors(memory.store, folder, encoder)
    read.inline = False  # the same question without the snapshot: the documents parsed, every text looked up
    from_rows = read.similarities(question)
    assert (asked.missing, asked.missing_texts) == (read.missing, read.missing_texts)
    assert asked.missing == 25 - 8 * (at - 1)
    library = Library(memory.store)
    every = {(doc_id, line): library.doc(doc_id).entries[line] for doc_id in file_signatures(memory.store)
             for line in library.doc(doc_id).lines}
    assert len(every) == 25 and asked.of(every).keys() == mapped.keys()  # nothing computed while the job runs
    asked.inline = True
    assert asked.of(every).keys() == every.keys()  # a question that may compute (search.vectors = inline)
    assert mapped.keys() == from_rows.keys()
    assert all(abs(mapped[key] - from_rows[key]) < 1e-6 for key in mapped)
    done = EntryVectors(memory.store, folder, encoder)
    done.refresh()  # the job run again: every vector, the whole matrix kept, no partial one left
    assert done.missing == 0 and not list(folder.glob("vectors-matrix-*-partial-*"))
    assert len(list(folder.glob("vectors-matrix-*"))) == 2
    read.refresh(compute=False)  # a process that read the rows while entries were missing maps the whole one
    assert read.missing == 0 and isinstance(read._matrix, np.memmap) and len(read._keys) == 25


def test_a_forget_while_the_job_runs_leaves_no_snapshot_nor_vector_of_the_forgotten(tmp_path, monkeypatch):
    from memcli.cache import file_signatures
    from memcli.semantic.vectors import _key, entry_text

    forgotten = []
    memory, job, folder = _job_stopped_midway(tmp_path, monkeypatch, then=lambda: forgotten.append(
        memory.forget([str(first.seq), str(in_flight.seq)])))
    library = Library(memory.store)
    entries = [library.doc(d).entries[line] for d in file_signatures(memory.store) for line in library.doc(d).lines]
    first, in_flight = entries[0], entries[20]  # embedded in the first chunk / in the third, when the forget comes
    job.refresh()  # the forget comes while its third chunk is computed: the chunk is not stored
    assert forgotten and forgotten[0].count == 2
    assert not list(folder.glob("vectors-matrix-*"))  # the partial snapshots held the first one's vector
    stored = {row[0] for row in job.db.execute("SELECT key FROM texts")}
    assert len(stored) == 15 and not {_key(job.encoder.name, entry_text(e)) for e in (first, in_flight)} & stored
    job.refresh()  # looked at again: what is left is computed
    assert job.missing == 0 and memory.status().entries == len(job._keys) == 23


def test_a_write_while_the_job_runs_keeps_the_chunk_it_was_computing(tmp_path, monkeypatch):
    memory, job, folder = _job_stopped_midway(
        tmp_path, monkeypatch, then=lambda: memory.remember("Caroline also asked a second agency about open adoption."))
    job.refresh()  # the write comes while its third chunk is computed: the chunk is stored, then it looks again
    assert job.changed and job.db.execute("SELECT COUNT(*) FROM texts").fetchone()[0] == 24
    job.refresh()
    assert job.missing == 0 and len(job._keys) == 26 and memory.status().vectors["missing"] == 0


def _hits(index, queries):
    return {q: [(h.doc, h.start_line, h.end_line, round(h.score, 9))
                for h in index.search(q, 20, refresh=False, snippets=False)] for q in queries}


def test_each_flush_reindexes_only_what_the_last_one_wrote_and_the_index_stays_exact(tmp_path, monkeypatch):
    from memcli.consolidate import run
    from memcli.consolidate.workspace import Workspace
    from memcli.index import LibraryIndex

    monkeypatch.setenv("MEMCLI_CONSOLIDATE_TOKENS", "400")  # several flushes
    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store")
    memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    memory.ingest(EXAMPLES / "chat-messages.json", consolidate=False)
    looked_at, checked = [], []
    refresh, start = LibraryIndex.refresh, Workspace.__post_init__

    def spy_refresh(self, only=None):
        looked_at.append(None if only is None else set(only))
        return refresh(self, only)

    def compare(self):  # the index as the flush sees it, against one built anew from the folder
        start(self)
        queries = ["adoption agency", "pottery class", "minivan", "Priya", "weekend plans"]
        anew = LibraryIndex(self.store, self.index.partition_tokens, cache_dir=tmp_path / f"anew-{len(checked)}")
        anew.refresh()
        assert _hits(self.index, queries) == _hits(anew, queries)
        assert self.index.people() == anew.people()
        anew.close()
        checked.append(True)

    monkeypatch.setattr(LibraryIndex, "refresh", spy_refresh)
    monkeypatch.setattr(Workspace, "__post_init__", compare)
    result = memory.consolidate(llm=False)
    assert len(result.flushes) >= 3 and len(checked) == len(result.flushes)
    partial = [seen for seen in looked_at if seen is not None]
    assert len(partial) >= len(result.flushes) - 1  # after the first flush, only what was written
    assert all(run.CURRENT_ID in seen and len(seen) < len(memory.store.doc_ids()) + 1 for seen in partial)


def test_another_writer_between_flushes_makes_the_next_read_the_whole_folder(tmp_path):
    import time

    from memcli.consolidate.run import _since

    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store")
    memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    memory.consolidate(llm=False)
    store = memory.store
    doc_id = store.doc_ids()[0]
    with store.writing() as txn:
        txn.write(store.relpath(doc_id), store.read_text(doc_id))
        txn.commit()
        stamp = store.folder_stamp()
    assert _since(store, {doc_id, "CURRENT"}, stamp) == {doc_id, "CURRENT"}
    memory.remember("The pottery class moved to Thursday evenings.")  # CURRENT only: it is always looked at
    assert _since(store, {doc_id}, stamp) == {doc_id}
    time.sleep(0.05)  # past the file system's timestamp granularity
    entry = next(e.seq for _, e in store.load(doc_id).doc.entries() if e.seq)
    memory.forget([str(entry)])  # another writer replaces a document
    assert _since(store, {doc_id}, stamp) is None
    assert _since(store, None, stamp) is None and _since(store, {doc_id}, None) is None


@pytest.mark.slow  # a fast-tier budget of 5 minutes; CI runs it
def test_a_named_question_ranks_among_the_persons_documents_as_if_they_were_all_of_memory(crowded, tmp_path):
    questions = ["What did Tomas name the dogs?", "Where does Lena run on weekends?",
                 "What did Tomas and Lena cook together?", "What is Lena afraid of?"]
    theirs = policy.named_documents(crowded.index, questions[0])
    Memory.init(store=tmp_path / "alone")  # a store of their documents only, as they are in the crowded one
    for doc_id in theirs - {"CURRENT"}:
        shutil.copy(crowded.store.doc_path(doc_id), tmp_path / "alone" / "docs")
    alone = Memory(store=tmp_path / "alone")
    alone.index.refresh()
    crowded.index.refresh()
    for question in questions:
        assert policy.named_documents(crowded.index, question) == theirs
        scoped = [(h.doc, h.start_line, round(h.score, 9)) for h in crowded.index.search(question, 30, among=theirs)]
        assert scoped == [(h.doc, h.start_line, round(h.score, 9)) for h in alone.index.search(question, 30)]
        assert [crowded.index.idf(among=theirs)(t) for t in terms(question)] == \
            [alone.index.idf()(t) for t in terms(question)]
        lexical = policy.lexical_scores(Library(crowded.store), crowded.index, question, among=theirs)
        assert lexical == pytest.approx(policy.lexical_scores(Library(alone.store), alone.index, question))
        similar = policy.within(crowded.index.similarities(question), theirs)
        assert dict(similar) == pytest.approx(dict(alone.index.similarities(question)), abs=1e-5)
        assert policy.median_similarity(similar) == pytest.approx(policy.median_similarity(
            alone.index.similarities(question)), abs=1e-5)
        got = [r for e in crowded.ask(question, reader="evidence-only", budget=600).evidence for r in e.refs]
        want = [r for e in alone.ask(question, reader="evidence-only", budget=600).evidence for r in e.refs]
        assert got == want, question  # the statistics (idf, lengths, the similarity median) are theirs alone
    assert any(crowded.index.idf()(t) != alone.index.idf()(t) for t in terms(questions[0]))  # the crowd's differ


def test_a_short_form_of_a_name_in_a_question_names_the_speaker(crowded):
    assert policy.named_documents(crowded.index, "Where did Tom run?") == \
        policy.named_documents(crowded.index, "Where did Tomas run?")
    assert policy.named_documents(crowded.index, "Tom ran where?") is None  # the first word may be any word
    assert policy.named_documents(crowded.index, "Where did tom run?") is None  # not capitalized
    assert policy.named_documents(crowded.index, "Where did To run?") is None  # too short


def test_tied_partitions_rank_by_document_however_the_index_grew(tmp_path):
    Memory.init(store=tmp_path / "store")
    memory = Memory(store=tmp_path / "store")
    memory.ingest(EXAMPLES / "caroline-and-priya.json", consolidate=False)
    memory.consolidate(llm=False)
    docs = memory.store.docs_dir
    original = docs / f"{memory.store.doc_ids()[0]}.md"
    for name in ("zz-twin", "aa-twin"):
        shutil.copy(original, docs / f"{name}.md")
    question = "adoption agency pottery minivan Priya"
    before = [(h.doc, h.start_line, h.score) for h in memory.index.search(question, 50)]
    (docs / "aa-twin.md").write_text((docs / "aa-twin.md").read_text() + "\n")  # indexed again: new partition ids
    after = [(h.doc, h.start_line, h.score) for h in memory.index.search(question, 50)]
    assert before == after
    assert len({score for *_, score in after}) < len(after)  # the twins tie
    assert after == sorted(after, key=lambda hit: (-hit[2], hit[0], hit[1]))
